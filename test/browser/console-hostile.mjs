// Drives Debian's Chromium, headless, through what a writer of one
// database can make the console and GraphiQL of its admin show: markup,
// script and javascript: URLs in the database's label and comment, in
// its schema's descriptions, in document ids, values and JSON keys, in a
// commit's author and message (made before the views open, and one
// while the Stream view is open), and in a webhook's description.
//
// Every payload calls alert(): a dialog fails the test, and so does a
// Content-Security-Policy violation (an inline handler or script the
// page was made to hold), any element made of a payload (an img,
// script, iframe, object or embed, an [onerror] attribute, a
// javascript: link) in the page, or a payload not shown as text where
// the view shows it. Then a page of another site frames the console
// (refused: frame-ancestors 'none'), GraphiQL and the landing page (not
// served: 401 or 403), while a frame of /api/ok, the control, loads.
//
//   node console-hostile.mjs <daemon URL> <admin password> <writer> <writer password> <database> <framing page URL>
//
// A user of another organization, otto (password otto-password), without
// a role on the database, signs in last: the console shows nothing of it.
//
// The database (admin/<database>) and its documents, commit and webhook
// are made by the Go test (internal/console TestBrowserConsoleHostile).
// CHROMIUM names the browser (default /usr/bin/chromium).
import { launch, typeInto, waitFor } from './chromium.mjs';

const [base, adminPassword, writer, writerPassword, name, framing] = process.argv.slice(2);
if (!base || !adminPassword || !writer || !writerPassword || !name || !framing) {
  console.error('usage: node console-hostile.mjs <daemon URL> <admin password> <writer> <writer password> <database> <framing page URL>');
  process.exit(2);
}
const db = `admin/${name}`;
const step = (s) => console.log(`ok: ${s}`);
const problems = [];
const { browser, close: closeBrowser } = await launch({ lang: 'en-US' });

let failed = false;
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  page.on('dialog', async (d) => {
    problems.push(`a dialog opened: ${d.message()}`);
    await d.dismiss();
  });
  await page.evaluateOnNewDocument(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI}`);
    });
  });
  page.on('console', (m) => {
    if (/CSP violation|Refused to/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

  // clean fails on an element made of a payload in root, and on a
  // problem seen so far; it returns root's text.
  async function clean(what, root = 'body') {
    const found = await page.evaluate((sel) => {
      const r = document.querySelector(sel);
      if (!r) return { missing: true };
      const bad = [...r.querySelectorAll('img, iframe, object, embed, script:not([type=module]), [onerror], [onload], a[href^="javascript:" i], form[action]')]
        .map((e) => e.outerHTML.slice(0, 120));
      return { bad, text: r.innerText };
    }, root);
    if (found.missing) throw new Error(`${what}: no ${root}`);
    if (found.bad.length) throw new Error(`${what}: elements made of a payload: ${found.bad.join(', ')}`);
    if (problems.length) throw new Error(`${what}: ${problems.join('; ')}`);
    return found.text;
  }
  // shows waits for the view to show each of texts, as text.
  async function shows(what, texts, root = 'main') {
    for (const t of texts) {
      await waitFor(`${what} to show ${JSON.stringify(t)}`, () => page.evaluate((sel, s) => document.querySelector(sel)?.innerText.includes(s), root, t));
    }
    await clean(what);
    step(`${what} shows ${texts.map((t) => JSON.stringify(t)).join(', ')} as text`);
  }
  const visit = (path) => page.evaluate((p) => {
    history.pushState(null, '', p);
    dispatchEvent(new PopStateEvent('popstate'));
  }, path);

  // The console, as the super user.
  await page.goto(`${base}/console/`, { waitUntil: 'load' });
  await typeInto(page, '#signin-user', 'admin');
  await typeInto(page, '#signin-password', adminPassword);
  await page.click('button[type=submit]');
  await page.waitForSelector('.who');
  await shows('the databases', ['<img src=x onerror=alert(1)>', '</script><script>alert(2)</script>']);
  await visit(`/console/${db}`);
  await shows('the database', ['<img src=x onerror=alert(1)>', '</script><script>alert(2)</script>', 'Note']);
  await visit(`/console/${db}/documents/Note`);
  await shows('the documents', ['Note/<img/src=x/onerror=alert(6)>', '<img src=x onerror=alert(7)>', '{"<img src=x onerror=alert(8)>":"javascript:alert(9)"']);
  await visit(`/console/${db}/documents/Note?open=${encodeURIComponent('Note/<img/src=x/onerror=alert(6)>')}`);
  await waitFor('the document open', () => page.$('form textarea, form input[id^="field-"], .panel'));
  await waitFor('its form to hold the values', () => page.evaluate(() => [...document.querySelectorAll('main input, main textarea')].some((e) => e.value.includes('<img src=x onerror=alert(7)>'))));
  await clean('the document open');
  step('the document opened holds its values in its form, as text');
  await visit(`/console/${db}/history`);
  await shows('the history', ['<img src=x onerror=alert(5)>', '<script>alert(10)</script>']);
  await visit(`/console/${db}/history?commit=1`);
  await shows('a commit', ['<img src=x onerror=alert(5)>', '<script>alert(10)</script>', 'Note/<img/src=x/onerror=alert(6)>', '<img src=x onerror=alert(7)>']);
  await visit(`/console/${db}/history?doc=${encodeURIComponent('Note/<img/src=x/onerror=alert(6)>')}`);
  await shows('a document\'s history', ['<img src=x onerror=alert(5)>', '<script>alert(10)</script>', '<img src=x onerror=alert(7)>']);
  // Its second version's message starts with a right-to-left override
  // (U+202E): it must not reorder what follows it on the line, the user
  // who wrote the version, which would then read as the message's end
  // ("· admin") with the user's name reversed before it.
  const layout = await page.evaluate(() => {
    for (const p of document.querySelectorAll('li.version > p')) {
      const texts = [];
      const walk = document.createTreeWalker(p, NodeFilter.SHOW_TEXT);
      for (let n; (n = walk.nextNode());) texts.push(n);
      const msg = texts.find((n) => n.data.startsWith('\u202e'));
      const user = texts.find((n) => n.data === 'wendy');
      if (!msg || !user) continue;
      const rect = (n) => {
        const r = document.createRange();
        r.selectNodeContents(n);
        return r.getBoundingClientRect();
      };
      const m = rect(msg);
      const u = rect(user);
      return { msgRight: m.right, msgTop: m.top, userLeft: u.left, userTop: u.top };
    }
    return null;
  });
  if (!layout) throw new Error('a document\'s history: no version whose message starts with U+202E, by wendy');
  if (layout.msgTop !== layout.userTop || layout.userLeft < layout.msgRight - 0.5) {
    throw new Error(`a document's history: a message's right-to-left override moves the user who wrote the version (${JSON.stringify(layout)}): the user's name must be after the message, on its line`);
  }
  step('a document\'s history: a message\'s right-to-left override does not reorder the user who wrote the version');
  await visit(`/console/${db}/webhooks`);
  await shows('the webhooks', ['<img src=x onerror=alert(11)>']);

  // The stream, with a commit made by the writer while it is open.
  await visit(`/console/${db}/stream`);
  await waitFor('the stream to be live', () => page.evaluate(() => document.body.innerText.includes('Live: commits appear')));
  const res = await fetch(`${base}/api/document/${db}?author=${encodeURIComponent('<img src=x onerror=alert(12)>')}&message=${encodeURIComponent('</script><img src=x onerror=alert(13)>')}`, {
    method: 'POST',
    headers: { Authorization: `Basic ${Buffer.from(`${writer}:${writerPassword}`).toString('base64')}` },
    body: JSON.stringify({ '@type': 'Note', '@id': 'Note/<svg/onload=alert(14)>', text: '<svg><script>alert(15)</script></svg>' }),
  });
  if (!res.ok) throw new Error(`the writer's commit: ${res.status} ${await res.text()}`);
  await shows('the stream', ['<img src=x onerror=alert(12)>', '</script><img src=x onerror=alert(13)>', 'Note/<svg/onload=alert(14)>', '<svg><script>alert(15)</script></svg>']);

  // GraphiQL, as the super user: the schema's descriptions (markdown) in
  // its documentation pane, and a query's result.
  await page.authenticate({ username: 'admin', password: adminPassword });
  await page.goto(`${base}/api/graphiql/${db}`, { waitUntil: 'load' });
  await page.waitForSelector('.graphiql-container .graphiql-query-editor .CodeMirror', { timeout: 20000 });
  await page.click('[aria-label="Show Documentation Explorer"]');
  const follow = (t) => waitFor(`the documentation's link to ${t}`, () => page.evaluate((t) => {
    const a = [...document.querySelectorAll('.graphiql-doc-explorer a')].find((e) => e.textContent.trim() === t);
    a?.click();
    return !!a;
  }, t));
  await follow('Query');
  await follow('Note');
  await waitFor('Note\'s description', () => page.evaluate(() => document.querySelector('.graphiql-markdown-description')?.innerText.includes('<img src=x onerror=alert(3)>')));
  const docs = await clean('GraphiQL\'s documentation of Note', '.graphiql-doc-explorer');
  if (!docs.includes('[a link](javascript:alert(4))')) throw new Error(`the javascript: link of Note's description is not shown as text: ${JSON.stringify(docs)}`);
  step('GraphiQL\'s documentation shows Note\'s description as text, its javascript: link unlinked');
  await page.evaluate(() => document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror.setValue('{ Note { _id text meta } }'));
  await page.click('.graphiql-execute-button');
  await waitFor('the result', () => page.evaluate(() => (document.querySelector('.graphiql-response .CodeMirror')?.CodeMirror.getValue() || '').includes('alert(7)')));
  await clean('GraphiQL with a result');
  step('GraphiQL shows a result holding the payloads as text');
  await page.authenticate(null);

  // A user of another organization, without a role on the database,
  // sees nothing of it: not its label, classes or users; it answers as
  // a database that does not exist.
  await page.goto(`${base}/console/`, { waitUntil: 'load' });
  await typeInto(page, '#signin-user', 'otto');
  await typeInto(page, '#signin-password', 'otto-password');
  await page.click('button[type=submit]');
  await page.waitForSelector('.who');
  const nothing = async (what, wants) => {
    for (const w of wants) await waitFor(`${what} to say ${JSON.stringify(w)}`, () => page.evaluate((s) => document.querySelector('main')?.innerText.includes(s), w));
    await waitFor(`${what}: no work in progress`, async () => !(await page.$('[role=status] .spinner')));
    const t = await clean(what);
    for (const leak of ['alert(', 'wendy', 'Note/', 'hostile label']) {
      if (t.includes(leak)) throw new Error(`${what} shows ${JSON.stringify(leak)} to a user without a role: ${JSON.stringify(t)}`);
    }
  };
  await nothing('the databases, for otto', ['You can read no database yet']);
  await visit(`/console/${db}`);
  await nothing('the database, for otto', [`database ${db} does not exist`]);
  await visit(`/console/${db}/documents/Note`);
  await nothing('its documents, for otto', [`database ${db} does not exist`]);
  await visit(`/console/${db}/history`);
  await nothing('its history, for otto', [`database ${db} does not exist`]);
  await visit('/console/users');
  await nothing('the users, for otto', ['Only the super user lists and manages users']);
  step('a user of another organization sees nothing of the database: it does not exist, for them');
  await page.click('.who button');

  // A page of another site frames the console, GraphiQL and the landing
  // page, after the browser signed in to GraphiQL: the console is
  // refused by its frame-ancestors 'none'; GraphiQL and the landing page
  // are not served to another site's frame (401: Chromium sends no
  // remembered credential there; 403 for a browser that does, as a
  // cross-site read with Basic credentials); /api/ok, which may be
  // framed, is the control.
  const statuses = new Map();
  page.on('response', (r) => r.request().resourceType() === 'document' && statuses.set(r.url(), r.status()));
  await page.goto(framing, { waitUntil: 'load' });
  const want = [`${base}/console/`, `${base}/api/graphiql/${db}`, `${base}/`, `${base}/api/ok`];
  await waitFor('the four frames to load', () => want.every((u) => statuses.has(u)) && page.frames().length === 5 &&
    page.frames().every((f) => f.url() !== 'about:blank' && f.url() !== ''));
  const frames = page.frames().slice(1).map((f) => f.url());
  const shown = frames.filter((u) => !u.startsWith('chrome-error:'));
  const got = want.map((u) => statuses.get(u));
  const refused = (s) => s === 401 || s === 403;
  if (got[0] !== 200 || !refused(got[1]) || !refused(got[2]) || got[3] !== 200 || shown.includes(want[0]) || !shown.includes(want[3])) {
    throw new Error(`frames of another site: statuses ${JSON.stringify(got)}, frames ${JSON.stringify(frames)}; want the console refused (frame-ancestors), GraphiQL and / answered 401 or 403, /api/ok shown`);
  }
  step(`a page of another site cannot frame the console (frame-ancestors) and is not served GraphiQL or the landing page (${got[1]}, ${got[2]}); /api/ok, the control, loads`);
  problems.length = 0; // the refused frames' own errors
} catch (e) {
  failed = true;
  console.log(`FAIL: ${e.message}`);
} finally {
  await closeBrowser();
}
if (failed) process.exit(1);
console.log('console hostile-content browser test: every step passed');

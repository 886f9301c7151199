// Drives Debian's Chromium, headless, through Sluice's landing page and
// GraphiQL page of a database whose schema has `type Dog { name: String! }`
// and which holds Dog/rex: the landing page must link to it, a browser
// that opens the database's GraphQL URL must land on GraphiQL opened on a
// query of Dog, and the page must render with every request outside the daemon's
// origin aborted (an attempted one fails the test) and no
// Content-Security-Policy violation, run a query and show its result, run a
// subscription that shows the event of a write this script makes once the
// subscription is registered, and close the subscription's connection when
// it is stopped. A bearer token typed in the Headers pane is sent and
// kept in no storage (GraphiQL's history kept it with each query run).
// Then the _system page runs a query. The browser answers
// the daemon's Basic auth challenge, as a user does at the prompt.
// Prints one line per step; exits 1 on any failure.
//
//   node graphiql.mjs <daemon base URL> <org/db> <user> <password>
//
// CHROMIUM names the browser (default /usr/bin/chromium).
import { clickText, launch, waitFor } from './chromium.mjs';

const [base, db, user, password] = process.argv.slice(2);
if (!base || !db || !user || !password) {
  console.error('usage: node graphiql.mjs <daemon base URL> <org/db> <user> <password>');
  process.exit(2);
}
const origin = new URL(base).origin;
const authorization = 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
const step = (s) => console.log(`ok: ${s}`);


const { browser, close: closeBrowser } = await launch();

const blocked = [];
const problems = [];
let failed = false;
try {
  const page = await browser.newPage();
  await page.authenticate({ username: user, password });
  // The network is cut off: only the daemon's origin (and data: URLs,
  // which load nothing) may be reached.
  await page.setRequestInterception(true);
  page.on('request', (req) => {
    const u = req.url();
    if (u.startsWith('data:') || new URL(u).origin === origin) {
      req.continue();
      return;
    }
    blocked.push(`${req.method()} ${u}`);
    req.abort('internetdisconnected');
  });
  await page.evaluateOnNewDocument(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI}`);
    });
  });
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

  // The subscription's connection, watched through the DevTools protocol:
  // Sluice writes its first bytes (the comment ": connected") once the
  // subscription is registered, so a write after that is delivered.
  const cdp = await page.createCDPSession();
  await cdp.send('Network.enable');
  const streams = new Map(); // requestId -> {bytes, ended}
  cdp.on('Network.requestWillBeSent', (e) => {
    const accept = Object.entries(e.request.headers).find(([k]) => k.toLowerCase() === 'accept');
    if (accept && accept[1].includes('text/event-stream')) streams.set(e.requestId, { bytes: 0, ended: false });
  });
  cdp.on('Network.dataReceived', (e) => {
    const s = streams.get(e.requestId);
    if (s) s.bytes += e.dataLength;
  });
  for (const ev of ['Network.loadingFinished', 'Network.loadingFailed']) {
    cdp.on(ev, (e) => {
      const s = streams.get(e.requestId);
      if (s) s.ended = true;
    });
  }

  const editorValue = (sel) => page.evaluate((s) => document.querySelector(s)?.CodeMirror?.getValue() ?? null, sel);
  const response = () => editorValue('.graphiql-response .CodeMirror');
  // run puts query in the editor and presses the run button once GraphiQL
  // has parsed it (it reads the operation to run from that parse).
  async function run(query) {
    await page.evaluate((q) => document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror.setValue(q), query);
    await waitFor('GraphiQL to parse the query', () => page.evaluate((q) =>
      document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror.documentAST?.loc?.source?.body === q, query));
    await page.click('.graphiql-execute-button');
  }
  // result waits for the response pane to hold want (compared as JSON,
  // without the position a query's result carries in its extensions).
  async function result(what, want) {
    const text = JSON.stringify(want);
    let last = null;
    try {
      await waitFor(what, async () => {
        last = await response();
        try {
          if (last === null) return false;
          const got = JSON.parse(last);
          if (got.extensions) {
            if (!/^[a-z0-9]+-[0-9]+-[0-9]+(-[0-9a-v]{8})?$/.test(got.extensions.position ?? '')) return false;
            delete got.extensions.position;
            if (Object.keys(got.extensions).length === 0) delete got.extensions;
          }
          return JSON.stringify(got) === text;
        } catch {
          return false;
        }
      });
    } catch (e) {
      throw new Error(`${e.message}; the response pane shows ${JSON.stringify(last)}, want ${text}`);
    }
  }
  // open loads path, which is GraphiQL's page or leads to it (at
  // landsOn), and waits for GraphiQL to load the schema.
  async function open(path, landsOn = path) {
    const introspected = page.waitForResponse((r) => r.request().method() === 'POST' &&
      (r.request().postData() || '').includes('IntrospectionQuery'), { timeout: 20000 });
    const res = await page.goto(`${base}${path}`, { waitUntil: 'load' });
    if (res.status() !== 200) throw new Error(`GET ${path}: status ${res.status()}`);
    if (new URL(res.url()).pathname !== landsOn) throw new Error(`GET ${path}: landed on ${res.url()}, want ${landsOn}`);
    const csp = res.headers()['content-security-policy'] || '';
    if (!csp.includes("default-src 'none'") || !csp.includes("script-src 'self'") || !csp.includes("connect-src 'self'")) {
      throw new Error(`GET ${path}: Content-Security-Policy ${JSON.stringify(csp)}`);
    }
    await page.waitForSelector('.graphiql-container .graphiql-query-editor .CodeMirror', { timeout: 20000 });
    const intro = await introspected;
    if (intro.status() !== 200) throw new Error(`introspection: status ${intro.status()}`);
    step(`${path} renders GraphiQL${path === landsOn ? '' : ` at ${landsOn}`} and loads the schema (status 200, CSP ${csp.split(';')[0]}; …)`);
  }

  // The landing page links to the database's GraphiQL page.
  const landing = await page.goto(`${base}/`, { waitUntil: 'load' });
  if (landing.status() !== 200) throw new Error(`GET /: status ${landing.status()}`);
  if (!(await page.$(`a[href="/api/graphiql/${db}"]`))) {
    throw new Error(`the landing page has no link to /api/graphiql/${db}: ${await page.evaluate(() => document.body.innerText)}`);
  }
  step(`/ is the landing page, linking to the GraphiQL page of ${db}`);

  // What a GraphiQL page of an earlier release kept: its history, with
  // the headers of each query run.
  const oldToken = 'sluice_an-old-token-kept-by-an-earlier-page';
  await page.evaluate((key, t) => localStorage.setItem(key, JSON.stringify({
    queries: [{ query: '{ Dog { name } }', headers: JSON.stringify({ Authorization: `Bearer ${t}` }) }],
  })), `sluice:${db}:graphiql:queries`, oldToken);

  // A browser that opens the GraphQL URL is sent to GraphiQL, which
  // opens on a query of the database's first class.
  await open(`/api/graphql/${db}`, `/api/graphiql/${db}`);
  const sample = await editorValue('.graphiql-query-editor .CodeMirror');
  if (!(sample || '').includes('{\n  Dog(limit: 10) {\n    _id\n    name\n  }\n}')) {
    throw new Error(`GraphiQL opened on ${JSON.stringify(sample)}, not a query of Dog`);
  }
  step('GraphiQL opens on a query of the first class');

  await run('{ Dog { _id name } }');
  await result('the query result', { data: { Dog: [{ _id: 'Dog/rex', name: 'Rex' }] } });
  step('a query shows its result');

  // A bearer token typed in the Headers pane is sent, and kept in no
  // storage: GraphiQL's history stored it with each query run (and a
  // page of an earlier release left one there, which the page removes).
  const made = await fetch(`${base}/api/tokens`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'graphiql-headers' }),
  });
  if (made.status !== 201 && made.status !== 200) throw new Error(`POST /api/tokens: status ${made.status}: ${await made.text()}`);
  const { token } = await made.json();
  await clickText(page, 'button', 'Headers');
  await page.evaluate((t) => {
    const cm = [...document.querySelectorAll('.graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror')];
    if (cm.length !== 1) throw new Error(`${cm.length} visible editors below the query, want the headers'`);
    cm[0].CodeMirror.setValue(JSON.stringify({ Authorization: `Bearer ${t}` }));
  }, token);
  const sent = page.waitForRequest((r) => r.method() === 'POST' && (r.postData() || '').includes('{ Dog { _id } }'));
  await run('{ Dog { _id } }');
  await result('the query result with a bearer token', { data: { Dog: [{ _id: 'Dog/rex' }] } });
  if ((await sent).headers().authorization !== `Bearer ${token}`) throw new Error('the query was sent without the token typed in the Headers pane');
  const stored = await page.evaluate(() => Object.keys(localStorage).map((k) => `${k}=${localStorage.getItem(k)}`));
  const leaked = stored.filter((s) => s.includes(token) || s.includes(oldToken));
  if (leaked.length) throw new Error(`local storage keeps a bearer token typed in the Headers pane: ${leaked.join('; ')}`);
  if (!stored.some((s) => s.includes('graphiql:queries=') && s.includes('{ Dog { _id } }'))) {
    throw new Error(`the history does not keep the query run: ${stored.join('; ')}`);
  }
  await page.evaluate(() => {
    document.querySelector('.graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror').CodeMirror.setValue('');
  });
  step('a bearer token typed in the Headers pane is sent, and kept in no storage (the history keeps the query alone)');

  // A comment, a name and a fragment: the page must still see a
  // subscription and send it over graphql-sse.
  await run('# not a query { }\nsubscription Added { Dog_added { ...D } }\nfragment D on Dog { _id name }');
  const sse = await waitFor('the subscription to be registered (its first bytes)', () =>
    [...streams.values()].find((s) => s.bytes > 0 && !s.ended));
  const write = await fetch(`${base}/api/document/${db}`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ '@type': 'Dog', '@id': 'fido', name: 'Fido' }),
  });
  if (write.status !== 200) throw new Error(`insert Dog/fido: status ${write.status}: ${await write.text()}`);
  await result('the subscription event', { data: { Dog_added: { _id: 'Dog/fido', name: 'Fido' } } });
  step('a subscription over graphql-sse shows the event of a write made after it started');

  await page.click('.graphiql-execute-button'); // now the stop button
  await waitFor('the stopped subscription to close its connection', () => sse.ended);
  step('stopping the subscription closes its connection');

  await open('/api/graphiql/_system');
  await run(`{ UserDatabase(filter: {name: {eq: "${db.split('/')[1]}"}}) { name } }`);
  await result('the _system query result', { data: { UserDatabase: [{ name: db.split('/')[1] }] } });
  step('/api/graphiql/_system runs a query');
} catch (e) {
  failed = true;
  console.log(`FAIL: ${e.message}`);
} finally {
  await closeBrowser();
}

for (const b of blocked) console.log(`FAIL: a request left the daemon's origin: ${b}`);
for (const p of problems) console.log(`FAIL: ${p}`);
if (failed || blocked.length || problems.length) process.exit(1);
console.log('graphiql browser test: every step passed');

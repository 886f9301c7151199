// Drives Debian's Chromium, headless, through Sluice's console where
// JavaScript's own names and the browser's address get in the way:
//
//   1. a class whose fields are named as properties every JavaScript
//      object has (constructor, toString, valueOf: an Int, and
//      hasOwnProperty: a list): a document without them shows them empty,
//      one with them shows its values, and saving an edit of n writes n
//      alone; an edit inside a JSON value's key __proto__ is saved, and
//      so is a JSON value with null members (not removed as a merge
//      patch's nulls would be; refused, saying why, where the document
//      holds a whole number past 2^53), and a number past a double's range is
//      refused next to its field, not removed, and in the filter
//      builder refused, not sent as null (no condition); the
//      new-document form starts empty and inserts n alone; the commits
//      and the document's history show the stored values, no function of
//      Object.prototype; ?commit=abc is said to be no commit;
//   2. a token holding a character a header cannot carry (a curly quote,
//      as a word processor makes): the console says so, not that Sluice
//      could not be reached;
//   3. signed in, the tab leaves for another page, then goes Back: the
//      console asks to sign in again (the page kept in the back/forward
//      cache no longer holds the credential);
//   4. the console opened at an address carrying credentials
//      (http://user:secret@host/console/): its requests go to the origin
//      and work, its stream too (last: Chromium then keeps those credentials for the
//      origin).
//
//   node console-names.mjs <daemon URL> <admin password>
//
// The daemon holds the database admin/names made by the Go test
// (internal/console TestBrowserConsoleNames), with the documents Thing/a
// (n only), Thing/b (every field, meta {"__proto__":{"x":1},"k":1}) and
// Thing/big (meta {"big":12345678901234567890,"k":1}).
// CHROMIUM names the browser (default /usr/bin/chromium).
import { clickText as clickTextIn, launch, typeInto, waitFor } from './chromium.mjs';

const [base, adminPassword] = process.argv.slice(2);
if (!base || !adminPassword) {
  console.error('usage: node console-names.mjs <daemon URL> <admin password>');
  process.exit(2);
}
const admin = 'Basic ' + Buffer.from(`admin:${adminPassword}`).toString('base64');
const step = (s) => console.log(`ok: ${s}`);


// api calls the daemon as the super user.
async function api(method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: admin, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// fields returns a stored document without its @ keys.
const fields = async (id) => {
  const doc = await api('GET', `/api/document/admin/names?id=${encodeURIComponent(id)}`);
  return Object.fromEntries(Object.entries(doc).filter(([k]) => !k.startsWith('@')));
};
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

const { browser, close: closeBrowser } = await launch({ lang: 'en-US' });

const problems = [];
let failed = false;
try {
  const page = await browser.newPage();
  const type = (selector, value) => typeInto(page, selector, value);
  const clickText = (selector, label) => clickTextIn(page, selector, label);
  await page.setViewport({ width: 1280, height: 800 });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of/.test(m.text())) {
      problems.push(`console: ${m.text()}`);
    }
  });
  const text = () => page.evaluate(() => document.body.innerText);
  const hasText = (s) => text().then((t) => t.includes(s));
  const noJunk = async (where) => {
    const t = await text();
    for (const junk of ['native code', 'function ', '[object']) {
      if (t.includes(junk)) throw new Error(`${where} shows ${JSON.stringify(junk)}: ${t}`);
    }
  };
  async function signIn(user, password) {
    await page.waitForSelector('#signin-user');
    await waitFor('the sign-in form to take the focus', () => page.evaluate(() => document.activeElement?.id === 'signin-user'));
    await page.type('#signin-user', user);
    await page.type('#signin-password', password);
    await page.keyboard.press('Enter');
    await waitFor('the console, signed in', async () => (await page.$('header.top')) || ((await hasText('Could not sign in')) && Promise.reject(new Error(`could not sign in: ${await text()}`))));
  }
  async function go(path) {
    const res = await page.goto(`${base}${path}`, { waitUntil: 'load' });
    if (res.status() !== 200 && res.status() !== 304) throw new Error(`GET ${path}: status ${res.status()}`);
    await signIn('admin', adminPassword);
  }
  const formValues = () => page.evaluate(() => Object.fromEntries(
    ['n', 'constructor', 'toString', 'valueOf', 'hasOwnProperty'].map((f) => [f, document.getElementById(`field-${f}`)?.value ?? null])));

  // 1. A document without the fields named as Object.prototype's.
  const docPath = '/console/admin/names/documents/Thing';
  await go(`${docPath}?open=${encodeURIComponent('Thing/a')}`);
  await page.waitForSelector('#field-n');
  let v = await formValues();
  if (!same(v, { n: 'one', constructor: '', toString: '', valueOf: '', hasOwnProperty: '' })) throw new Error(`Thing/a's form: ${JSON.stringify(v)}`);
  await noJunk('Thing/a opened');
  await type('#field-n', 'two');
  await clickText('form.document button', 'Save');
  await waitFor('the save of Thing/a', () => hasText('Saved'));
  let stored = await fields('Thing/a');
  if (!same(stored, { n: 'two' })) throw new Error(`Thing/a saved as ${JSON.stringify(stored)}, want {"n":"two"}`);
  step('Thing/a (n only): constructor, toString, valueOf and hasOwnProperty shown empty; saving n writes n alone');

  // A document with them.
  await go(`${docPath}?open=${encodeURIComponent('Thing/b')}`);
  await page.waitForSelector('#field-n');
  v = await formValues();
  if (!same({ ...v, hasOwnProperty: JSON.parse(v.hasOwnProperty || 'null') }, { n: 'one', constructor: 'c', toString: 't', valueOf: '5', hasOwnProperty: ['h'] })) {
    throw new Error(`Thing/b's form: ${JSON.stringify(v)}`);
  }
  await type('#field-n', 'two');
  await type('#field-meta', '{"__proto__": {"x": 2}, "k": 1}');
  await clickText('form.document button', 'Save');
  await waitFor('the save of Thing/b', () => hasText('Saved'));
  stored = await fields('Thing/b');
  // JSON.parse makes __proto__ an own key, as JSON.stringify writes it.
  const want = JSON.parse('{"n":"two","constructor":"c","toString":"t","valueOf":5,"hasOwnProperty":["h"],"meta":{"__proto__":{"x":2},"k":1}}');
  if (!same(stored, want)) throw new Error(`Thing/b saved as ${JSON.stringify(stored)}, want ${JSON.stringify(want)}`);
  // The table shows the stored values too.
  await page.waitForSelector('table.documents');
  await noJunk('the table of Thing');
  step('Thing/b (every field): its values shown; saving n writes n alone, and meta\'s key __proto__ as edited');

  // A JSON value with null members: a merge patch would remove those
  // keys (RFC 7396), so they must be saved as typed, the other fields kept.
  await go(`${docPath}?open=${encodeURIComponent('Thing/b')}`);
  await page.waitForSelector('#field-meta');
  await type('#field-meta', '{"k": null, "l": [null], "m": {"n": null}}');
  await clickText('form.document button', 'Save');
  await waitFor('the save of Thing/b\'s meta', () => hasText('Saved'));
  stored = await fields('Thing/b');
  const wantNulls = { ...want, meta: { k: null, l: [null], m: { n: null } } };
  if (!same(stored, wantNulls)) throw new Error(`Thing/b saved as ${JSON.stringify(stored)}, want ${JSON.stringify(wantNulls)}`);
  step('Thing/b\'s meta edited to hold null members: saved as typed, every other field kept');
  // The same over a change made meanwhile: theirs is kept, meta is mine.
  await api('PATCH', `/api/document/admin/names?id=${encodeURIComponent('Thing/b')}`, { n: 'theirs' });
  await type('#field-meta', '{"k": 2, "z": null}');
  await clickText('form.document button', 'Save');
  await waitFor('the conflict', () => hasText('Someone changed this document'));
  await clickText('button', 'Save my changes over theirs');
  await waitFor('the save over theirs', () => hasText('Saved'));
  stored = await fields('Thing/b');
  const wantOver = { ...wantNulls, n: 'theirs', meta: { k: 2, z: null } };
  if (!same(stored, wantOver)) throw new Error(`Thing/b saved over theirs as ${JSON.stringify(stored)}, want ${JSON.stringify(wantOver)}`);
  step('the same saved over a change made meanwhile: their n kept, meta as typed');
  // A null member where the document holds a whole number past 2^53,
  // which the browser cannot carry: the whole-document write would change
  // it, so the console refuses, saying why, and writes nothing.
  await go(`${docPath}?open=${encodeURIComponent('Thing/big')}`);
  await page.waitForSelector('#field-meta');
  const bigBefore = await (await fetch(`${base}/api/document/admin/names?id=Thing/big`, { headers: { Authorization: admin } })).text();
  await type('#field-meta', '{"big": 12345678901234567000, "k": null}');
  await clickText('form.document button', 'Save');
  await waitFor('the refusal of the save of Thing/big', () => hasText('cannot carry exactly'));
  const bigAfter = await (await fetch(`${base}/api/document/admin/names?id=Thing/big`, { headers: { Authorization: admin } })).text();
  if (bigAfter !== bigBefore || !bigAfter.includes('12345678901234567890')) throw new Error(`Thing/big was ${bigBefore}, is ${bigAfter}`);
  step('a null member in a document holding 12345678901234567890: refused, saying why, nothing written');
  await go(`${docPath}?open=${encodeURIComponent('Thing/b')}`);
  await page.waitForSelector('#field-meta');

  // A number past a double's range: refused next to its field, not
  // sent as JSON's null (JSON.stringify(Infinity)), which removes it.
  await type('#field-valueOf', '1e400');
  await clickText('form.document button', 'Save');
  await waitFor('the refusal of valueOf', () => page.$('#field-valueOf-error'));
  stored = await fields('Thing/b');
  if (!same(stored, wantOver)) throw new Error(`valueOf 1e400: Thing/b is ${JSON.stringify(stored)}, want ${JSON.stringify(wantOver)}`);
  step(`valueOf 1e400: refused next to the field (${await page.$eval('#field-valueOf-error', (e) => e.textContent)}), nothing written`);

  // The new-document form.
  await go(`${docPath}?new=1`);
  await page.waitForSelector('#new-key');
  v = await formValues();
  if (!same(v, { n: '', constructor: '', toString: '', valueOf: '', hasOwnProperty: '' })) throw new Error(`the new-document form: ${JSON.stringify(v)}`);
  await noJunk('the new-document form');
  await type('#new-key', 'c');
  await type('#field-n', 'three');
  await clickText('form.document button', 'Insert');
  await waitFor('the insert of Thing/c', () => page.evaluate(() => new URLSearchParams(location.search).get('open') === 'Thing/c'));
  stored = await fields('Thing/c');
  if (!same(stored, { n: 'three' })) throw new Error(`Thing/c inserted as ${JSON.stringify(stored)}, want {"n":"three"}`);
  step('the new-document form: every field empty; Insert writes n alone');

  // The commits of the saves, and Thing/a's history.
  const log = await api('GET', '/api/log/admin/names?count=10');
  for (const c of log) {
    await go(`/console/admin/names/history?commit=${encodeURIComponent(c.id)}`);
    await waitFor(`commit ${c.id}`, () => hasText('Old value'));
    await noJunk(`commit ${c.id}`);
  }
  await go(`/console/admin/names/history?doc=${encodeURIComponent('Thing/a')}`);
  await waitFor('the history of Thing/a', () => hasText('Old value'));
  await noJunk('the history of Thing/a');
  step(`the ${log.length} commits and Thing/a's history: no value of Object.prototype`);
  // A commit in the URL that is no commit id: the console says so.
  await go('/console/admin/names/history?commit=abc');
  await waitFor('the refusal of commit abc', () => hasText('Could not read the commit'));
  if (!(await hasText('"abc" is not a commit'))) throw new Error(`?commit=abc: ${await text()}`);
  step('?commit=abc: "abc" is not a commit');

  // The filter builder given a number past a double's range: sent as
  // typed and refused, not as null (which Sluice takes as no condition).
  await go(docPath);
  await clickText('summary', 'Filter');
  await page.waitForSelector('#filter-field');
  await page.select('#filter-field', 'valueOf');
  await page.select('#filter-op', 'ge');
  await type('#filter-value', '1e400');
  await clickText('form button', 'Filter');
  const sent = await waitFor('the filter in the URL', () => page.evaluate(() => new URLSearchParams(location.search).get('filter')));
  if (sent !== '{"valueOf":{"ge":"1e400"}}') throw new Error(`valueOf ≥ 1e400 filtered as ${sent}`);
  await waitFor('the refusal of the filter', () => page.$('[role=alert]'));
  if (await page.$('table.documents')) throw new Error(`valueOf ≥ 1e400 listed documents: ${await text()}`);
  step('the filter valueOf ≥ 1e400: sent as typed and refused, no document listed');

  // 2. A token with a curly quote.
  await page.goto(`${base}/console/`, { waitUntil: 'load' });
  await page.waitForSelector('#signin-user');
  await page.evaluate(() => [...document.querySelectorAll('input[name=kind]')][1].click());
  await page.waitForSelector('#signin-token');
  await page.type('#signin-token', '“sluice_0123456789abcdef”');
  await clickText('button', 'Sign in');
  await waitFor('the refusal of the token', () => hasText('Could not sign in'));
  {
    const t = await text();
    if (t.includes('could not be reached') || !t.includes('a header cannot carry') || !t.includes('“')) {
      throw new Error(`a token with a curly quote: ${t}`);
    }
  }
  step('a token with a curly quote: "a character that a header cannot carry", not "could not be reached"');

  // 3. Back after leaving the console.
  await go('/console/admin/names');
  await waitFor('the classes of admin/names', () => hasText('Thing'));
  await page.goto(`${base}/healthz`, { waitUntil: 'load' });
  await page.goBack({ waitUntil: 'load' });
  await waitFor('the sign-in form after Back', () => page.$('#signin-user'));
  if (await page.$('header.top')) throw new Error(`Back restored the console signed in: ${await text()}`);
  if (!(await hasText('You left the console'))) throw new Error(`Back: the sign-in form does not say why: ${await text()}`);
  step('Back to the console after leaving it: it asks to sign in again, saying why');

  // 4. An address carrying credentials.
  const withCredentials = new URL('/console/admin/names', base);
  withCredentials.username = 'someone';
  withCredentials.password = 'secret';
  await page.goto(withCredentials.href, { waitUntil: 'load' });
  const baseURI = await page.evaluate(() => document.baseURI);
  await signIn('admin', adminPassword);
  await waitFor('the classes of admin/names', () => hasText('Thing'));
  if (await hasText('could not be reached')) throw new Error(`at ${baseURI}: ${await text()}`);
  // The stream, which fetches its own way.
  await clickText('nav a', 'Stream');
  await waitFor('the stream to be live', () => hasText('Live: commits appear'));
  await api('POST', '/api/document/admin/names', { '@type': 'Thing', '@id': 'Thing/d', n: 'streamed' });
  await waitFor('the commit of Thing/d in the stream', () => hasText('Thing/d'));
  step(`the console at an address carrying credentials (${baseURI.replace('secret', '…')}): signed in, its views read, its stream live`);

  if (problems.length) throw new Error(problems.join('\n'));
} catch (e) {
  failed = true;
  console.error(e.stack || e.message);
} finally {
  await closeBrowser();
}
process.exit(failed ? 1 : 0);

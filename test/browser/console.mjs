// Drives Debian's Chromium, headless, through Sluice's console on one
// daemon (A) while this script writes through another daemon (B) on the
// same Postgres, as another user on another replica would:
//
//   sign-in (a credential an older console kept in sessionStorage is
//   removed and not used; a wrong password, then by keyboard alone, later
//   with a pasted API token; nothing stored, and every page load asks to
//   sign in again); the databases (one created and deleted after a
//   confirmation); a database's classes, their counts and its schema (an
//   additive change previewed and applied, sent with the previewed schema
//   version, a destructive one previewed, then refused once the schema
//   was changed through B);
//   documents paged, ordered and filtered (an order by a field the class
//   cannot be ordered by is ignored, not written into the query); an edit
//   whose document is changed meanwhile through B (the console shows the
//   conflict and writes nothing), then redone; an insert with a
//   validation error shown next to its field (both forms autocomplete
//   off); a reload on a deep link; a deletion; the stream
//   showing a commit made on B, then paused and resumed from its
//   position; the history with old and new values, a document's history
//   (one whose creation retention pruned says so) and the class as of a
//   position; webhooks with their failed attempts,
//   paused, resumed and replayed; the users for the super user; a
//   revoked token signed out at its next request; then the same views for
//   a reader, who sees nothing the admin's session read when signing in
//   in the same page, and no @private value, no write control and no user
//   list; and a phone-width window.
//
// axe-core checks every view (no serious or critical violation); every
// request outside the daemon's origin is aborted and fails the test, as
// does a Content-Security-Policy violation or a script error; no
// request's URL carries a credential. With a screenshot directory, each
// view is saved there as a PNG (docs/console holds them).
//
//   node console.mjs <daemon A URL> <daemon B URL> <admin password> <reader> <reader password> [screenshot dir]
//
// The daemons hold the databases admin/shop and admin/aged (its first
// commit pruned) made by the Go test
// (internal/console TestBrowserConsole). CHROMIUM names the browser
// (default /usr/bin/chromium).
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clickText as clickTextIn, launch, typeInto, waitFor } from './chromium.mjs';

const [base, other, adminPassword, reader, readerPassword, shotsArg] = process.argv.slice(2);
if (!base || !other || !adminPassword || !reader || !readerPassword) {
  console.error('usage: node console.mjs <daemon A URL> <daemon B URL> <admin password> <reader> <reader password> [screenshot dir]');
  process.exit(2);
}
const origin = new URL(base).origin;
const shots = shotsArg || mkdtempSync(join(tmpdir(), 'sluice-console-shots-'));
mkdirSync(shots, { recursive: true });
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const admin = 'Basic ' + Buffer.from(`admin:${adminPassword}`).toString('base64');
// Every credential the test uses: none may appear in a URL.
const secrets = [adminPassword, readerPassword, admin.slice(6), Buffer.from(`${reader}:${readerPassword}`).toString('base64')];
const step = (s) => console.log(`ok: ${s}`);


// api calls daemon B (the other replica) as the super user, as another
// client would.
async function api(method, path, body, headers = {}) {
  const res = await fetch(`${other}${path}`, {
    method,
    headers: { Authorization: admin, 'Content-Type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} on B: ${res.status} ${text}`);
  return { status: res.status, headers: res.headers, text, json: text ? JSON.parse(text) : null };
}

const { browser, close: closeBrowser } = await launch({ lang: 'en-US' });

const blocked = [];
const problems = [];
const urls = [];
const queries = []; // the bodies of the console's GraphQL requests
const schemaPuts = []; // the console's PUT /api/schema requests: { url, ifMatch }
let failed = false;
let page;
const type = (selector, value) => typeInto(page, selector, value);
const clickText = (selector, label) => clickTextIn(page, selector, label);
try {
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  await page.setRequestInterception(true);
  page.on('request', (req) => {
    const u = req.url();
    urls.push(u);
    if (req.method() === 'POST' && new URL(u).pathname.startsWith('/api/graphql/')) queries.push(req.postData() || '');
    if (req.method() === 'PUT' && new URL(u).pathname.startsWith('/api/schema/')) schemaPuts.push({ url: u, ifMatch: req.headers()['if-match'] });
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
    // The console's failed requests (a 412, a 400) are part of the test;
    // Chromium logs each as a resource error.
    if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of/.test(m.text())) {
      problems.push(`console: ${m.text()}`);
    }
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

  const text = () => page.evaluate(() => document.body.innerText);
  const hasText = (s) => text().then((t) => t.includes(s));
  const title = () => page.title();
  // check runs axe-core on the view and fails on a serious or critical
  // violation; it checks the page's lang and title too, and saves a
  // screenshot as name.png.
  async function check(name, wantTitle) {
    await waitFor(`${name}: no work in progress`, async () => !(await page.$('[role=status] .spinner')));
    let t = '';
    await waitFor(`${name}: a title containing ${JSON.stringify(wantTitle)} (it is ${JSON.stringify(t)})`, async () => (t = await title()).includes(wantTitle));
    const lang = await page.evaluate(() => document.documentElement.lang);
    if (lang !== 'en') throw new Error(`${name}: <html lang=${JSON.stringify(lang)}>`);
    if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(axeSource);
    const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    if (bad.length) {
      throw new Error(`${name}: axe-core found ${bad.map((v) => `${v.impact} ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`).join('; ')}`);
    }
    // Spell-check is off in every field that takes a name, a key, a
    // token, JSON or a document's value: with Chrome's enhanced spell
    // check, what is typed there would be sent to a spelling service.
    // Only prose (a database's label and comment, a webhook's
    // description, a token's name) keeps it. (Preact sets spellcheck as a
    // property: the string "false" would turn it on.)
    const spelled = await page.evaluate(() => [...document.querySelectorAll('input, textarea')]
      .filter((e) => !['password', 'radio', 'checkbox', 'url', 'hidden'].includes(e.type) &&
        !e.matches('#db-label, #db-comment, #hook-description, #token-name') && e.spellcheck !== false)
      .map((e) => e.id || e.outerHTML.slice(0, 80)));
    if (spelled.length) throw new Error(`${name}: spell-check is on in ${spelled.join(', ')}`);
    await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
    step(`${name}: "${t}", axe-core: no serious or critical violation (${result.violations.length} minor), spell-check off, screenshot ${name}.png`);
  }
  // signIn signs in with a user name and password through the form, as a
  // user does, and remembers them for go: the console keeps its
  // credential in the page's memory only, so every page load asks again.
  let signedIn = null;
  async function signIn(user, password) {
    await page.waitForSelector('#signin-user');
    // The form moves the focus to the user name once shown; keys typed
    // before that would go elsewhere.
    await waitFor('the sign-in form to take the focus', () => page.evaluate(() => document.activeElement?.id === 'signin-user'));
    await page.type('#signin-user', user);
    await page.type('#signin-password', password);
    await page.keyboard.press('Enter');
    await page.waitForSelector('header.top');
    signedIn = [user, password];
  }
  // go loads the page at path (and signs in again, when signed in).
  async function go(path) {
    const res = await page.goto(`${base}${path}`, { waitUntil: 'load' });
    if (res.status() !== 200 && res.status() !== 304) throw new Error(`GET ${path}: status ${res.status()}`);
    const csp = res.headers()['content-security-policy'] || '';
    if (!csp.includes("script-src 'self'") || !csp.includes("frame-ancestors 'none'") || !csp.includes("default-src 'none'")) {
      throw new Error(`GET ${path}: Content-Security-Policy ${JSON.stringify(csp)}`);
    }
    if (signedIn) await signIn(...signedIn);
  }
  // stored returns what the page's origin keeps in the browser's storage.
  const stored = () => page.evaluate(() => JSON.stringify({ session: { ...sessionStorage }, local: { ...localStorage }, cookie: document.cookie }));
  const nothingStored = JSON.stringify({ session: {}, local: {}, cookie: '' });

  // 1. Sign-in. A credential that an older console kept in
  // sessionStorage (which Chromium writes to disk) is removed at the next
  // load, not used. A wrong password is refused with the API's reason;
  // then the keyboard alone signs in (the user name field has the focus),
  // and nothing is stored.
  await go('/console/');
  await page.waitForSelector('#signin-user');
  await page.evaluate((a) => sessionStorage.setItem('sluice-console-credential',
    JSON.stringify({ authorization: a, user: 'admin', org: 'admin', superuser: true })), admin);
  await page.reload({ waitUntil: 'load' });
  await page.waitForSelector('#signin-user');
  if (await stored() !== nothingStored) throw new Error(`an older console's stored credential is kept: ${await stored()}`);
  step('an older console\'s credential in sessionStorage: removed, and the console asks to sign in');
  await check('signin', 'Sign in');
  if (await page.$eval('#signin-user', (e) => e.spellcheck) !== false) throw new Error('spell-check is on in the user name');
  await page.type('#signin-user', 'admin');
  await page.type('#signin-password', 'not-the-password');
  await page.keyboard.press('Enter');
  await waitFor('the refusal of a wrong password', () => hasText('Could not sign in'));
  step('a wrong password: "Could not sign in" with the API\'s reason');
  await page.$eval('#signin-password', (e) => { e.value = ''; });
  await page.focus('#signin-user');
  await page.$eval('#signin-user', (e) => { e.value = ''; });
  await page.keyboard.type('admin');
  await page.keyboard.press('Tab');
  await page.keyboard.type(adminPassword);
  await page.keyboard.press('Enter');
  await page.waitForSelector('header.top');
  signedIn = ['admin', adminPassword];
  if (await stored() !== nothingStored) throw new Error(`signed in, the browser's storage holds ${await stored()}`);
  step('signed in with the keyboard alone; nothing in session or local storage or cookies');

  // 2. Databases: the list; one created from the form, then deleted after
  // typing its name in the confirmation dialog.
  await waitFor('admin/shop listed', () => hasText('admin/shop'));
  await check('databases', 'Databases');
  await type('#db-name', 'scratch');
  await type('#db-schema', 'type Note { text: String }');
  await clickText('button', 'Create the database');
  await waitFor('the new database\'s page', async () => (await title()).includes('admin/scratch'));
  await go('/console/');
  await waitFor('admin/scratch listed', () => hasText('admin/scratch'));
  await clickText('button', 'Delete admin/scratch');
  await page.waitForSelector('dialog[open]');
  if (!(await page.$eval('dialog[open] button.danger', (b) => b.disabled))) throw new Error('the delete button is enabled before the name is typed');
  if (await page.$eval('dialog[open] input', (e) => e.spellcheck) !== false) throw new Error('spell-check is on in the confirmation\'s name');
  await page.type('dialog[open] input', 'admin/scratch');
  await page.click('dialog[open] button.danger');
  await waitFor('the deletion', () => hasText('Deleted admin/scratch'));
  const left = await fetch(`${other}/api/db/admin/scratch`, { headers: { Authorization: admin } });
  if (left.status !== 404) throw new Error(`admin/scratch after its deletion: ${left.status}`);
  step('a database created from the form, then deleted after a typed confirmation (404 on B)');

  // 3. A database: its classes with their counts, and its schema, changed
  // after the schema API's preview. First one of 30 classes, which the
  // console counts in several requests, each within
  // graphql_max_statements.
  await go('/console/admin/many');
  await waitFor('the counts of 30 classes', () => page.evaluate(() => {
    const count = (name) => [...document.querySelectorAll('tbody tr')].find((r) => r.querySelector('th')?.textContent.startsWith(name))?.querySelector('td.num')?.textContent;
    return count('C00') === '0' && count('C29') === '1';
  }));
  step('classes: the counts of a database of 30 classes');
  await go('/console/admin/shop');
  await waitFor('the class counts', () => page.evaluate(() => {
    const row = [...document.querySelectorAll('tbody tr')].find((r) => r.querySelector('th')?.textContent.startsWith('Product'));
    return row && row.querySelector('td.num')?.textContent === '120';
  }));
  await waitFor(`${reader}'s role`, () => page.evaluate((r) => [...document.querySelectorAll('#roles ~ .scroll tr, section tr')]
    .some((tr) => tr.innerText.replace(/\s+/g, ' ').trim() === `${r} read`), reader));
  step(`classes: Product with 120 documents; roles: ${reader} reads`);
  const sdl = await page.$eval('#sdl', (e) => e.value);
  await page.$eval('#sdl', (e, v) => { e.value = v; e.dispatchEvent(new Event('input', { bubbles: true })); }, sdl.replace('type Product {', 'type Product {\n  note: String'));
  const before = (await api('GET', '/api/db/admin/shop')).json.schema_version;
  await clickText('button', 'Preview the change');
  await waitFor('the preview of an additive change', () => page.evaluate(() => document.querySelector('.preview')?.innerText.includes('applies in place adds field Product.note')));
  await check('database', 'admin/shop');
  await clickText('button', 'Apply the change');
  await waitFor('the change applied', () => hasText('Schema changed'));
  const applied = schemaPuts.at(-1);
  if (applied.url.includes('dry_run') || applied.ifMatch !== `"${before}"`) {
    throw new Error(`the apply was sent as ${applied.url} with If-Match ${applied.ifMatch}, want the previewed schema version "${before}"`);
  }
  step(`an additive change previewed ("applies in place") and applied with If-Match: "${before}", the version previewed`);
  const current = await page.$eval('#sdl', (e) => e.value);
  await page.$eval('#sdl', (e, v) => { e.value = v; e.dispatchEvent(new Event('input', { bubbles: true })); }, current.replace('stock: Int @index', ''));
  await clickText('button', 'Preview the change');
  await waitFor('the preview of a destructive change', () => page.evaluate(() => {
    const p = document.querySelector('.preview')?.innerText || '';
    return p.includes('loses data: needs force drops field Product.stock') && p.includes('120 stored documents') && p.includes('Product/p001');
  }));
  if (!(await hasText('Apply, losing that data (force)'))) throw new Error('no forced apply offered for a destructive change');
  await check('schema-preview', 'admin/shop');
  step('a destructive change previewed: "loses data: needs force", the 120 documents it affects, force offered');
  // Another admin changes the schema through B after the preview: the
  // forced apply of what was previewed is refused (412), nothing dropped.
  const sdlOnB = async () => (await fetch(`${other}/api/schema/admin/shop`, { headers: { Authorization: admin } })).text();
  const onB = await sdlOnB();
  await api('PUT', '/api/schema/admin/shop', `# changed through B\n${onB}`, { 'Content-Type': 'application/graphql' });
  await clickText('button', 'Apply, losing that data (force)');
  await waitFor('the apply refused: the schema changed since the preview', () => hasText('the schema changed since the preview: preview again'));
  if (!(await page.$eval('.preview', (e) => [...e.querySelectorAll('button')].every((b) => b.disabled)))) throw new Error('an outdated preview still offers Apply');
  if (!(await sdlOnB()).includes('stock: Int')) throw new Error('the refused apply dropped Product.stock');
  step('the forced apply after a change made through B: refused ("the schema changed since the preview"), Product.stock kept, Apply no longer offered');

  // 4. Documents: paged, ordered, filtered.
  const docs = '/console/admin/shop/documents/Product';
  await go(docs);
  await waitFor('the first page', () => hasText('Documents 1–25 of 120'));
  await clickText('button', 'Next page');
  await waitFor('the second page', () => hasText('Documents 26–50 of 120'));
  if (!page.url().includes('offset=25')) throw new Error(`the second page's URL ${page.url()}`);
  await clickText('button.sort', 'price');
  await clickText('button.sort', 'price');
  await waitFor('descending prices, Product/p120 first', async () => page.url().includes('order=price%3Adesc') && await hasText('Documents 1–25 of 120') &&
    await page.$eval('table.documents tbody tr th', (e) => e.textContent) === 'Product/p120');
  await page.click('details.filter summary');
  await type('#filter-json', '{"price": {"ge": 100}}');
  await clickText('button', 'Apply');
  await waitFor('the filtered count', () => hasText('Documents 1–21 of 21'));
  step('documents: pages of 25 of 120, ordered by price descending, filtered to 21');
  await check('documents', 'Product');
  // An order by anything but _id or a field the class can be ordered by
  // is ignored: the field would be written into the query's text.
  for (const bad of ['price}) { _id } #:asc', 'nosuchfield:desc']) {
    await go(`${docs}?order=${encodeURIComponent(bad)}`);
    await waitFor(`the documents, order=${bad}`, async () => await hasText('Documents 1–25 of 120') || await hasText('Could not read the documents'));
    const field = bad.split(':')[0];
    if (await hasText('Could not read the documents') || queries.some((q) => q.includes(field))) {
      throw new Error(`order=${bad} reached the query: ${queries.filter((q) => q.includes(field)).join(' ')}\n${await text()}`);
    }
    if (await page.$eval('table.documents tbody tr th', (e) => e.textContent) !== 'Product/p001') throw new Error(`order=${bad}: not in the default order`);
  }
  await go(`${docs}?order=_id%3Adesc`);
  await waitFor('ordered by id, descending', async () => await hasText('Documents 1–25 of 120') &&
    await page.$eval('table.documents tbody tr th', (e) => e.textContent) === 'Product/p120');
  step('documents: an order by a field the class cannot be ordered by, or one that would change the query, is ignored; _id is taken');

  // 5. An edit, while the document changes through B: the console shows
  // the conflict, and nothing it sent is written.
  await go(`${docs}?open=Product%2Fp007`);
  await page.waitForSelector('#field-name');
  // A document's values must not be saved with the tab's history.
  if (await page.$eval('form.document', (f) => f.autocomplete) !== 'off') throw new Error('the document\'s form lacks autocomplete="off"');
  await type('#field-name', 'Edited in the console');
  await api('PUT', '/api/document/admin/shop', { '@type': 'Product', '@id': 'Product/p007', name: 'Changed through B', price: 7, stock: 1 });
  await clickText('button', 'Save');
  await waitFor('the conflict', () => hasText('Someone changed this document since you opened it'));
  await check('document-conflict', 'Product/p007');
  const after = await api('GET', '/api/document/admin/shop?id=Product/p007');
  if (after.json.name !== 'Changed through B') throw new Error(`after the conflict, the document is ${after.text}`);
  await clickText('button', 'Discard mine, show theirs');
  await waitFor('their version in the form', () => page.$eval('#field-name', (e) => e.value === 'Changed through B'));
  step('an edit made from a stale version: a conflict, nothing written; theirs shown');
  // Again, and this time the edit is saved over theirs: only the field
  // edited is written, their change to another field stays.
  await type('#field-name', 'Edited in the console');
  await api('PATCH', '/api/document/admin/shop?id=Product/p007', { stock: 42 }, { 'Content-Type': 'application/merge-patch+json' });
  await clickText('button', 'Save');
  await waitFor('the second conflict', () => hasText('Someone changed this document since you opened it'));
  await clickText('button', 'Save my changes over theirs');
  await waitFor('the save', () => hasText('Saved'));
  const saved = await api('GET', '/api/document/admin/shop?id=Product/p007');
  if (saved.json.name !== 'Edited in the console' || saved.json.stock !== 42 || saved.json.secret !== undefined) {
    throw new Error(`after the save over theirs, the document is ${saved.text}`);
  }
  step('saved over theirs knowingly: the field edited is written, their other change kept');

  // 6. An insert with a value of the wrong type: the error is shown next
  // to its field; corrected, the document is inserted and opened.
  await go(`${docs}?new=1`);
  // The form moves the focus to its heading once shown (for screen
  // readers); keys typed before that went to the heading.
  await waitFor('the new document form to take the focus', () =>
    page.evaluate(() => document.activeElement?.id === 'new-title'));
  if (await page.$eval('form.document', (f) => f.autocomplete) !== 'off') throw new Error('the new document\'s form lacks autocomplete="off"');
  await type('#new-key', 'console-made');
  await type('#field-name', 'Made in the console');
  await type('#field-price', 'cheap');
  await clickText('button', 'Insert the Product');
  await waitFor('the error next to price', () => page.evaluate(() =>
    document.querySelector('#field-price')?.getAttribute('aria-invalid') === 'true' &&
    (document.querySelector('#field-price-error')?.textContent || '').includes('price')));
  await check('document-invalid', 'New Product');
  await type('#field-price', '9.5');
  await clickText('button', 'Insert the Product');
  await waitFor('the new document opened', () => page.url().includes('open=Product%2Fconsole-made'));
  step('an insert: the validation error next to its field, then inserted');

  // 7. A reload forgets the credential (it was in the page's memory
  // only); signed in again, the deep link shows the same view.
  await page.reload({ waitUntil: 'networkidle0' });
  await page.waitForSelector('#signin-user');
  await signIn(...signedIn);
  await page.waitForSelector('#field-name');
  if (!(await title()).includes('Product/console-made')) throw new Error(`after a reload: ${await title()}`);
  step('a reload of a deep link asks to sign in again, then shows the same view');
  await clickText('button', 'Delete');
  await page.waitForSelector('dialog[open]');
  await page.click('dialog[open] button.danger');
  await waitFor('the document closed', () => !page.url().includes('open='));
  const gone = await fetch(`${other}/api/document/admin/shop?id=Product/console-made`, { headers: { Authorization: admin } });
  if (gone.status !== 404) throw new Error(`Product/console-made after its deletion: ${gone.status}`);
  step('a document deleted after a confirmation (404 on B)');

  // 8. The stream: a commit made on B shows up; paused, a commit made
  // meanwhile arrives on resume.
  await go('/console/admin/shop/stream');
  await waitFor('the stream to be live', () => hasText('Live: commits appear'));
  await api('POST', '/api/document/admin/shop?author=bea&message=restock', { '@type': 'Product', '@id': 'streamed-1', name: 'Streamed', price: 1 });
  await waitFor('the commit made on B', () => hasText('Product/streamed-1'));
  // The signed-in user who made it, and the author the writer gave as
  // such: any writer may give any author.
  if (!(await hasText('by admin')) || !(await hasText('author given: bea'))) throw new Error('the stream does not show who made the commit (by admin) apart from the author given (bea)');
  step('stream: a commit made on daemon B appears');
  await check('stream', 'Stream');
  await clickText('button', 'Pause');
  await waitFor('paused', () => hasText('Paused at position'));
  await api('POST', '/api/document/admin/shop', { '@type': 'Product', '@id': 'streamed-2', name: 'While paused', price: 2 });
  if (await hasText('Product/streamed-2')) throw new Error('a commit reached a paused stream');
  await clickText('button', 'Resume');
  await waitFor('the commit made while paused', () => hasText('Product/streamed-2'));
  const twice = await page.evaluate(() => document.body.innerText.split('Product/streamed-1').length - 1);
  if (twice !== 1) throw new Error(`Product/streamed-1 shows ${twice} times after the resume`);
  step('stream: paused, then resumed from its position: the commit made meanwhile arrives, nothing twice');

  // 9. History: commits newest first; the edit's commit with its old and
  // new values.
  await go('/console/admin/shop/history');
  await waitFor('the commits', () => hasText('restock'));
  await check('history', 'History');
  const change = await api('PUT', '/api/document/admin/shop?author=cy&message=price+change',
    { '@type': 'Product', '@id': 'Product/p010', name: 'Product 10', price: 10.5, stock: 3 });
  const edit = { id: change.json.commit };
  await go(`/console/admin/shop/history?commit=${edit.id}`);
  await waitFor('old and new values', () => page.evaluate(() =>
    [...document.querySelectorAll('table.diff tr.differs')].some((r) => r.innerText.includes('price') && r.innerText.includes('10') && r.innerText.includes('10.5'))));
  await check('commit', `Commit ${edit.id}`);
  step('history: a commit opened shows each changed field\'s old and new value');

  // A document's history, and the class as it was before the change.
  await clickText('a', 'History of Product/p010');
  await waitFor('its versions', () => page.evaluate(() => {
    const t = document.body.innerText;
    return t.includes('price change') && t.includes('catalog') &&
      [...document.querySelectorAll('table.diff tr.differs')].some((r) => r.innerText.includes('price') && r.innerText.includes('10.5'));
  }));
  await check('document-history', 'History of Product/p010');
  const links = await page.$$eval('a', (as) => as.filter((a) => a.textContent === 'As it was then').map((a) => a.getAttribute('href')));
  await go(links[links.length - 1]);
  await waitFor('the past, read-only', async () => await hasText('Showing the documents as they were at position') &&
    await page.evaluate(() => document.querySelector('#field-price')?.value === '10' && document.querySelector('#field-price').readOnly));
  if (await page.evaluate(() => [...document.querySelectorAll('button')].some((b) => /^(Save|Delete|New )/.test(b.textContent.trim())))) {
    throw new Error('the documents as of a position offer a write');
  }
  await check('as-of', 'Product/p010');
  step('a document\'s versions, newest first, with what each changed; the class as of its first version, read-only');

  // A document whose creation retention pruned (admin/aged's first
  // commit, made by the Go test): its history says so, and links to the
  // oldest state of it still known.
  await go('/console/admin/aged/history?doc=Note/kept');
  await waitFor('its retained version', () => hasText('second words'));
  const pruned = (await fetch(`${base}/api/history/admin/aged?id=Note/kept`, { headers: { Authorization: admin } })).headers.get('Sluice-History-Pruned');
  if (!pruned) throw new Error('GET /api/history of Note/kept carries no Sluice-History-Pruned');
  await waitFor(`the pruned history named (${pruned})`, () => hasText(`History before position ${pruned} was pruned`));
  await check('document-history-pruned', 'History of Note/kept');
  await clickText('a', 'Read it as of that position');
  await waitFor('Note/kept as it was then', () => page.evaluate(() => document.querySelector('#field-text')?.value === 'first'));
  step('a document\'s history says what retention pruned, and reads it as of the pruned commits\' end');

  // 10. Webhooks: their state and failed attempts; paused and resumed.
  await go('/console/admin/shop/webhooks');
  await waitFor('the webhook', () => hasText('receiver'));
  await clickText('table a', '1');
  await waitFor('its failed attempts', () => page.evaluate(() => [...document.querySelectorAll('td.bad')].some((td) => td.textContent.startsWith('500'))));
  await clickText('button', 'Pause');
  await waitFor('paused', () => hasText('Paused.'));
  await clickText('button', 'Resume');
  await waitFor('resumed', () => hasText('Resumed.'));
  const from = (await api('GET', '/api/log/admin/shop?count=1')).json[0].position;
  await type('#replay-after', from);
  await clickText('button', 'Replay');
  await waitFor('the replay', () => hasText(`Delivery goes on from ${from}`));
  await check('webhooks', 'Webhooks');
  step('webhooks: state, attempts answered 500, paused, resumed and replayed from a position');

  // 11. Users, for the super user.
  await go('/console/users');
  await waitFor('the users with their roles', () => hasText(`admin/shop: read`));
  await check('users', 'Users');
  step(`users: ${reader} with the read role on admin/shop`);

  // 12. Sign out: the credential is forgotten (a reload shows the
  // sign-in form).
  await clickText('button', 'Sign out');
  signedIn = null;
  await page.waitForSelector('#signin-user');
  if (await stored() !== nothingStored) throw new Error(`after signing out, the browser's storage holds ${await stored()}`);
  await page.reload({ waitUntil: 'networkidle0' });
  await page.waitForSelector('#signin-user');
  step('signed out: nothing kept, a reload asks to sign in');

  // An API token pasted instead of a password signs in too. The admin
  // opens admin/shop by its link (no page load), so the console reads the
  // database and its model as the admin; then the token is revoked (on A,
  // which refuses it at once), and the console signs out by itself at its
  // next request, answered 401.
  const created = (await api('POST', '/api/tokens', { name: 'console test' })).json;
  secrets.push(created.token);
  await page.click('input[name=kind]:not(:checked)');
  if (await page.$eval('#signin-token', (e) => e.spellcheck) !== false) throw new Error('spell-check is on in the token\'s box');
  await type('#signin-token', created.token);
  await clickText('button', 'Sign in');
  await waitFor('signed in with the token', () => hasText('Signed in as admin'));
  await clickText('table a', 'admin/shop');
  await page.waitForSelector('#sdl');
  await waitFor('the admin\'s classes, with the @private field', () => page.evaluate(() =>
    [...document.querySelectorAll('tbody tr')].some((r) => r.querySelector('th')?.textContent.startsWith('Product') && r.innerText.includes('secret'))));
  const revoked = await fetch(`${base}/api/tokens/${created.id}`, { method: 'DELETE', headers: { Authorization: admin } });
  if (!revoked.ok) throw new Error(`revoking the token: ${revoked.status}`);
  await clickText('header.top nav a', 'Databases');
  await page.waitForSelector('#signin-user');
  await waitFor('the reason', () => hasText('Sign in again'));
  step('signed in with a pasted API token; revoked, the console signs out at its next request (401)');

  // 13. A reader: no @private value anywhere, no write control, no user
  // list. The reader signs in in the same page, without a load: nothing
  // the admin's session read (the database's role, its classes and
  // fields) shows.
  await signIn(reader, readerPassword);
  await waitFor('admin/shop listed', () => hasText('admin/shop'));
  if (await page.$('button.danger')) throw new Error('a reader is offered to delete a database');
  await clickText('table a', 'admin/shop');
  await waitFor('the reader\'s role and classes', () => page.evaluate(() =>
    /Your role: \w+/.test(document.body.innerText) && document.querySelector('tbody tr th')?.textContent.startsWith('Product')));
  const seen = await page.evaluate(() => ({
    role: /Your role: (\w+)/.exec(document.body.innerText)[1],
    fields: [...document.querySelectorAll('tbody tr')].find((r) => r.querySelector('th').textContent.startsWith('Product')).innerText,
    editor: !!document.querySelector('#sdl'),
  }));
  if (seen.role !== 'read' || seen.fields.includes('secret') || seen.editor) {
    throw new Error(`the reader, signed in after the admin in the same page, sees the admin's: ${JSON.stringify(seen)}`);
  }
  step('the reader, signed in where the admin signed out: the reader\'s role and fields, no schema editor');
  await go('/console/admin/shop');
  await waitFor('the schema, read-only', () => page.$('pre.code'));
  if (await page.$('#sdl')) throw new Error('a reader is offered to edit the schema');
  // The schema a reader is shown leaves out the fields it may not read.
  const readerSDL = await page.$eval('pre.code', (e) => e.textContent);
  if (readerSDL.includes('secret') || !readerSDL.includes('price')) throw new Error(`a reader's schema: ${readerSDL}`);
  await check('reader-database', 'admin/shop');
  await go(`${docs}?open=Product%2Fp001`);
  await page.waitForSelector('#field-name');
  await waitFor('the table', () => hasText('Documents 1–25'));
  if (await page.$('#field-secret')) throw new Error('a reader\'s document view has the @private field');
  const writes = await page.evaluate(() => [...document.querySelectorAll('button')].map((b) => b.textContent.trim())
    .filter((t) => /^(Save|Delete|New |Undo|Insert)/.test(t)));
  if (writes.length) throw new Error(`a reader's document view offers ${writes.join(', ')}`);
  if (!(await page.$eval('#field-name', (e) => e.readOnly))) throw new Error('a reader can type in a document\'s field');
  if (await page.evaluate(() => document.documentElement.outerHTML.includes('secret-'))) throw new Error('a @private value reached a reader\'s page');
  await check('reader-documents', 'Product/p001');
  await go('/console/admin/shop/stream');
  await waitFor('the stream to be live', () => hasText('Live: commits appear'));
  await api('POST', '/api/document/admin/shop', { '@type': 'Product', '@id': 'streamed-3', name: 'Seen by the reader', price: 3, secret: 'secret-streamed' });
  await waitFor('the commit made on B', () => hasText('Product/streamed-3'));
  if (await page.evaluate(() => document.documentElement.outerHTML.includes('secret-'))) throw new Error('a @private value reached a reader\'s stream');
  await go('/console/admin/shop/history');
  await waitFor('the commits', () => hasText('restock'));
  await go(`/console/admin/shop/history?commit=${edit.id}`);
  await waitFor('the commit', () => page.$('table.diff'));
  if (await page.evaluate(() => document.documentElement.outerHTML.includes('secret-'))) throw new Error('a @private value reached a reader\'s history');
  await go('/console/admin/shop/webhooks');
  await waitFor('the refusal', () => hasText('Only admins of the database'));
  await go('/console/users');
  await waitFor('the refusal', () => hasText('Only the super user lists and manages users'));
  if (await page.$('#users')) throw new Error('a reader sees the user list');
  await check('reader-users', 'Your tokens');
  step('a reader: no @private value in documents, stream or history; no write control; webhooks and users refused');

  // 14. A phone-width window: nothing wider than the window but tables,
  // which scroll within their region.
  await page.setViewport({ width: 390, height: 844, isMobile: true });
  for (const [name, path, wantTitle] of [['phone-documents', `${docs}?open=Product%2Fp001`, 'Product/p001'], ['phone-database', '/console/admin/shop', 'admin/shop']]) {
    await go(path);
    await page.waitForSelector('main h1');
    await waitFor('the view', () => hasText('admin/shop'));
    const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    if (wide > 1) throw new Error(`${name}: the page is ${wide} px wider than the window`);
    await check(name, wantTitle);
  }
  step('phone width (390 px): no sideways scrolling of the page');
} catch (e) {
  failed = true;
  console.error(`FAIL: ${e.message}`);
  if (page) {
    await page.screenshot({ path: join(shots, 'failure.png'), fullPage: true }).catch(() => {});
    console.error(`the page shows:\n${await page.evaluate(() => document.body.innerText).catch(() => '?')}`);
  }
} finally {
  await closeBrowser();
  if (!shotsArg) rmSync(shots, { recursive: true, force: true });
}
const leaked = urls.filter((u) => secrets.some((x) => decodeURIComponent(u).includes(x)) || /ticket=/.test(u));
if (leaked.length) {
  failed = true;
  console.error(`FAIL: URLs carrying a credential: ${leaked.join(', ')}`);
}
if (blocked.length) {
  failed = true;
  console.error(`FAIL: requests to another origin: ${blocked.join(', ')}`);
} else if (!failed) step(`no request left ${origin} (${urls.length} requests)`);
if (problems.length) {
  failed = true;
  console.error(`FAIL: ${problems.join('\n')}`);
}
if (failed) process.exit(1);

// Drives Debian's Chromium, headless, through what a page on another
// origin does to edit a Sluice document safely with fetch (each request
// with an Authorization header, so a CORS preflight first):
//
//   1. it reads a document and its version: the ETag and Sluice-Position
//      headers are readable (exposed);
//   2. it patches the document (PATCH, application/merge-patch+json) with
//      If-Match and an Idempotency-Key, and reads the new ETag;
//   3. a second patch with the old version is a 412 whose ETag and body
//      name the current version;
//   4. the first patch, retried with its key, answers the same again,
//      saying so in Idempotent-Replayed;
//   5. it creates a document only if it does not exist (If-None-Match: *)
//      and deletes it at its version (If-Match).
//
// The page is served by the caller on pageURL, an origin listed in the
// daemon's cors_origins. Prints one line per step; exits 1 on any failure.
//
//   node edit.mjs <daemon base URL> <page URL> <org/db> <user> <password>
//
// The database must have `type Note { text: String }` and the document
// Note/n. CHROMIUM names the browser (default /usr/bin/chromium).
import { launch } from './chromium.mjs';

const [base, pageURL, db, user, password] = process.argv.slice(2);
if (!base || !pageURL || !db || !user || !password) {
  console.error('usage: node edit.mjs <daemon base URL> <page URL> <org/db> <user> <password>');
  process.exit(2);
}
if (new URL(base).origin === new URL(pageURL).origin) {
  console.error('the page must be on another origin than the daemon');
  process.exit(2);
}
const authorization = 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
const step = (s) => console.log(`ok: ${s}`);

const { browser, close: closeBrowser } = await launch();

let failed = false;
try {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  const res = await page.goto(pageURL, { waitUntil: 'load' });
  if (res.status() !== 200) throw new Error(`GET ${pageURL}: status ${res.status()}`);

  // The page's code: one fetch, answering what a page can read of it.
  await page.evaluate(() => {
    window.call = async (method, url, headers, body) => {
      const res = await fetch(url, { method, headers, body });
      const text = await res.text();
      let json = null;
      try { json = JSON.parse(text); } catch { json = text; }
      const h = (n) => res.headers.get(n);
      return { status: res.status, body: json, etag: h('ETag'), position: h('Sluice-Position'), replayed: h('Idempotent-Replayed') };
    };
  });
  const call = (method, path, headers, body) =>
    page.evaluate((m, u, h, b) => window.call(m, u, h, b), method, `${base}${path}`, { Authorization: authorization, ...headers }, body ?? null);
  const doc = `/api/document/${db}`;

  // 1. Read, with its version.
  const read = await call('GET', `${doc}?id=Note/n`, {});
  if (read.status !== 200 || !read.etag || read.etag !== `"${read.body['@version']}"` || !read.position) {
    throw new Error(`GET Note/n: ${JSON.stringify(read)}`);
  }
  step(`read Note/n at version ${read.etag} (position ${read.position})`);

  // 2. A conditional, idempotent patch.
  const patchHeaders = { 'Content-Type': 'application/merge-patch+json', 'If-Match': read.etag, 'Idempotency-Key': 'edit-1' };
  const patched = await call('PATCH', `${doc}?id=Note/n`, patchHeaders, JSON.stringify({ text: 'edited' }));
  if (patched.status !== 200 || !patched.etag || patched.etag === read.etag || patched.position !== patched.body.position || patched.replayed) {
    throw new Error(`PATCH Note/n: ${JSON.stringify(patched)}`);
  }
  step(`patched Note/n with If-Match and an Idempotency-Key: version ${patched.etag}, position ${patched.position}`);

  // 3. A stale version is refused, naming the current one.
  const stale = await call('PATCH', `${doc}?id=Note/n`, { 'Content-Type': 'application/merge-patch+json', 'If-Match': read.etag }, JSON.stringify({ text: 'lost' }));
  if (stale.status !== 412 || stale.etag !== patched.etag || stale.body['api:documents']?.[0]?.['@version'] !== patched.body.version) {
    throw new Error(`stale PATCH: ${JSON.stringify(stale)}`);
  }
  step(`a patch of the old version reads 412: ${stale.body['api:message']}`);

  // 4. The first patch retried with its key: the same answer.
  const retry = await call('PATCH', `${doc}?id=Note/n`, patchHeaders, JSON.stringify({ text: 'edited' }));
  if (retry.status !== 200 || JSON.stringify(retry.body) !== JSON.stringify(patched.body) || retry.etag !== patched.etag || retry.replayed !== 'true') {
    throw new Error(`retried PATCH: ${JSON.stringify(retry)}`);
  }
  step('the patch retried with its Idempotency-Key answers the same (Idempotent-Replayed: true)');

  // 5. Create only if absent; delete at a version.
  const body = JSON.stringify({ '@type': 'Note', '@id': 'Note/m', text: 'new' });
  const created = await call('PUT', `${doc}?create=true`, { 'Content-Type': 'application/json', 'If-None-Match': '*' }, body);
  const again = await call('PUT', `${doc}?create=true`, { 'Content-Type': 'application/json', 'If-None-Match': '*' }, body);
  if (created.status !== 200 || again.status !== 412 || again.etag !== created.etag) {
    throw new Error(`create-only PUT: ${JSON.stringify(created)} then ${JSON.stringify(again)}`);
  }
  const deleted = await call('DELETE', `${doc}?id=Note/m`, { 'If-Match': created.etag });
  if (deleted.status !== 200) throw new Error(`DELETE Note/m: ${JSON.stringify(deleted)}`);
  step('PUT with If-None-Match: * created Note/m once (then 412), and DELETE with If-Match removed it');

  for (const p of problems) throw new Error(p);
} catch (e) {
  failed = true;
  console.log(`FAIL: ${e.message}`);
} finally {
  await closeBrowser();
}
if (failed) process.exit(1);
console.log('edit browser test: every step passed');

// Drives Debian's Chromium, headless, to the answers of Sluice's API that
// a browser cannot show and so saves as files (a schema's SDL, a listing
// as NDJSON), as a link on another site does, with the link's own
// credentials (http://user:secret@host/…): each is saved under a name
// that ends in its type (<database>.graphql, <database>.ndjson), never
// under the database's name alone, which its creator chose (install.bat)
// as its writers chose what the file holds. A JSON answer is shown, not
// saved.
//
//   node downloads.mjs <daemon base URL> <user> <password> <database path>
//
// Prints one line per step; exits 1 on any failure. CHROMIUM names the
// browser (default /usr/bin/chromium).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, waitFor } from './chromium.mjs';

const [base, user, password, db] = process.argv.slice(2);
if (!base || !user || !password || !db) {
  console.error('usage: node downloads.mjs <daemon base URL> <user> <password> <database path>');
  process.exit(2);
}
const step = (s) => console.log(`ok: ${s}`);
const name = db.split('/')[1];
const dir = mkdtempSync(join(tmpdir(), 'sluice-downloads-'));
const { browser, close: closeBrowser } = await launch();

let failed = false;
try {
  const cdp = await browser.target().createCDPSession();
  await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: dir, eventsEnabled: true });
  const saved = new Map(); // guid -> { url, file, state }
  cdp.on('Browser.downloadWillBegin', (e) => saved.set(e.guid, { url: e.url, file: e.suggestedFilename, state: '' }));
  cdp.on('Browser.downloadProgress', (e) => {
    if (saved.has(e.guid) && e.state !== 'inProgress') saved.get(e.guid).state = e.state;
  });
  const page = await browser.newPage();
  const withCredentials = (path) => {
    const u = new URL(path, base);
    u.username = user;
    u.password = password;
    return u.href;
  };

  for (const [path, want, holds] of [
    [`/api/schema/${db}`, `${name}.graphql`, 'calc.exe'],
    [`/api/document/${db}`, `${name}.ndjson`, '||calc.exe||'],
  ]) {
    const before = saved.size;
    // A navigation that ends in a download is aborted as a page load.
    await page.goto(withCredentials(path)).catch(() => {});
    const d = await waitFor(`the download of ${path}`, () => {
      const all = [...saved.values()];
      return all.length > before && all[all.length - 1].state ? all[all.length - 1] : null;
    });
    if (d.state !== 'completed') throw new Error(`${path}: the download ${d.state}`);
    if (d.file !== want) throw new Error(`${path} was saved as ${JSON.stringify(d.file)}, want ${JSON.stringify(want)}`);
    const text = readFileSync(join(dir, d.file), 'utf8');
    if (!text.includes(holds)) throw new Error(`${path}: the file saved holds ${JSON.stringify(text)}, not the database's ${JSON.stringify(holds)}`);
    step(`${path} is saved as ${d.file}`);
  }

  // JSON is shown: no file.
  const before = saved.size;
  const res = await page.goto(withCredentials(`/api/document/${db}?as_list=true`), { waitUntil: 'load' });
  if (res.status() !== 200 || saved.size !== before) throw new Error(`a JSON listing: ${res.status()}, ${saved.size - before} downloads`);
  const shown = await page.evaluate(() => document.body.innerText);
  if (!shown.includes('||calc.exe||')) throw new Error(`a JSON listing shows ${JSON.stringify(shown)}`);
  step('a JSON listing is shown as text, not saved');
} catch (e) {
  failed = true;
  console.log(`FAIL: ${e.message}`);
} finally {
  await closeBrowser();
  rmSync(dir, { recursive: true, force: true });
}
if (failed) process.exit(1);
console.log('downloads browser test: every step passed');

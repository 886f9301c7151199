// Drives Debian's Chromium, headless, through the console's Stream view
// while this script makes large commits, as a writer importing data does:
//
//   1. four commits of 300 documents of 20 KB each (6 MB a commit): each
//      shows its first 20 changes and says how many more it has, with a
//      link to all of them in the History view, and the page keeps
//      neither their other changes nor their documents (its heap grows by
//      less than two commits' documents; the view kept every document of
//      its last 200 commits, so a writer's imports could take the tab's
//      memory);
//   2. a commit of more documents than one event may carry
//      (graphql_max_result_rows): the view says that commit cannot be
//      shown here, not that the stream failed, and the next commit shows
//      as it is made.
//
//   node console-stream.mjs <daemon URL> <admin password> <max result rows>
//
// The daemon holds the database admin/big with `type Note { n: Int body:
// String }`, made by the Go test (internal/console
// TestBrowserConsoleStreamBounds). CHROMIUM names the browser (default
// /usr/bin/chromium).
import { launch, waitFor } from './chromium.mjs';

const [base, adminPassword, maxRows] = process.argv.slice(2);
if (!base || !adminPassword || !maxRows) {
  console.error('usage: node console-stream.mjs <daemon URL> <admin password> <max result rows>');
  process.exit(2);
}
const admin = 'Basic ' + Buffer.from(`admin:${adminPassword}`).toString('base64');
const step = (s) => console.log(`ok: ${s}`);

// insert writes docs to admin/big in one commit.
async function insert(docs) {
  const res = await fetch(`${base}/api/document/admin/big`, {
    method: 'POST',
    headers: { Authorization: admin, 'Content-Type': 'application/x-ndjson' },
    body: docs.map((d) => JSON.stringify({ '@type': 'Note', ...d })).join('\n'),
  });
  if (res.status !== 200) throw new Error(`insert: ${res.status} ${await res.text()}`);
}

const { browser, close } = await launch();
let failed = false;
try {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  const cdp = await page.createCDPSession();
  // heap returns the page's JavaScript heap in use, after a collection.
  const heap = async () => {
    await cdp.send('HeapProfiler.collectGarbage');
    return (await cdp.send('Runtime.getHeapUsage')).usedSize;
  };
  const commits = () => page.evaluate(() => [...document.querySelectorAll('ol.commits > li')].map((li) => ({
    changes: li.querySelectorAll('ul.changes > li').length,
    text: li.textContent,
  })));

  await page.goto(`${base}/console/admin/big/stream`, { waitUntil: 'load' });
  await page.waitForSelector('#signin-user');
  await waitFor('the sign-in form to take the focus', () => page.evaluate(() => document.activeElement?.id === 'signin-user'));
  await page.type('#signin-user', 'admin');
  await page.type('#signin-password', adminPassword);
  await page.keyboard.press('Enter');
  await waitFor('the stream to be live', () => page.evaluate(() => document.querySelector('.state.live') !== null));

  // 1. Large commits.
  const before = await heap();
  const body = 'x'.repeat(20000);
  for (let c = 0; c < 4; c++) {
    await insert(Array.from({ length: 300 }, (_, i) => ({ n: c * 1000 + i, body })));
  }
  await waitFor('four commits shown', async () => (await commits()).length === 4, 60000);
  for (const c of await commits()) {
    if (c.changes !== 20) throw new Error(`a commit of 300 changes shows ${c.changes}, want 20`);
    if (!c.text.includes('280 more changes')) throw new Error(`a commit of 300 changes does not say how many more it has: ${c.text.slice(0, 300)}…`);
  }
  // The last event read may stay in memory until the next one comes: less
  // than two commits' documents in all.
  const grown = (await heap()) - before;
  if (grown > 12e6) throw new Error(`the page's heap grew by ${(grown / 1e6).toFixed(1)} MB for four commits of 6 MB: it keeps their documents`);
  step(`four commits of 300 documents of 20 KB each show 20 changes each and how many more; the heap grew by ${(grown / 1e6).toFixed(1)} MB`);

  // 2. A commit past what one event may carry, then a small one.
  await insert(Array.from({ length: +maxRows + 1 }, (_, i) => ({ n: i })));
  await waitFor('the view to say the commit cannot be shown', () => page.evaluate(() => document.querySelector('[role=alert]')?.textContent || ''));
  const alert = await page.evaluate(() => document.querySelector('[role=alert]').textContent);
  if (/failed|report it/i.test(alert) || !/cannot be shown here/.test(alert)) throw new Error(`a commit too large for an event shows ${JSON.stringify(alert)}`);
  await insert([{ n: -1 }]);
  await waitFor('the next commit to show', async () => (await commits()).length === 5);
  const status = await page.evaluate(() => document.querySelector('.state')?.textContent || '');
  if (!status.startsWith('Live')) throw new Error(`after a commit too large for an event the view says ${JSON.stringify(status)}`);
  step(`a commit of ${+maxRows + 1} documents is said to be too large to show here, and the next commit shows`);

  for (const p of problems) throw new Error(p);
} catch (e) {
  failed = true;
  console.log(`FAIL: ${e.message}`);
} finally {
  await close();
}
if (failed) process.exit(1);
console.log('console stream browser test: every step passed');

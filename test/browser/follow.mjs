// Runs the docs' EventSource example, examples/follow-eventsource.js, in
// Debian's Chromium, headless, in a page of another origin (listed in the
// daemon's cors_origins), following from a position, and prints each line
// it logs, until its standard input ends. The test that runs it
// (internal/doctest) restarts the daemon meanwhile and checks that the
// example received every event once.
//
//   node follow.mjs <daemon base URL> <page URL> <API token> <position>
//
// CHROMIUM names the browser (default /usr/bin/chromium).
import { readFileSync } from 'node:fs';
import { launch } from './chromium.mjs';

const [base, pageURL, token, position] = process.argv.slice(2);
if (!base || !pageURL || !token || !position) {
  console.error('usage: node follow.mjs <daemon base URL> <page URL> <API token> <position>');
  process.exit(2);
}
// The example as the docs show it, but for Sluice's origin and the position
// it starts from.
let example = readFileSync(new URL('examples/follow-eventsource.js', import.meta.url), 'utf8');
for (const [from, to] of [["'https://sluice.example.com'", JSON.stringify(base)], ['let last = null;', `let last = ${JSON.stringify(position)};`]]) {
  if (!example.includes(from)) {
    console.error(`examples/follow-eventsource.js no longer holds ${from}`);
    process.exit(2);
  }
  example = example.replace(from, to);
}

const { browser, close: closeBrowser } = await launch();
let closing = false;
async function close(status) {
  if (closing) return;
  closing = true;
  await closeBrowser();
  process.exit(status);
}
process.stdin.on('end', () => close(0));
process.stdin.resume();

try {
  const page = await browser.newPage();
  page.on('console', (msg) => console.log(msg.text()));
  page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
  const res = await page.goto(pageURL, { waitUntil: 'load' });
  if (res.status() !== 200) throw new Error(`GET ${pageURL}: status ${res.status()}`);
  await page.addScriptTag({
    content: `const token = ${JSON.stringify(token)};\n` + example,
  });
  console.log('the example runs');
} catch (err) {
  console.log(`FAIL: ${err.message}`);
  await close(1);
}

// What the browser tests share: the headless Chromium they drive, and
// their wait for a condition.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

// launch starts headless Chromium (CHROMIUM, or /usr/bin/chromium) with
// a profile of its own, in language lang when given (a test reading the
// console's dates and numbers). close closes it and removes the profile;
// it may be called more than once.
export async function launch({ lang } = {}) {
  const userDataDir = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
  // Without the background-networking flags Chromium reaches out to
  // Google's services at start; the sandbox needs privileges CI (root)
  // does not give it.
  const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'];
  if (lang) args.push(`--lang=${lang}`);
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    userDataDir,
    args,
  });
  const close = async () => {
    await browser.close().catch(() => {});
    rmSync(userDataDir, { recursive: true, force: true });
  };
  return { browser, close };
}

// waitFor polls cond every 50 ms until it returns a truthy value, which it
// returns, or fails after ms naming what it waited for.
export async function waitFor(what, cond, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

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

// clickText clicks the first enabled element of page matching selector
// whose text starts with label, waiting for one.
export async function clickText(page, selector, label) {
  const handle = await waitFor(`a ${selector} reading ${JSON.stringify(label)}`, () => page.evaluateHandle((sel, l) =>
    [...document.querySelectorAll(sel)].find((e) => e.textContent.trim().startsWith(l) && !e.disabled) || null, selector, label)
    .then((h) => (h.asElement() ? h : null)));
  await handle.click();
}

// typeInto replaces what a field of page holds with value, as a user
// does: select all, delete, type (each an input event the view sees).
export async function typeInto(page, selector, value) {
  await page.waitForSelector(selector);
  await page.focus(selector);
  await page.keyboard.down('Control');
  await page.keyboard.press('KeyA');
  await page.keyboard.up('Control');
  await page.keyboard.press('Backspace');
  await page.type(selector, value);
  await waitFor(`${selector} to hold ${JSON.stringify(value)}`, () => page.$eval(selector, (e, v) => e.value === v, value));
}

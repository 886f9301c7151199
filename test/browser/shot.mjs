import puppeteer from 'puppeteer-core';
const [base, path, out, user = 'admin', password = 'root', width = '1280', height = '800'] = process.argv.slice(2);
const browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });
const page = await browser.newPage();
await page.setViewport({ width: +width, height: +height });
page.on('console', (m) => console.log('console', m.type(), m.text()));
page.on('pageerror', (e) => console.log('pageerror', e.message));
page.on('requestfailed', (r) => console.log('failed', r.url(), r.failure()?.errorText));
await page.goto(base + '/console/', { waitUntil: 'networkidle0' });
if (await page.$('#signin-user')) {
  await page.type('#signin-user', user);
  await page.type('#signin-password', password);
  await page.click('button[type=submit]');
  await page.waitForSelector('header.top');
}
await page.goto(base + path, { waitUntil: 'networkidle0' });
await new Promise((r) => setTimeout(r, 500));
await page.screenshot({ path: out, fullPage: true });
console.log(await page.title());
await browser.close();

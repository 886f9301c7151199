// Drives Debian's Chromium, headless, through a cross-site request
// forgery against Sluice, as a user who signed in with Basic auth (at
// GraphiQL, say) and then visits a page of another site:
//
//   1. it signs in: the browser answers Sluice's Basic challenge once and
//      remembers the credentials (the script's own handler is then
//      removed, so only what the browser remembers is sent from then on);
//   2. a control: a form on Sluice's own origin POSTs a document as
//      text/plain, and the browser's remembered credentials write it, so
//      the browser does send them with a form;
//   3. the attack: pages of another site (localhost, where Sluice is at
//      127.0.0.1) auto-submit forms to Sluice, as text/plain (a document),
//      multipart/form-data (a user) and form-urlencoded (a token); each is
//      answered 403 naming cors_origins.
//
// The caller checks that nothing was written. Prints one line per step;
// exits 1 on any failure.
//
//   node csrf.mjs <daemon base URL> <attacker page URL> <user> <password>
//
// The attacker's server answers GET /plain, /multipart and /urlencoded with
// a page whose form submits itself to the daemon. The database admin/people
// must have `type Note { text: String pad: String }`. CHROMIUM names the browser
// (default /usr/bin/chromium).
import { launch } from './chromium.mjs';

const [base, attacker, user, password] = process.argv.slice(2);
if (!base || !attacker || !user || !password) {
  console.error('usage: node csrf.mjs <daemon base URL> <attacker page URL> <user> <password>');
  process.exit(2);
}
const step = (s) => console.log(`ok: ${s}`);

const { browser, close: closeBrowser } = await launch();

let failed = false;
try {
  const page = await browser.newPage();

  // 1. Sign in, as a user answers the browser's prompt.
  await page.authenticate({ username: user, password });
  let res = await page.goto(`${base}/api/info`, { waitUntil: 'load' });
  if (res.status() !== 200) throw new Error(`sign-in: GET /api/info: ${res.status()}`);
  await page.authenticate(null);
  res = await page.goto(`${base}/api/info`, { waitUntil: 'load' });
  if (res.status() !== 200) throw new Error(`the browser did not remember the credentials: GET /api/info: ${res.status()}`);
  step('signed in with Basic auth; the browser remembers the credentials');

  // 2. The control: a same-origin form writes.
  const [control] = await Promise.all([
    page.waitForNavigation({ waitUntil: 'load' }),
    page.evaluate((action) => {
      const f = document.createElement('form');
      f.method = 'POST';
      f.enctype = 'text/plain';
      f.action = action;
      const i = document.createElement('input');
      i.name = '{"@type":"Note","@id":"Note/control","text":"x","pad":"';
      i.value = '"}';
      f.appendChild(i);
      document.body.appendChild(f);
      f.submit();
    }, `${base}/api/document/admin/people`),
  ]);
  if (control.status() !== 200) throw new Error(`the same-origin form: ${control.status()} ${await control.text()}`);
  step('a form of Sluice\'s own origin writes with the remembered credentials (200)');

  // 3. The attacks.
  for (const kind of ['plain', 'multipart', 'urlencoded']) {
    // The attacker's page submits its form as it loads: Sluice's answer
    // is the response to watch for.
    const answered = page.waitForResponse((r) => r.url().startsWith(`${base}/api/`) && r.request().method() === 'POST');
    await page.goto(`${attacker}/${kind}`);
    const final = await answered;
    const body = await final.text();
    if (final.status() !== 403 || !body.includes('cors_origins')) {
      throw new Error(`the ${kind} form from another site: ${final.status()} ${body}`);
    }
    step(`a ${kind} form from another site is refused: 403 ${JSON.parse(body)['api:message']}`);
  }
} catch (e) {
  failed = true;
  console.log(`FAIL: ${e.message}`);
} finally {
  await closeBrowser();
}
if (failed) process.exit(1);
console.log('csrf browser test: every step passed');

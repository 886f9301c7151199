// Drives Debian's Chromium, headless, through what a page on another
// origin does to follow a Sluice database with the browser's native
// EventSource, which cannot send an Authorization header:
//
//   1. it gets a stream ticket with fetch (POST /api/stream-tickets with an
//      Authorization header: a CORS preflight, then the answer readable);
//   2. it opens an EventSource on the REST change stream with ?ticket= and
//      receives the event of a write this script makes once it is open;
//   3. the same through the GraphQL SSE URL (GET, ?query=…&ticket=…);
//   4. it reads Sluice's 401 answers, status and JSON body, thanks to CORS:
//      a fetch without credentials, and a stream URL with a spent ticket.
//
// The page is served by the caller on pageURL, an origin listed in the
// daemon's cors_origins. The page authenticates as user (a reader is
// enough); the script writes as writer. Prints one line per step; exits 1
// on any failure.
//
//   node eventsource.mjs <daemon base URL> <page URL> <org/db> <user> <password> <writer> <writer password>
//
// The database must have `type Dog { name: String! }`. CHROMIUM names the
// browser (default /usr/bin/chromium).
import { launch, waitFor } from './chromium.mjs';

const [base, pageURL, db, user, password, writer, writerPassword] = process.argv.slice(2);
if (!base || !pageURL || !db || !user || !password || !writer || !writerPassword) {
  console.error('usage: node eventsource.mjs <daemon base URL> <page URL> <org/db> <user> <password> <writer> <writer password>');
  process.exit(2);
}
if (new URL(base).origin === new URL(pageURL).origin) {
  console.error('the page must be on another origin than the daemon');
  process.exit(2);
}
const authorization = 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
const writerAuthorization = 'Basic ' + Buffer.from(`${writer}:${writerPassword}`).toString('base64');
const step = (s) => console.log(`ok: ${s}`);


// write inserts Dog/id from this script (not the page), as another client.
async function write(id) {
  const res = await fetch(`${base}/api/document/${db}`, {
    method: 'POST',
    headers: { authorization: writerAuthorization, 'content-type': 'application/json' },
    body: JSON.stringify({ '@type': 'Dog', '@id': id, name: id }),
  });
  if (res.status !== 200) throw new Error(`insert Dog/${id}: status ${res.status}: ${await res.text()}`);
}

const { browser, close: closeBrowser } = await launch();

let failed = false;
try {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  const res = await page.goto(pageURL, { waitUntil: 'load' });
  if (res.status() !== 200) throw new Error(`GET ${pageURL}: status ${res.status()}`);

  // The page's code: what a web application would write. The streams are
  // kept on window so the script can watch them.
  await page.evaluate(() => {
    window.sluice = {
      // ticket asks Sluice for a stream ticket for db.
      async ticket(base, authorization, db) {
        const res = await fetch(`${base}/api/stream-tickets`, {
          method: 'POST',
          headers: { Authorization: authorization, 'Content-Type': 'application/json' },
          body: JSON.stringify({ database: db }),
        });
        return { status: res.status, body: await res.json() };
      },
      // follow opens an EventSource on url and records its events of
      // the given types.
      follow(name, url, types) {
        const s = { open: false, events: [], errors: 0, es: new EventSource(url) };
        s.es.onopen = () => { s.open = true; };
        s.es.onerror = () => { s.errors++; };
        for (const type of types) {
          s.es.addEventListener(type, (e) => s.events.push({ type, id: e.lastEventId, data: e.data }));
        }
        window.sluice[name] = s;
      },
      async get(url, headers) {
        const res = await fetch(url, { headers });
        const text = await res.text();
        let body = null;
        try { body = JSON.parse(text); } catch { body = text; }
        return { status: res.status, body, wwwAuthenticate: res.headers.get('WWW-Authenticate') };
      },
    };
  });

  // 1. A ticket, with fetch and an Authorization header.
  const t1 = await page.evaluate((b, a, d) => window.sluice.ticket(b, a, d), base, authorization, db);
  if (t1.status !== 201 || !t1.body.ticket || t1.body.database !== db || !(t1.body.expires_in > 0)) {
    throw new Error(`POST /api/stream-tickets: ${t1.status} ${JSON.stringify(t1.body)}`);
  }
  step(`the page got a stream ticket from another origin (201, expires in ${t1.body.expires_in} s)`);

  // 2. The REST change stream through a native EventSource.
  const restURL = `${base}/api/subscribe/${db}/Dog?ticket=${encodeURIComponent(t1.body.ticket)}`;
  await page.evaluate((u) => window.sluice.follow('rest', u, ['entity.create']), restURL);
  // The stream answers (and so EventSource opens) only once it is
  // registered: a write from now on is delivered.
  await waitFor('the REST EventSource to open', () => page.evaluate(() => window.sluice.rest.open));
  await write('fido');
  const restEvent = await waitFor('the REST change event', () => page.evaluate(() => window.sluice.rest.events[0]));
  const envelope = JSON.parse(restEvent.data);
  if (envelope.subject !== 'Dog/fido' || envelope.data?.name !== 'fido' || !restEvent.id) {
    throw new Error(`REST event ${JSON.stringify(restEvent)}`);
  }
  step(`an EventSource with ?ticket= on /api/subscribe received entity.create of Dog/fido (id ${restEvent.id})`);

  // 3. The GraphQL SSE URL, with a second ticket (each is single use).
  const t2 = await page.evaluate((b, a, d) => window.sluice.ticket(b, a, d), base, authorization, db);
  if (t2.status !== 201) throw new Error(`second ticket: ${t2.status} ${JSON.stringify(t2.body)}`);
  const query = 'subscription { Dog_added { _id name } }';
  const gqlURL = `${base}/api/graphql/${db}?query=${encodeURIComponent(query)}&ticket=${encodeURIComponent(t2.body.ticket)}`;
  await page.evaluate((u) => window.sluice.follow('gql', u, ['next']), gqlURL);
  await waitFor('the GraphQL EventSource to open', () => page.evaluate(() => window.sluice.gql.open));
  await write('rex');
  const next = await waitFor('the GraphQL next event', () => page.evaluate(() => window.sluice.gql.events[0]));
  const result = JSON.parse(next.data);
  if (result.data?.Dog_added?._id !== 'Dog/rex' || result.data?.Dog_added?.name !== 'rex') {
    throw new Error(`GraphQL event ${next.data}`);
  }
  step('an EventSource with ?ticket= on the GraphQL URL received Dog_added for Dog/rex');
  // The REST stream got rex too, and nothing was lost or doubled.
  await waitFor('the REST stream to get Dog/rex', () => page.evaluate(() => window.sluice.rest.events.length === 2));
  const restIDs = await page.evaluate(() => window.sluice.rest.events.map((e) => JSON.parse(e.data).subject));
  if (JSON.stringify(restIDs) !== JSON.stringify(['Dog/fido', 'Dog/rex'])) throw new Error(`REST events ${JSON.stringify(restIDs)}`);
  step('the REST EventSource received exactly Dog/fido then Dog/rex');
  await page.evaluate(() => { window.sluice.rest.es.close(); window.sluice.gql.es.close(); });

  // 4. Sluice's 401s are readable by the page: status, JSON body and the
  // exposed WWW-Authenticate.
  const anon = await page.evaluate((u) => window.sluice.get(u, {}), `${base}/api/db`);
  if (anon.status !== 401 || anon.body?.['api:error']?.['@type'] !== 'api:NotAuthenticated' || !anon.wwwAuthenticate) {
    throw new Error(`GET /api/db without credentials: ${JSON.stringify(anon)}`);
  }
  step(`a fetch without credentials reads 401 ${anon.body['api:error']['@type']}: ${anon.body['api:message']}`);
  const spent = await page.evaluate((u) => window.sluice.get(u, { Accept: 'text/event-stream' }), restURL);
  if (spent.status !== 401 || !/already used/.test(spent.body?.['api:message'] ?? '')) {
    throw new Error(`the spent ticket: ${JSON.stringify(spent)}`);
  }
  step(`the spent ticket reads 401: ${spent.body['api:message']}`);
  // An EventSource on it gets no stream: it reports an error and closes
  // (a non-200 answer is fatal to EventSource, so it does not retry).
  await page.evaluate((u) => window.sluice.follow('spent', u, []), restURL);
  await waitFor('the EventSource with a spent ticket to fail', () =>
    page.evaluate(() => window.sluice.spent.errors > 0 && window.sluice.spent.es.readyState === EventSource.CLOSED));
  step('an EventSource with a spent ticket fails and stays closed');

  for (const p of problems) throw new Error(p);
} catch (e) {
  failed = true;
  console.log(`FAIL: ${e.message}`);
} finally {
  await closeBrowser();
}
if (failed) process.exit(1);
console.log('eventsource browser test: every step passed');

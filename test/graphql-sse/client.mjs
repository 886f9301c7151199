// Runs the graphql-sse npm client, in distinct connections mode, against a
// Sluice database endpoint whose schema has `type Dog { name: String! }`:
// subscribes to Dog_added, commits three times (five dogs) through the
// same client, checks that every event arrives in order, then runs a query
// and a mutation through the client. Prints one line per step; exits 1 on
// any failure.
//
//   node client.mjs <graphql url> <Authorization header value>
import { createClient } from 'graphql-sse';

const [url, authorization] = process.argv.slice(2);
if (!url || !authorization) {
  console.error('usage: node client.mjs <graphql url> <Authorization header value>');
  process.exit(2);
}

// Readiness: Sluice writes the comment ": connected" once the subscription
// is registered; the client ignores comments, so this fetch wrapper
// watches the bytes for it and resolves `ready`.
let markReady;
const ready = new Promise((resolve) => { markReady = resolve; });
async function fetchFn(input, init) {
  const res = await fetch(input, init);
  if (!res.body) return res;
  let seen = '';
  const watch = new TransformStream({
    transform(chunk, controller) {
      if (seen !== null) {
        seen += new TextDecoder().decode(chunk);
        if (seen.includes(': connected\n')) { seen = null; markReady(); }
      }
      controller.enqueue(chunk);
    },
  });
  return new Response(res.body.pipeThrough(watch), { status: res.status, statusText: res.statusText, headers: res.headers });
}

const client = createClient({
  url,
  headers: { Authorization: authorization },
  fetchFn,
  retryAttempts: 0,
});

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

const timeout = setTimeout(() => fail('timed out'), 60_000);

async function once(query) {
  const results = [];
  for await (const r of client.iterate({ query })) results.push(r);
  if (results.length !== 1) fail(`${query}: ${results.length} results, want 1`);
  if (results[0].errors) fail(`${query}: ${JSON.stringify(results[0].errors)}`);
  return results[0].data;
}

const want = ['a', 'b', 'c', 'd', 'e'];
const got = [];
const sub = client.iterate({ query: 'subscription { Dog_added { _id name } }' });
const received = (async () => {
  for await (const r of sub) {
    if (r.errors) fail('subscription: ' + JSON.stringify(r.errors));
    got.push(r.data.Dog_added.name);
    if (got.length === want.length) break; // return() closes the stream
  }
})();

await ready;
console.log('subscribed');
const insert = (names) => once(`mutation { _insertDocuments(json: ${JSON.stringify(JSON.stringify(names.map((n) => ({ '@type': 'Dog', '@id': 'Dog/' + n, name: n }))))}) }`);
await insert(['a', 'b']);
await insert(['c']);
await insert(['d', 'e']);
console.log('committed 3 times');
await received;
if (got.join(' ') !== want.join(' ')) fail(`events ${got.join(' ')}, want ${want.join(' ')}`);
console.log('received ' + got.join(' '));

const q = await once('{ Dog { name } }');
if (q.Dog.map((d) => d.name).join(' ') !== want.join(' ')) fail('query: ' + JSON.stringify(q));
console.log('query ok');
const m = await once('mutation { _deleteDocuments(ids: ["Dog/a"]) }');
if (JSON.stringify(m) !== '{"_deleteDocuments":["Dog/a"]}') fail('mutation: ' + JSON.stringify(m));
console.log('mutation ok');

clearTimeout(timeout);
client.dispose();
console.log('PASS');

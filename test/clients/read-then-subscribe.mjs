// Load, then follow: the pattern of docs/reads-and-streams.md, as a client
// application writes it with the graphql-sse client, run against a daemon
// by TestGraphQLClients. The database has `type Dog { name: String! }`.
//
// 1. Read the list with a query: the result's extensions.position is the
//    position it reflects.
// 2. Subscribe with that position as extensions.lastEventId: the events
//    are exactly the commits the read did not see, including the ones
//    made between the read and the subscribe.
// 3. Keep the list up to date from the events. (To resume after a
//    reconnect, send the last event's position instead: in distinct
//    connections mode it is the SSE event id; with singleConnection: true,
//    graphql-ws and multipart, extensions.lastEventId.)
//
//   node read-then-subscribe.mjs <graphql url> <Authorization header value>
import { createClient } from 'graphql-sse';
import { fail } from './lib.mjs';

const [url, authorization] = process.argv.slice(2);
if (!url || !authorization) {
  console.error('usage: node read-then-subscribe.mjs <graphql url> <Authorization header value>');
  process.exit(2);
}
const timeout = setTimeout(() => fail('timed out'), 60_000);

async function graphql(query, variables) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  const body = await res.json();
  if (body.errors) fail(JSON.stringify(body.errors));
  return body;
}
const addDog = (name) => graphql('mutation($d: JSON!) { _insertDocuments(json: $d) }', { d: { '@type': 'Dog', '@id': 'Dog/' + name, name } });

await addDog('rex');

// 1. Read.
const read = await graphql('{ Dog { _id name } }');
const dogs = new Map(read.data.Dog.map((d) => [d._id, d.name]));
const position = read.extensions.position;
console.log(`ok: read ${dogs.size} dog(s) at position ${position}`);

// A commit lands between the read and the subscribe: it must not be lost.
await addDog('fido');

// 2. Subscribe from the read's position.
const client = createClient({ url, headers: { authorization } });
const seen = [];
await new Promise((resolve, reject) => {
  const stop = client.subscribe(
    { query: 'subscription { Dog_added { _id name } }', extensions: { lastEventId: position } },
    {
      next: (result) => {
        const dog = result.data.Dog_added;
        // 3. Keep the list up to date.
        dogs.set(dog._id, dog.name);
        seen.push(dog.name);
        if (seen.length === 2) { stop(); resolve(); }
      },
      error: reject,
      complete: () => {},
    },
  );
  // Once subscribed, another commit: delivered live.
  setTimeout(() => addDog('bella').catch(reject), 200);
});
client.dispose();

if (seen.join(',') !== 'fido,bella') fail(`events ${seen.join(',')}, want fido,bella (no duplicate of rex, nothing lost)`);
const later = await graphql('{ Dog { _id name } }');
const want = new Map(later.data.Dog.map((d) => [d._id, d.name]));
if (JSON.stringify([...dogs].sort()) !== JSON.stringify([...want].sort())) fail(`the list ${JSON.stringify([...dogs])} is not the database's ${JSON.stringify([...want])}`);
console.log('ok: the read plus the events (fido, then bella) equal a later read');
clearTimeout(timeout);

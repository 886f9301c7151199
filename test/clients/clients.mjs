// Runs mainstream GraphQL clients against a Sluice database endpoint whose
// schema has `type Dog { name: String! }`. For each client: subscribe,
// receive the event of a write, note its position
// (extensions.lastEventId), complete; write again while unsubscribed; then
// resubscribe with extensions.lastEventId and receive the missed event
// first (resume), and complete. Wrong credentials first: each client
// reports them as an error. Prints one line per step; exits 1 on any
// failure.
//
//   node clients.mjs <graphql url> <Authorization header value>
import { createClient as createSSEClient, NetworkError } from 'graphql-sse';
import { createClient as createWSClient } from 'graphql-ws';
import WebSocket from 'ws';
import { ApolloClient, CombinedGraphQLErrors, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { Client as UrqlClient, subscriptionExchange, createRequest } from '@urql/core';
import { fail, inbox, SSELink } from './lib.mjs';

const [url, authorization] = process.argv.slice(2);
if (!url || !authorization) {
  console.error('usage: node clients.mjs <graphql url> <Authorization header value>');
  process.exit(2);
}
const wsURL = url.replace(/^http/, 'ws');

const timeout = setTimeout(() => fail('timed out'), 120_000);

// write commits one dog through a plain GraphQL-over-HTTP mutation.
async function write(name) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query: `mutation { _insertDocuments(json: ${JSON.stringify(JSON.stringify({ '@type': 'Dog', '@id': 'Dog/' + name, name }))}) }` }),
  });
  const body = await res.json();
  if (body.errors) fail(`write ${name}: ${JSON.stringify(body.errors)}`);
}

const subQuery = (prefix) => `subscription { Dog_added(filter: {name: {startsWith: "${prefix}"}}) { name } }`;

// run drives one client through the scenario. open(prefix, extensions,
// onResult) subscribes and resolves once the subscription is registered
// (so a write after it is delivered), returning a function that completes
// it.
async function run(name, prefix, open, positionOf = (r) => r.extensions && r.extensions.lastEventId) {
  const box = inbox();
  let close = await open(prefix, undefined, (r) => box.push(r));
  await write(prefix + '1');
  const first = await box.take(name);
  if (first.data.Dog_added.name !== prefix + '1') fail(`${name}: got ${JSON.stringify(first)}`);
  const position = positionOf(first);
  if (!position) fail(`${name}: no extensions.lastEventId in ${JSON.stringify(first)}`);
  console.log(`${name}: received ${prefix}1 at ${position}`);
  await close();
  await write(prefix + '2');
  const box2 = inbox();
  close = await open(prefix, { lastEventId: position }, (r) => box2.push(r));
  const replayed = await box2.take(name + ' resume');
  if (replayed.data.Dog_added.name !== prefix + '2') fail(`${name} resume: got ${JSON.stringify(replayed)}`);
  await write(prefix + '3');
  const live = await box2.take(name + ' resume');
  if (live.data.Dog_added.name !== prefix + '3') fail(`${name} resume: got ${JSON.stringify(live)}`);
  console.log(`${name}: resumed after ${position}: ${prefix}2 replayed, ${prefix}3 live`);
  await close();
  console.log(`${name}: completed`);
}

// fetchWatching wraps fetch: ready() resolves once a response body shows
// marker (the readiness frame of an HTTP stream), or a response has the
// status wanted.
function fetchWatching({ marker, status }) {
  let waiters = [];
  let lastID = null;
  const resolve = () => { for (const w of waiters) w(); waiters = []; };
  const fetchFn = async (input, init) => {
    const res = await fetch(input, init);
    if (status && res.status === status) resolve();
    if (!marker || !res.body) return res;
    let seen = '';
    // The text after the last whole line: a chunk may end inside an
    // "id: " line, whose start alone is no position.
    let partial = '';
    const decoder = new TextDecoder();
    const watch = new TransformStream({
      transform(chunk, controller) {
        const text = decoder.decode(chunk, { stream: true });
        if (seen !== null) {
          seen += text;
          if (seen.includes(marker)) { seen = null; resolve(); }
        }
        const lines = partial + text;
        const end = lines.lastIndexOf('\n') + 1;
        for (const m of lines.slice(0, end).matchAll(/^id: (.*)$/gm)) lastID = m[1];
        partial = lines.slice(end);
        controller.enqueue(chunk);
      },
    });
    return new Response(res.body.pipeThrough(watch), { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  // ready returns a promise of the next readiness; call it before the
  // request.
  return { fetchFn, ready: () => new Promise((r) => waiters.push(r)), lastID: () => lastID };
}

// graphql-sse, distinct connections mode: ready on ": connected".
async function graphqlSSE(singleConnection, prefix) {
  const watch = fetchWatching(singleConnection ? { status: 202 } : { marker: ': connected\n' });
  const client = createSSEClient({ url, headers: { Authorization: authorization }, fetchFn: watch.fetchFn, retryAttempts: 0, singleConnection });
  await run(singleConnection ? 'graphql-sse single connection' : 'graphql-sse distinct connections', prefix, async (p, extensions, onResult) => {
    const ready = watch.ready();
    const dispose = client.subscribe({ query: subQuery(p), extensions }, { next: onResult, error: (e) => onResult(e instanceof Error ? e : new Error(JSON.stringify(e))), complete: () => {} });
    await ready;
    return async () => dispose();
  // In distinct connections mode the position is the SSE event id, which
  // the client does not expose: it is read off the stream.
  }, singleConnection ? undefined : () => watch.lastID());
  client.dispose();
}

// A graphql-ws client: a query sent after a subscribe on the same socket
// is answered only once the subscription is registered (Sluice reads the
// next message then), so its answer is the readiness signal.
function wsClient() {
  return createWSClient({ url: wsURL, webSocketImpl: WebSocket, connectionParams: { Authorization: authorization }, retryAttempts: 0, lazy: true });
}

async function barrier(client) {
  for await (const r of client.iterate({ query: '{ __typename }' })) {
    if (r.errors) fail('barrier: ' + JSON.stringify(r.errors));
  }
}

async function graphqlWS(prefix) {
  const client = wsClient();
  await run('graphql-ws', prefix, async (p, extensions, onResult) => {
    const dispose = client.subscribe({ query: subQuery(p), extensions }, { next: onResult, error: (e) => onResult(new Error(JSON.stringify(e))), complete: () => {} });
    await barrier(client);
    return async () => dispose();
  });
  // A query and a mutation over the socket too.
  for await (const r of client.iterate({ query: `{ Dog(filter: {name: {startsWith: "${prefix}"}}) { name } }` })) {
    if (r.data.Dog.map((d) => d.name).join(' ') !== `${prefix}1 ${prefix}2 ${prefix}3`) fail('graphql-ws query: ' + JSON.stringify(r));
  }
  for await (const r of client.iterate({ query: `mutation { _deleteDocuments(ids: ["Dog/${prefix}1"]) }` })) {
    if (JSON.stringify(r.data) !== `{"_deleteDocuments":["Dog/${prefix}1"]}`) fail('graphql-ws mutation: ' + JSON.stringify(r));
  }
  console.log('graphql-ws: query and mutation ok');
  await client.dispose();
}

// Apollo Client subscribing through link; ready() resolves once the
// subscription is registered.
async function apollo(name, prefix, link, ready, positionOf) {
  const client = new ApolloClient({ link, cache: new InMemoryCache() });
  await run(name, prefix, async (p, extensions, onResult) => {
    const sub = client.subscribe({ query: gql(subQuery(p)), extensions }).subscribe({
      next: (r) => onResult(r.error ? new Error(r.error.message) : r),
      error: (e) => onResult(e),
    });
    await ready();
    return async () => sub.unsubscribe();
  }, positionOf);
  client.stop();
}

// urql hands a subscription to its exchange a microtask after it is
// executed, so the barrier waits for that hand-over first: sent before
// it, the barrier's query reached Sluice ahead of the subscription, and a
// write after the barrier could commit before the subscription was
// registered (and the test wait for an event it would never get).
async function urql(prefix) {
  const ws = wsClient();
  let forwarded = () => {};
  const client = new UrqlClient({
    url,
    exchanges: [subscriptionExchange({
      enableAllOperations: true,
      forwardSubscription: (request) => ({
        subscribe: (sink) => {
          const unsubscribe = ws.subscribe({ ...request, query: request.query || '' }, sink);
          forwarded();
          return { unsubscribe };
        },
      }),
    })],
  });
  await run('urql (graphql-ws)', prefix, async (p, extensions, onResult) => {
    const handed = new Promise((resolve) => { forwarded = resolve; });
    const { unsubscribe } = client.executeSubscription(createRequest(subQuery(p), {}, extensions)).subscribe((r) => {
      onResult(r.error ? new Error(r.error.message) : { data: r.data, extensions: r.extensions });
    });
    await handed;
    await barrier(ws);
    return async () => unsubscribe();
  });
  await ws.dispose();
}

// Wrong credentials, as each client reports them: graphql-sse, in both
// modes, a NetworkError carrying the 401 response; Apollo's HttpLink, for
// a query and a multipart subscription, the GraphQL errors Sluice answers
// (in application/graphql-response+json, which its Accept prefers), with
// extensions.code UNAUTHENTICATED. A user that does not exist, so that
// the failures counted do not throttle the others' requests.
async function wrongCredentials() {
  const wrong = 'Basic ' + Buffer.from('nobody:wrong-password').toString('base64');
  for (const singleConnection of [false, true]) {
    const name = `graphql-sse ${singleConnection ? 'single connection' : 'distinct connections'}, wrong credentials`;
    const client = createSSEClient({ url, headers: { Authorization: wrong }, retryAttempts: 0, singleConnection });
    const err = await new Promise((resolve) => {
      client.subscribe({ query: subQuery('x') }, {
        next: (r) => resolve(new Error('a result: ' + JSON.stringify(r))),
        error: resolve,
        complete: () => resolve(new Error('completed without an error')),
      });
    });
    if (!(err instanceof NetworkError) || err.response?.status !== 401) fail(`${name}: ${err}`);
    console.log(`${name}: ${err.message}`);
    client.dispose();
  }
  const client = new ApolloClient({ link: new HttpLink({ uri: url, headers: { Authorization: wrong } }), cache: new InMemoryCache() });
  const unauthenticated = (name, e) => {
    if (!CombinedGraphQLErrors.is(e) || e.errors[0]?.extensions?.code !== 'UNAUTHENTICATED') fail(`${name}: ${e}`);
    console.log(`${name}: ${e.errors[0].extensions.code}: ${e.message}`);
  };
  const q = await client.query({ query: gql('{ Dog { name } }') }).catch((e) => ({ error: e }));
  unauthenticated('Apollo HttpLink query, wrong credentials', q.error);
  const sub = await new Promise((resolve) => {
    client.subscribe({ query: gql(subQuery('x')) }).subscribe({
      next: (r) => resolve(r.error ?? new Error('a result: ' + JSON.stringify(r))),
      error: resolve,
    });
  });
  unauthenticated('Apollo HttpLink multipart subscription, wrong credentials', sub);
  client.stop();
}

await wrongCredentials();
await graphqlSSE(false, 'sd');
await graphqlSSE(true, 'ss');
await graphqlWS('ws');

{
  const ws = wsClient();
  await apollo('Apollo GraphQLWsLink', 'aw', new GraphQLWsLink(ws), () => barrier(ws));
  await ws.dispose();
}
{
  const watch = fetchWatching({ marker: ': connected\n' });
  const sse = createSSEClient({ url, headers: { Authorization: authorization }, fetchFn: watch.fetchFn, retryAttempts: 0 });
  await apollo('Apollo graphql-sse link', 'as', new SSELink(sse), () => watch.ready(), () => watch.lastID());
  sse.dispose();
}
{
  // HttpLink alone: multipart subscriptions; ready on the first part, {}.
  const watch = fetchWatching({ marker: '{}' });
  await apollo('Apollo HttpLink multipart', 'am', new HttpLink({ uri: url, headers: { Authorization: authorization }, fetch: watch.fetchFn, includeExtensions: true }), () => watch.ready());
}
await urql('ur');

clearTimeout(timeout);
console.log('PASS');

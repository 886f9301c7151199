// Runs mainstream GraphQL clients against live queries (docs/live-queries.md)
// on two Sluice daemons sharing one Postgres: each client subscribes on
// daemon A, and the documents are written through daemon B. The
// database's schema has `type Person { name: String! team: String
// manager: Person }`.
//
// For each client: the first result is the current one (empty); a
// matching insert gives the new result at that commit's position; an
// insert outside the filter sends nothing (the next result stands at the
// commit after it); complete. Then graphql-ws with JSON Patches applied
// by fast-json-patch, equal to a query's result after inserts, an update
// leaving the filter, an update of a referenced document and a delete;
// resuming with graphql-sse from a current and from an outdated result;
// Apollo's useSubscription (React) through its link; query @live. Prints
// one line per step; exits 1 on any failure.
//
//   node live.mjs <graphql url on A> <graphql url on B> <Authorization header value>
import { createClient as createSSEClient } from 'graphql-sse';
import { createClient as createWSClient } from 'graphql-ws';
import WebSocket from 'ws';
import { ApolloClient, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { ApolloProvider, useSubscription } from '@apollo/client/react';
import { Client as UrqlClient, subscriptionExchange, createRequest } from '@urql/core';
import jsonpatch from 'fast-json-patch';
import { fail, inbox, SSELink } from './lib.mjs';
const { applyPatch, compare } = jsonpatch; // a CommonJS module
import React from 'react';
import TestRenderer from 'react-test-renderer';

const [url, writeURL, authorization] = process.argv.slice(2);
if (!url || !writeURL || !authorization) {
  console.error('usage: node live.mjs <graphql url on A> <graphql url on B> <Authorization header value>');
  process.exit(2);
}
const wsURL = url.replace(/^http/, 'ws');

const timeout = setTimeout(() => fail('timed out'), 180_000);

// post runs a GraphQL request on daemon B.
async function post(query) {
  const res = await fetch(writeURL, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query }),
  });
  const body = await res.json();
  if (body.errors) fail(`${query}: ${JSON.stringify(body.errors)}`);
  return body;
}

// write commits one person through daemon B and returns the position of
// that commit (a query's right after it: nothing else writes meanwhile).
async function write(id, team, { name = id, manager } = {}) {
  const doc = { '@type': 'Person', '@id': 'Person/' + id, name, team };
  if (manager) doc.manager = 'Person/' + manager;
  await post(`mutation { _replaceDocuments(json: ${JSON.stringify(JSON.stringify(doc))}, create: true) }`);
  return (await post('{ Person(limit: 0) { name } }')).extensions.position;
}

// remove deletes a person through daemon B.
async function remove(id) {
  await post(`mutation { _deleteDocuments(ids: ["Person/${id}"]) }`);
}

const liveQuery = 'subscription Team($t: String) { Person(filter: {team: {eq: $t}}, orderBy: {name: ASC}) { name } }';

const names = (r) => r.data.Person.map((p) => p.name).join(' ');

// scenario drives one client. open(query, variables, extensions,
// onResult) subscribes and returns a function that completes it. A live
// query's first result is its readiness: it is registered then.
async function scenario(name, team, open, { positions = true } = {}) {
  const box = inbox();
  const close = await open(liveQuery, { t: team }, undefined, (r) => box.push(r));
  const check = async (want, position) => {
    const r = await box.take(name);
    if (names(r) !== want) fail(`${name}: got ${JSON.stringify(r)}, want ${want}`);
    if (positions && position && r.extensions?.position !== position) fail(`${name}: result at ${r.extensions?.position}, want ${position}: ${JSON.stringify(r)}`);
    if (positions && !/^[a-z0-9]+-[0-9]+-2147483647(-[0-9a-v]{8})?$/.test(r.extensions?.position)) fail(`${name}: no position in ${JSON.stringify(r)}`);
  };
  await check('');
  await check(team + '1', await write(team + '1', team));
  await write(team + 'x', 'elsewhere');
  await check(`${team}1 ${team}2`, await write(team + '2', team));
  await close();
  console.log(`${name}: current result, a matching insert at its position, nothing for one outside the filter`);
}

// A graphql-sse client in either mode.
async function graphqlSSE(singleConnection, team) {
  const client = createSSEClient({ url, headers: { Authorization: authorization }, retryAttempts: 0, singleConnection });
  await scenario(singleConnection ? 'graphql-sse single connection' : 'graphql-sse distinct connections', team, async (query, variables, extensions, onResult) => {
    const dispose = client.subscribe({ query, variables, extensions }, { next: onResult, error: (e) => onResult(e instanceof Error ? e : new Error(JSON.stringify(e))), complete: () => {} });
    return async () => dispose();
  });
  client.dispose();
}

function wsClient() {
  return createWSClient({ url: wsURL, webSocketImpl: WebSocket, connectionParams: { Authorization: authorization }, retryAttempts: 0, lazy: true });
}

function wsOpen(client) {
  return async (query, variables, extensions, onResult) => {
    const dispose = client.subscribe({ query, variables, extensions }, { next: onResult, error: (e) => onResult(new Error(JSON.stringify(e))), complete: () => {} });
    return async () => dispose();
  };
}

async function apollo(name, team, link, positions = true) {
  const client = new ApolloClient({ link, cache: new InMemoryCache() });
  await scenario(name, team, async (query, variables, extensions, onResult) => {
    const sub = client.subscribe({ query: gql(query), variables, extensions }).subscribe({
      next: (r) => onResult(r.error ? new Error(r.error.message) : r),
      error: (e) => onResult(e),
    });
    return async () => sub.unsubscribe();
  }, { positions });
  client.stop();
}

// Apollo's useSubscription, rendered by React (react-test-renderer, no
// DOM), through GraphQLWsLink: the hook's data follows the live query.
async function apolloHook(team) {
  globalThis.IS_REACT_ACT_ENVIRONMENT = false;
  const ws = wsClient();
  const client = new ApolloClient({ link: new GraphQLWsLink(ws), cache: new InMemoryCache() });
  const box = inbox();
  const query = gql(liveQuery);
  function Live() {
    useSubscription(query, { variables: { t: team }, onData: ({ data }) => box.push(data.error ? new Error(data.error.message) : data) });
    return null;
  }
  const renderer = TestRenderer.create(React.createElement(ApolloProvider, { client }, React.createElement(Live)));
  const take = async (want) => {
    const r = await box.take('useSubscription');
    if (names(r) !== want) fail(`useSubscription: got ${JSON.stringify(r.data)}, want ${want}`);
  };
  await take('');
  await write(team + '1', team);
  await take(team + '1');
  await write(team + 'x', 'elsewhere');
  await write(team + '2', team);
  await take(`${team}1 ${team}2`);
  renderer.unmount();
  client.stop();
  await ws.dispose();
  console.log('Apollo useSubscription (GraphQLWsLink): current result, then each change');
}

async function urql(team) {
  const ws = wsClient();
  const client = new UrqlClient({
    url,
    exchanges: [subscriptionExchange({
      enableAllOperations: true,
      forwardSubscription: (request) => ({
        subscribe: (sink) => ({ unsubscribe: ws.subscribe({ ...request, query: request.query || '' }, sink) }),
      }),
    })],
  });
  await scenario('urql (graphql-ws)', team, async (query, variables, extensions, onResult) => {
    const { unsubscribe } = client.executeSubscription(createRequest(query, variables, extensions)).subscribe((r) => {
      onResult(r.error ? new Error(r.error.message) : { data: r.data, extensions: r.extensions });
    });
    return async () => unsubscribe();
  });
  await ws.dispose();
}

// JSON Patches, applied by fast-json-patch: after every change the
// patched result equals what a query reads.
async function patches(team) {
  // A patch is sent only when it is smaller than the whole result (see
  // docs/live-queries.md): start from a result of several documents so
  // that each change below comes as one.
  for (const id of ['b', 'd', 'f', 'h', 'j', 'l']) await write(team + id, team);
  const ws = wsClient();
  const box = inbox();
  const query = 'subscription Team($t: String) { Person(filter: {team: {eq: $t}}, orderBy: {name: ASC}) { name manager { name } } }';
  const dispose = ws.subscribe({ query, variables: { t: team }, extensions: { patch: 'json-patch' } },
    { next: (r) => box.push(r), error: (e) => box.push(new Error(JSON.stringify(e))), complete: () => {} });
  let state = null;
  let revision = 0;
  let patched = 0;
  const next = async () => {
    const r = await box.take('patches');
    if (r.data) {
      state = r.data;
      revision = r.extensions.revision;
      return;
    }
    if (r.extensions?.revision !== revision + 1 || !Array.isArray(r.extensions?.patch)) fail(`patches: ${JSON.stringify(r)} after revision ${revision}`);
    state = applyPatch(state, r.extensions.patch, true, false).newDocument;
    revision = r.extensions.revision;
    patched++;
  };
  const same = async () => {
    const { data } = await post(`{ Person(filter: {team: {eq: "${team}"}}, orderBy: {name: ASC}) { name manager { name } } }`);
    const diff = compare(state, data);
    if (diff.length) fail(`patches: the patched result ${JSON.stringify(state)} differs from the query's ${JSON.stringify(data)}`);
  };
  await next();
  await same();
  // Each changes the result.
  const changes = [
    () => write(team + 'm', team), // inserts, between and at either end
    () => write(team + 'c', team),
    () => write(team + 'a', team),
    () => write(team + 'z', team, { manager: team + 'b' }),
    () => write(team + 'b', 'elsewhere'), // z's manager leaves the filter
    () => write(team + 'b', 'elsewhere', { name: 'Bea' }), // and is renamed: a nested field
    () => remove(team + 'd'), // a delete
  ];
  for (const change of changes) {
    await change();
    await next();
    await same();
  }
  if (patched < 4) fail(`patches: ${patched} of ${changes.length} changes came as patches`);
  dispose();
  await ws.dispose();
  console.log('graphql-ws with JSON Patches: fast-json-patch reproduces every result');
}

// Resume with graphql-sse: from the position of a result that is still
// current, the client gets nothing (the server's SSE event of only an id
// dispatches nothing) until a change, then that result; from one that is
// not, the current result at once.
async function resume(team) {
  const client = createSSEClient({ url, headers: { Authorization: authorization }, retryAttempts: 0 });
  const open = (lastEventId) => {
    const box = inbox();
    const extensions = lastEventId ? { lastEventId } : undefined;
    const dispose = client.subscribe({ query: liveQuery, variables: { t: team }, extensions },
      { next: (r) => box.push(r), error: (e) => box.push(e instanceof Error ? e : new Error(JSON.stringify(e))), complete: () => {} });
    return { box, dispose };
  };
  const check = (r, want, position) => {
    if (names(r) !== want || r.extensions?.position !== position) fail(`resume: got ${JSON.stringify(r)}, want ${want} at ${position}`);
  };
  let sub = open();
  const first = await sub.box.take('resume');
  sub.dispose();
  await write(team + 'x', 'elsewhere'); // changes nothing the query reads
  sub = open(first.extensions.position);
  const p1 = await write(team + '1', team);
  check(await sub.box.take('resume unchanged'), team + '1', p1);
  sub.dispose();
  const p2 = await write(team + '2', team);
  sub = open(p1);
  check(await sub.box.take('resume changed'), `${team}1 ${team}2`, p2);
  sub.dispose();
  client.dispose();
  console.log('graphql-sse resume: nothing while the result is current, then the change; the current result when it changed');
}

// query @live, as graphql-live-query clients send it, over graphql-sse.
async function atLive(team) {
  const client = createSSEClient({ url, headers: { Authorization: authorization }, retryAttempts: 0 });
  await scenario('graphql-sse, query @live', team, async (query, variables, extensions, onResult) => {
    const dispose = client.subscribe({ query: query.replace('subscription Team($t: String)', 'query Team($t: String) @live'), variables, extensions },
      { next: onResult, error: (e) => onResult(e instanceof Error ? e : new Error(JSON.stringify(e))), complete: () => {} });
    return async () => dispose();
  });
  client.dispose();
}

await graphqlSSE(false, 'sd');
await graphqlSSE(true, 'ss');
await scenario('graphql-ws', 'ws', wsOpen(wsClient()));
{
  const ws = wsClient();
  await apollo('Apollo GraphQLWsLink', 'aw', new GraphQLWsLink(ws));
  await ws.dispose();
}
{
  const sse = createSSEClient({ url, headers: { Authorization: authorization }, retryAttempts: 0 });
  await apollo('Apollo graphql-sse link', 'as', new SSELink(sse));
  sse.dispose();
}
await apollo('Apollo HttpLink multipart', 'am', new HttpLink({ uri: url, headers: { Authorization: authorization }, includeExtensions: true }));
await apolloHook('ah');
await urql('ur');
await patches('pt');
await resume('rs');
await atLive('al');

clearTimeout(timeout);
console.log('PASS');
process.exit(0);

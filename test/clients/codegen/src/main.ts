// A TypeScript client of a Sluice database whose schema has
// `type Dog { name: String! }`, typed by GraphQL Code Generator:
// graphql-codegen (codegen.yml) reads the database's schema by
// introspection and writes src/gql/, whose graphql() turns each operation
// below into a TypedDocumentNode, so that its variables and its result
// have the schema's types (and tsc refuses a field the schema lacks).
// Queries and mutations go over GraphQL over HTTP, the subscription over
// graphql-sse, resumed from the position of a read.
//
//   SLUICE_GRAPHQL_URL=<graphql url> SLUICE_AUTHORIZATION=<Authorization header value> npx graphql-codegen --config codegen.yml
//   npx tsc -p . && node dist/main.js <graphql url> <Authorization header value>
import { print } from 'graphql';
import type { ResultOf, TypedDocumentNode } from '@graphql-typed-document-node/core';
import { createClient } from 'graphql-sse';
import { graphql } from './gql/index.js';

const [url, authorization] = process.argv.slice(2);
if (!url || !authorization) {
  console.error('usage: node dist/main.js <graphql url> <Authorization header value>');
  process.exit(2);
}

const AddDog = graphql(`
  mutation AddDog($name: String!) {
    Dog_insert(documents: [{ name: $name }])
  }
`);

const Dogs = graphql(`
  query Dogs {
    Dog(orderBy: { name: ASC }) {
      _id
      name
    }
  }
`);

const DogAdded = graphql(`
  subscription DogAdded {
    Dog_added {
      _id
      name
    }
  }
`);

// request runs a query or mutation over GraphQL over HTTP: its data, and
// the position a query's result reflects.
async function request<R, V>(doc: TypedDocumentNode<R, V>, variables: V): Promise<{ data: R; position?: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json', accept: 'application/graphql-response+json' },
    body: JSON.stringify({ query: print(doc), variables }),
  });
  const body = (await res.json()) as { data?: R | null; errors?: unknown[]; extensions?: { position?: string } };
  if (!res.ok || body.errors || !body.data) {
    throw new Error(`${print(doc).trim().split('\n')[0]}: ${res.status} ${JSON.stringify(body)}`);
  }
  return { data: body.data, position: body.extensions?.position };
}

const before = await request(Dogs, {});
const ids: string[] = (await request(AddDog, { name: 'Rex' })).data.Dog_insert;
console.log(`ok: a typed mutation inserted ${ids.join(', ')}`);

// From the read's position, the subscription receives the write made
// since: no race between subscribing and writing.
const client = createClient({ url, headers: { authorization } });
const events = client.iterate<ResultOf<typeof DogAdded>>({ query: print(DogAdded), extensions: { lastEventId: before.position } });
const event = await events.next();
if (event.done || !event.value.data?.Dog_added) throw new Error(`subscription: ${JSON.stringify(event.value)}`);
const added: { _id: string; name: string } = event.value.data.Dog_added;
if (added._id !== ids[0] || added.name !== 'Rex') throw new Error(`subscription event ${JSON.stringify(added)}`);
console.log(`ok: a typed subscription received ${added._id}`);
await events.return?.(undefined);
client.dispose();

const names: string[] = (await request(Dogs, {})).data.Dog.map((d) => d.name);
if (!names.includes('Rex')) throw new Error(`query: ${names}`);
console.log(`ok: a typed query lists ${names.join(', ')}`);

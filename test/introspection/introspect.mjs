// Builds a client schema from the introspection of Sluice GraphQL endpoints
// with graphql-js 16, as GraphiQL and code generators do (Python's gql uses
// graphql-core 3.2, a port of it), and fails unless, for each endpoint:
// - buildClientSchema accepts the full introspection result (every option
//   of getIntrospectionQuery that graphql-js 16 has);
// - validateSchema finds no error in the schema it built;
// - every directive location is one of graphql-js's DirectiveLocation
//   values (graphql-js keeps an unknown one; graphql-core refuses the
//   schema);
// - the schema printed as SDL builds again;
// and, for the first endpoint, the operations in operations.graphql
// validate against its client schema, and its mutation, then its query,
// run on Sluice without error. Prints one line per check; exits 1 on a failure.
//
//   node introspect.mjs <Authorization header value> <graphql url>...
import { readFileSync } from 'node:fs';
import {
  DirectiveLocation, buildClientSchema, buildSchema, getIntrospectionQuery, parse, printSchema, validate, validateSchema,
} from 'graphql';

const [authorization, ...urls] = process.argv.slice(2);
if (!authorization || urls.length === 0) {
  console.error('usage: node introspect.mjs <Authorization header value> <graphql url>...');
  process.exit(2);
}

let failures = 0;
const fail = (msg) => { failures++; console.log(`FAIL ${msg}`); };
const ok = (msg) => console.log(`ok   ${msg}`);

async function post(url, body) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json', accept: 'application/graphql-response+json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`status ${res.status}: ${text}`);
  return JSON.parse(text);
}

const query = getIntrospectionQuery({
  descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true, schemaDescription: true, inputValueDeprecation: true, oneOf: true,
});
const known = new Set(Object.values(DirectiveLocation));

for (const [i, url] of urls.entries()) {
  let schema;
  try {
    const res = await post(url, { query, operationName: 'IntrospectionQuery' });
    if (res.errors) throw new Error(JSON.stringify(res.errors));
    for (const d of res.data.__schema.directives) {
      const bad = d.locations.filter((l) => !known.has(l));
      if (bad.length) fail(`${url}: @${d.name} on ${bad.join(', ')}, not a graphql-js 16 DirectiveLocation`);
    }
    schema = buildClientSchema(res.data);
    ok(`${url}: buildClientSchema (${Object.keys(schema.getTypeMap()).length} types)`);
  } catch (e) {
    fail(`${url}: introspection and buildClientSchema: ${e.message}`);
    continue;
  }
  const errors = validateSchema(schema);
  if (errors.length) fail(`${url}: validateSchema: ${errors.map((e) => e.message).join('; ')}`);
  else ok(`${url}: validateSchema`);
  try {
    const again = buildSchema(printSchema(schema));
    const errs = validateSchema(again);
    if (errs.length) throw new Error(errs.map((e) => e.message).join('; '));
    ok(`${url}: its SDL builds again`);
  } catch (e) {
    fail(`${url}: printSchema then buildSchema: ${e.message}`);
  }
  if (i !== 0) continue;

  const doc = parse(readFileSync(new URL('./operations.graphql', import.meta.url), 'utf8'));
  const invalid = validate(schema, doc);
  if (invalid.length) {
    fail(`${url}: operations.graphql does not validate: ${invalid.map((e) => e.message).join('; ')}`);
    continue;
  }
  ok(`${url}: operations.graphql validates (${doc.definitions.map((d) => `${d.operation} ${d.name.value}`).join(', ')})`);
  for (const operationName of ['Write', 'Everything']) {
    try {
      const res = await post(url, { query: doc.loc.source.body, operationName, variables: operationName === 'Everything' ? { min: 1 } : {} });
      if (res.errors) throw new Error(JSON.stringify(res.errors));
      ok(`${url}: ${operationName} runs`);
    } catch (e) {
      fail(`${url}: ${operationName}: ${e.message}`);
    }
  }
}
process.exit(failures ? 1 : 0);

// Runs the graphql-http server audit against one Sluice database endpoint
// and fails unless every audit passes: no error and no warning.
//
// Usage: SLUICE_GRAPHQL_URL=http://127.0.0.1:6363/api/graphql/admin/db \
//        SLUICE_AUTH="Basic <base64 user:password>" node audit.mjs
// The Go test graph/TestGraphQLHTTPAudit starts a daemon and runs this.
import { auditServer } from 'graphql-http';
import { buildClientSchema, getIntrospectionQuery, printSchema } from 'graphql';

const url = process.env.SLUICE_GRAPHQL_URL;
const authorization = process.env.SLUICE_AUTH;
if (!url) {
  console.error('SLUICE_GRAPHQL_URL is not set');
  process.exit(2);
}

const results = await auditServer({
  url,
  fetchFn: (input, init = {}) => {
    const headers = new Headers(init.headers);
    if (authorization) headers.set('authorization', authorization);
    return fetch(input, { ...init, headers });
  },
});

let ok = 0;
let bad = 0;
for (const r of results) {
  if (r.status === 'ok') {
    ok++;
    continue;
  }
  bad++;
  let detail = '';
  if (r.response) {
    detail = ` (status ${r.response.status}, body ${await r.response.text()})`;
  }
  console.log(`${r.status.toUpperCase()} ${r.id} ${r.name}: ${r.reason}${detail}`);
}
console.log(`graphql-http audit: ${ok} ok, ${bad} not ok, of ${results.length}`);

// GraphiQL and code generators build the schema from introspection with
// graphql-js: check that it accepts ours.
let schemaOK = true;
try {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      ...(authorization ? { authorization } : {}),
    },
    body: JSON.stringify({ query: getIntrospectionQuery({ descriptions: true, inputValueDeprecation: true, specifiedByUrl: true }) }),
  });
  const body = await res.json();
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  const schema = buildClientSchema(body.data);
  console.log(`buildClientSchema: ok, ${printSchema(schema).split('\n').length} lines of SDL`);
} catch (e) {
  schemaOK = false;
  console.log(`buildClientSchema failed: ${e.message}`);
}
process.exit(bad === 0 && schemaOK ? 0 : 1);

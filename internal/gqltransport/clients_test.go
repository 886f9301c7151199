package gqltransport_test

import (
	"encoding/base64"
	"path/filepath"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestGraphQLClients runs real clients (test/clients/clients.mjs):
// graphql-sse in both modes, graphql-ws, Apollo Client over GraphQLWsLink,
// a graphql-sse link and HttpLink's multipart subscriptions, and urql over
// graphql-ws. Each subscribes, receives the event of a write, resumes
// with extensions.lastEventId and completes; with wrong credentials,
// graphql-sse reports the 401 and Apollo's HttpLink its UNAUTHENTICATED
// error (a query and a multipart subscription). The same clients run live
// queries on one daemon while another writes (test/clients/live.mjs),
// with Apollo's useSubscription and JSON Patches applied by
// fast-json-patch. It needs Node 20 and `npm ci` in test/clients, so it
// runs only when SLUICE_GRAPHQL_CLIENTS=1 (make test-graphql-clients sets
// it; make test depends on that target).
func TestGraphQLClients(t *testing.T) {
	dir := dt.NodeProject(t, "SLUICE_GRAPHQL_CLIENTS", "clients", "@apollo/client")
	t.Parallel()
	d := dt.Start(t)
	authz := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+dt.AdminPassword))
	// Each script on a database of its own.
	for db, script := range map[string]string{"kennel": "clients.mjs", "follow": "read-then-subscribe.mjs"} {
		d.CreateDatabase(t, db, "type Dog { name: String! }")
		dt.RunNode(t, dir, nil, script, d.URL+"/api/graphql/admin/"+db, authz)
	}
	d.CreateDatabase(t, "live", "type Person { name: String! team: String manager: Person }")
	b := dt.Start(t, dt.WithDatabaseURL(d.DatabaseURL))
	dt.RunNode(t, dir, nil, "live.mjs", d.URL+"/api/graphql/admin/live", b.URL+"/api/graphql/admin/live", authz)

	// The TypeScript client typed by GraphQL Code Generator, as
	// codegen/src/main.ts says to build it: codegen from the database's
	// schema, tsc, then node.
	d.CreateDatabase(t, "typed", "type Dog { name: String! }")
	typed := d.URL + "/api/graphql/admin/typed"
	codegen := filepath.Join(dir, "codegen")
	dt.RunNode(t, codegen, []string{"SLUICE_GRAPHQL_URL=" + typed, "SLUICE_AUTHORIZATION=" + authz},
		"../node_modules/@graphql-codegen/cli/cjs/bin.js", "--config", "codegen.yml")
	dt.RunNode(t, codegen, nil, "../node_modules/typescript/bin/tsc", "-p", ".")
	dt.RunNode(t, codegen, nil, "dist/main.js", typed, authz)
}

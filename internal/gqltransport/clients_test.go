package gqltransport_test

import (
	"encoding/base64"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestGraphQLClients runs real clients (test/clients/clients.mjs):
// graphql-sse in both modes, graphql-ws, Apollo Client over GraphQLWsLink,
// a graphql-sse link and HttpLink's multipart subscriptions, and urql over
// graphql-ws. Each subscribes, receives the event of a write, resumes
// with extensions.lastEventId and completes. It needs Node 20 and `npm
// ci` in test/clients, so it runs only when SLUICE_GRAPHQL_CLIENTS=1
// (make test-graphql-clients sets it; make test depends on that target).
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
}

package gqltransport_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
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
	if os.Getenv("SLUICE_GRAPHQL_CLIENTS") != "1" {
		t.Skip("set SLUICE_GRAPHQL_CLIENTS=1 (make test-graphql-clients) to run the Node clients")
	}
	t.Parallel()
	dir, err := filepath.Abs("../../test/clients")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@apollo", "client")); err != nil {
		t.Fatalf("the clients are not installed: run npm ci in %s (%v)", dir, err)
	}
	d := dt.Start(t)
	authz := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+dt.AdminPassword))
	// Each script on a database of its own.
	for db, script := range map[string]string{"kennel": "clients.mjs", "follow": "read-then-subscribe.mjs"} {
		d.CreateDatabase(t, db, "type Dog { name: String! }")
		cmd := exec.Command("node", script, d.URL+"/api/graphql/admin/"+db, authz)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		t.Logf("%s:\n%s", script, out)
		if err != nil {
			t.Fatalf("%s failed: %v", script, err)
		}
	}
}

package gqltransport_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestGraphQLSSEClient runs the graphql-sse npm client
// (test/graphql-sse/client.mjs) in distinct connections mode: it
// subscribes, receives every event of three commits in order, then runs a
// query and a mutation through the same client. It needs Node 20 and
// `npm ci` in test/graphql-sse, so it runs only when
// SLUICE_GRAPHQL_SSE_CLIENT=1 (make test-graphql-sse sets it; make test
// depends on that target).
func TestGraphQLSSEClient(t *testing.T) {
	if os.Getenv("SLUICE_GRAPHQL_SSE_CLIENT") != "1" {
		t.Skip("set SLUICE_GRAPHQL_SSE_CLIENT=1 (make test-graphql-sse) to run the Node client")
	}
	t.Parallel()
	dir, err := filepath.Abs("../../test/graphql-sse")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "graphql-sse")); err != nil {
		t.Fatalf("graphql-sse is not installed: run npm ci in %s (%v)", dir, err)
	}
	d := dt.Start(t)
	d.CreateDatabase(t, "kennel", "type Dog { name: String! }")
	cmd := exec.Command("node", "client.mjs", d.URL+"/api/graphql/admin/kennel",
		"Basic "+base64.StdEncoding.EncodeToString([]byte("admin:"+dt.AdminPassword)))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("graphql-sse client failed: %v", err)
	}
}

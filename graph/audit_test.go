package graph_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/internal/daemontest"
)

// TestGraphQLHTTPAudit runs the graphql-http npm package's server audit
// (test/graphql-http/audit.mjs) against a database endpoint: every audit
// must pass, with no warning, and graphql-js must build a client schema
// from our introspection. It needs Node 20 and `npm ci` in
// test/graphql-http, so it runs only when SLUICE_GRAPHQL_HTTP_AUDIT=1 (make
// test-graphql-http sets it; make test depends on that target).
func TestGraphQLHTTPAudit(t *testing.T) {
	if os.Getenv("SLUICE_GRAPHQL_HTTP_AUDIT") != "1" {
		t.Skip("set SLUICE_GRAPHQL_HTTP_AUDIT=1 (make test-graphql-http) to run the Node audit")
	}
	t.Parallel()
	dir, err := filepath.Abs("../test/graphql-http")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "graphql-http")); err != nil {
		t.Fatalf("graphql-http is not installed: run npm ci in %s (%v)", dir, err)
	}
	d := daemontest.Start(t)
	d.CreateDatabase(t, "audit", testSDL)
	cmd := exec.Command("node", "audit.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"SLUICE_GRAPHQL_URL="+d.URL+"/api/graphql/admin/audit",
		"SLUICE_AUTH=Basic "+base64.StdEncoding.EncodeToString([]byte("admin:"+daemontest.AdminPassword)),
	)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("graphql-http audit failed: %v", err)
	}
}

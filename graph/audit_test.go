package graph_test

import (
	"encoding/base64"
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
	dir := daemontest.NodeProject(t, "SLUICE_GRAPHQL_HTTP_AUDIT", "graphql-http", "graphql-http")
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "audit", testSDL)
	daemontest.RunNode(t, dir, []string{
		"SLUICE_GRAPHQL_URL=" + d.URL + "/api/graphql/admin/audit",
		"SLUICE_AUTH=Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+daemontest.AdminPassword)),
	}, "audit.mjs")
}

package gqltransport_test

import (
	"encoding/base64"
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
	dir := dt.NodeProject(t, "SLUICE_GRAPHQL_SSE_CLIENT", "graphql-sse", "graphql-sse")
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "kennel", "type Dog { name: String! }")
	dt.RunNode(t, dir, nil, "client.mjs", d.URL+"/api/graphql/admin/kennel",
		"Basic "+base64.StdEncoding.EncodeToString([]byte("admin:"+dt.AdminPassword)))
}

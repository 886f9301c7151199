package graphiql_test

import (
	"net/http"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestBrowser runs test/browser/graphiql.mjs: Debian's Chromium, headless,
// driven by puppeteer-core, opens the landing page, which links to the
// database's GraphiQL page, then the database's GraphQL URL, which sends
// it to that page, opened on a query of the first class; with every
// request outside the daemon cut off, it runs a query and a subscription
// that receives a write made after it started, then the _system page
// (see dt.RunBrowserScript for what it needs).
func TestBrowser(t *testing.T) {
	dt.SkipWithoutBrowser(t)
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "kennel", "type Dog { name: String! }")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/kennel", `{"@type":"Dog","@id":"rex","name":"Rex"}`)
	dt.RunBrowserScript(t, "graphiql.mjs", d.URL, "admin/kennel", "admin", dt.AdminPassword)
}

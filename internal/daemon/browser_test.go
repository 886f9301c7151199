package daemon_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestBrowserEventSource runs test/browser/eventsource.mjs: Debian's
// Chromium, headless, driven by puppeteer-core, loads a page from a second
// local HTTP server (another origin, listed in the daemon's cors_origins)
// that gets stream tickets with fetch, follows the REST change stream and
// a GraphQL subscription with native EventSources, receives the events of
// writes made after they opened, and reads Sluice's 401 answers (see
// dt.RunBrowserScript for what it needs).
func TestBrowserEventSource(t *testing.T) {
	dt.SkipWithoutBrowser(t)
	t.Parallel()
	// The other origin: a page with no script of its own; the test runs
	// the application's code in it.
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>another origin</title><p>A page that follows Sluice.</p>\n"))
	}))
	defer page.Close()
	d := dt.Start(t, dt.WithCORS(page.URL))
	d.CreateDatabase(t, "kennel", "type Dog { name: String! }")
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/users", `{"name":"bea","organization":"admin","password":"bea-password"}`)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/roles/admin/kennel", `{"user":"bea","role":"read"}`)
	// The page authenticates as bea, a reader; the script writes as admin.
	dt.RunBrowserScript(t, "eventsource.mjs", d.URL, page.URL, "admin/kennel", "bea", "bea-password", "admin", dt.AdminPassword)
}

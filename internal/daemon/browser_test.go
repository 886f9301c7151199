package daemon_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestBrowserEventSource runs test/browser/eventsource.mjs: Debian's
// Chromium, headless, driven by puppeteer-core, loads a page from a second
// local HTTP server (another origin, listed in the daemon's cors_origins)
// that gets stream tickets with fetch, follows the REST change stream and
// a GraphQL subscription with native EventSources, receives the events of
// writes made after they opened, and reads Sluice's 401 answers. It needs
// Node 20, `npm ci` in test/browser and /usr/bin/chromium (or CHROMIUM),
// so it runs only when SLUICE_BROWSER_TEST=1 (make test-browser sets it).
func TestBrowserEventSource(t *testing.T) {
	if os.Getenv("SLUICE_BROWSER_TEST") != "1" {
		t.Skip("set SLUICE_BROWSER_TEST=1 (make test-browser) to run the browser test")
	}
	t.Parallel()
	dir, err := filepath.Abs("../../test/browser")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "puppeteer-core")); err != nil {
		t.Fatalf("puppeteer-core is not installed: run npm ci in %s (%v)", dir, err)
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no Chromium at %s: apt-get install chromium, or set CHROMIUM (%v)", chromium, err)
	}
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
	cmd := exec.Command("node", "eventsource.mjs", d.URL, page.URL, "admin/kennel", "bea", "bea-password", "admin", dt.AdminPassword)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("browser test failed: %v", err)
	}
}

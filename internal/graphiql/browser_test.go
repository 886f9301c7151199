package graphiql_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestBrowser runs test/browser/graphiql.mjs: Debian's Chromium, headless,
// driven by puppeteer-core, loads the GraphiQL page of a database with
// every request outside the daemon cut off, runs a query and a
// subscription that receives a write made after it started, then the
// _system page. It needs Node 20, `npm ci` in test/browser and
// /usr/bin/chromium (or CHROMIUM), so it runs only when
// SLUICE_BROWSER_TEST=1 (make test-browser sets it; make test depends on
// that target, and .ci/run installs Chromium).
func TestBrowser(t *testing.T) {
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
	d := dt.Start(t)
	d.CreateDatabase(t, "kennel", "type Dog { name: String! }")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/kennel", `{"@type":"Dog","@id":"rex","name":"Rex"}`)
	cmd := exec.Command("node", "graphiql.mjs", d.URL, "admin/kennel", "admin", dt.AdminPassword)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("browser test failed: %v", err)
	}
}

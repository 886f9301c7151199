package daemontest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RunBrowserScript runs the Node script test/browser/<script> with args,
// driving Debian's Chromium headless through puppeteer-core, and fails t
// when it fails. It needs Node 20, `npm ci` in test/browser and
// /usr/bin/chromium (or CHROMIUM), so a browser test runs only when
// SLUICE_BROWSER_TEST=1 (make test-browser sets it; make test depends on
// that target, and .ci/run installs Chromium); otherwise it is skipped.
// Call SkipWithoutBrowser first when the test sets up anything costly.
func RunBrowserScript(t *testing.T, script string, args ...string) {
	t.Helper()
	SkipWithoutBrowser(t)
	// Tests run in their package's directory, internal/<package>.
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
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("browser test %s failed: %v", script, err)
	}
}

// SkipWithoutBrowser skips t unless SLUICE_BROWSER_TEST=1.
func SkipWithoutBrowser(t *testing.T) {
	t.Helper()
	if os.Getenv("SLUICE_BROWSER_TEST") != "1" {
		t.Skip("set SLUICE_BROWSER_TEST=1 (make test-browser) to run the browser test")
	}
}

package daemontest

import (
	"os"
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
	dir := NodeProject(t, "SLUICE_BROWSER_TEST", "browser", "puppeteer-core")
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no Chromium at %s: apt-get install chromium, or set CHROMIUM (%v)", chromium, err)
	}
	RunNode(t, dir, []string{"CHROMIUM=" + chromium}, append([]string{script}, args...)...)
}

// SkipWithoutBrowser skips t unless SLUICE_BROWSER_TEST=1.
func SkipWithoutBrowser(t *testing.T) {
	t.Helper()
	if os.Getenv("SLUICE_BROWSER_TEST") != "1" {
		t.Skip("set SLUICE_BROWSER_TEST=1 (make test-browser) to run the browser test")
	}
}

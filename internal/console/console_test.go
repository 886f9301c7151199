package console_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/console"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/webfiles/webfilestest"
)

// TestPage checks what a browser gets: the same page, without
// credentials, for the console's root and for every view's URL (so that
// a deep link survives a reload), with the Content-Security-Policy and
// Cross-Origin-Opener-Policy; the
// page's files, byte for byte the ones in web/ and assets/; and every
// module a script imports, so that nothing the console loads is missing.
func TestPage(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	index, err := os.ReadFile("web/index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/console/", "/console/users", "/console/admin/people", "/console/admin/people/documents/Person",
		"/console/admin/people/stream", "/console/admin/people/history?commit=3", "/console/admin/people/webhooks", "/console/no/such/view/at/all"} {
		r := d.MustDo(t, http.StatusOK, dt.NoAuth(), http.MethodGet, path, nil, "Accept-Encoding", "identity")
		if !bytes.Equal(r.Body, index) {
			t.Errorf("%s: not index.html: %.200s", path, r.Body)
		}
		if got := r.Header.Get("Content-Security-Policy"); got != console.ContentSecurityPolicy {
			t.Errorf("%s: Content-Security-Policy %q", path, got)
		}
		if got := r.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", path, got)
		}
		// A page of another origin that opens the console must get no
		// handle on its window.
		if got := r.Header.Get("Cross-Origin-Opener-Policy"); got != "same-origin" {
			t.Errorf("%s: Cross-Origin-Opener-Policy %q", path, got)
		}
	}
	for _, want := range []string{"frame-ancestors 'none'", "script-src 'self'", "default-src 'none'", "connect-src 'self'"} {
		if !strings.Contains(console.ContentSecurityPolicy, want) {
			t.Errorf("the Content-Security-Policy lacks %s", want)
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Get(d.URL + "/console")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/console/" {
		t.Errorf("/console: %d, Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	if r := d.Do(t, dt.Admin(), http.MethodPost, "/console/", nil); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST /console/: %d", r.Status)
	}
	d.MustDo(t, http.StatusNotFound, dt.NoAuth(), http.MethodGet, console.AssetsPath+"nope.js", nil)
	d.MustDo(t, http.StatusNotFound, dt.NoAuth(), http.MethodGet, console.AssetsPath+"web/app.js", nil)

	// The page's references, then every module the scripts import.
	var queue []string
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(index), -1) {
		if m[1] != "data:," {
			queue = append(queue, m[1])
		}
	}
	imports := regexp.MustCompile(`(?:from|import)\s*["']\./([^"']+)["']`)
	seen := map[string]bool{}
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		if seen[ref] {
			continue
		}
		seen[ref] = true
		name, ok := strings.CutPrefix(ref, console.AssetsPath)
		if !ok {
			t.Errorf("the console loads %s, not from %s", ref, console.AssetsPath)
			continue
		}
		a := d.MustDo(t, http.StatusOK, dt.NoAuth(), http.MethodGet, ref, nil, "Accept-Encoding", "identity")
		want, err := os.ReadFile(sourceFile(name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Body, want) {
			t.Errorf("%s: %d bytes differ from the %d of %s", ref, len(a.Body), len(want), sourceFile(name))
		}
		if a.Header.Get("Content-Security-Policy") != console.ContentSecurityPolicy || a.Header.Get("X-Content-Type-Options") != "nosniff" ||
			a.Header.Get("Cross-Origin-Opener-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", ref, a.Header)
		}
		for _, m := range imports.FindAllStringSubmatch(string(a.Body), -1) {
			queue = append(queue, console.AssetsPath+m[1])
		}
	}
	if len(seen) < 15 {
		t.Errorf("the page loads %d files, fewer than the console's: %v", len(seen), seen)
	}
}

// sourceFile returns the file in this package an asset name is served
// from: the vendored ones in assets/, the console's own in web/.
func sourceFile(name string) string {
	if _, err := os.Stat(filepath.Join("assets", name)); err == nil {
		return filepath.Join("assets", name)
	}
	return filepath.Join("web", name)
}

// TestSize keeps the first view (the page and everything it loads, which
// is every file of the console) within its budget of 300 KB sent
// gzip-compressed, as docs/console.md states.
func TestSize(t *testing.T) {
	t.Parallel()
	var raw, compressed int
	for _, dir := range []string{"web", "assets"} {
		files, err := filepath.Glob(filepath.Join(dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if ext := filepath.Ext(f); ext != ".js" && ext != ".css" && ext != ".html" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var gz bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
			_, _ = zw.Write(b)
			_ = zw.Close()
			raw += len(b)
			compressed += gz.Len()
		}
	}
	t.Logf("the console's files: %d bytes, %d gzip-compressed", raw, compressed)
	if compressed > 300_000 {
		t.Errorf("the console's files are %d bytes compressed, over the 300 KB budget docs/console.md states", compressed)
	}
}

// TestVendoredAssets checks the vendored files against the manifest that
// make console-assets wrote, and the manifest against the versions
// tools/console/package-lock.json pins.
func TestVendoredAssets(t *testing.T) {
	t.Parallel()
	webfilestest.CheckVendored(t, "assets", "../../tools/console/package-lock.json", "console-assets", 3)
	licences, err := os.ReadFile("assets/LICENSES.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"preact", "htm"} {
		if !strings.Contains(string(licences), "\n"+p+" ") {
			t.Errorf("LICENSES.txt has no licence of %s", p)
		}
	}
}

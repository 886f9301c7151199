package daemon_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestBrowserConditionalWrites runs test/browser/edit.mjs: Debian's
// Chromium, headless, loads a page from another origin listed in the
// daemon's cors_origins, whose fetches read a document's ETag and
// Sluice-Position, patch it with If-Match and an Idempotency-Key, read a
// 412 with the current ETag, retry the patch and read the same answer,
// create a document with If-None-Match: * and delete it with If-Match:
// every preflight allows PATCH and those headers, and every answer
// exposes ETag, Sluice-Position and Idempotent-Replayed.
func TestBrowserConditionalWrites(t *testing.T) {
	dt.SkipWithoutBrowser(t)
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>another origin</title><p>A page that edits Sluice documents.</p>\n"))
	}))
	defer page.Close()
	d := dt.Start(t, dt.WithCORS(page.URL))
	d.CreateDatabase(t, "notes", "type Note { text: String }")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/notes", `{"@type":"Note","@id":"n","text":"first"}`)
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/users", `{"name":"ed","organization":"admin","password":"ed-password"}`)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/roles/admin/notes", `{"user":"ed","role":"write"}`)
	dt.RunBrowserScript(t, "edit.mjs", d.URL, page.URL, "admin/notes", "ed", "ed-password")
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/notes?id=Note/n", nil); !strings.Contains(string(r.Body), `"text":"edited"`) {
		t.Errorf("Note/n after the page's edits: %s", r.Body)
	}
	var log []json.RawMessage
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/notes", nil).Body, &log); err != nil || len(log) != 4 {
		t.Errorf("%d commits, want 4: the insert, one patch, a create and a delete (%v)", len(log), err)
	}
}

// TestBrowserCrossSiteForms runs test/browser/csrf.mjs: a user signs in to
// Sluice with Basic auth in Debian's Chromium, headless, then visits pages
// of another site that submit forms to Sluice (text/plain, multipart,
// form-urlencoded): each is refused with 403, and nothing they asked for
// exists afterwards, while a form of Sluice's own origin writes (the
// browser does send what it remembers).
func TestBrowserCrossSiteForms(t *testing.T) {
	dt.SkipWithoutBrowser(t)
	t.Parallel()
	d := dt.Start(t)
	// pad takes what a text/plain form adds after the JSON it smuggles.
	d.CreateDatabase(t, "people", "type Note { text: String pad: String }")
	daemonURL := d.URL
	forms := map[string]string{
		"plain": `<form method="post" enctype="text/plain" action="` + daemonURL + `/api/document/admin/people">` +
			`<input name='{"@type":"Note","@id":"Note/evil","text":"x","pad":"' value='"}'></form>`,
		"multipart": `<form method="post" enctype="multipart/form-data" action="` + daemonURL + `/api/users">` +
			`<input name="name" value="evil"><input name="password" value="evil-password"></form>`,
		"urlencoded": `<form method="post" action="` + daemonURL + `/api/tokens"><input name="name" value="evil"></form>`,
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		form, ok := forms[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>another site</title><body onload=\"document.forms[0].submit()\">" + form + "</body>\n"))
	}))
	defer page.Close()
	// The daemon is at 127.0.0.1: the page at localhost is of another site.
	attacker := strings.Replace(page.URL, "127.0.0.1", "localhost", 1)
	dt.RunBrowserScript(t, "csrf.mjs", d.URL, attacker, "admin", dt.AdminPassword)
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/people?type=Note", nil); !strings.Contains(string(r.Body), "Note/control") || strings.Contains(string(r.Body), "Note/evil") {
		t.Errorf("documents after the forms: %s", r.Body)
	}
	for _, path := range []string{"/api/users", "/api/tokens"} {
		if r := d.MustDo(t, 200, dt.Admin(), "GET", path, nil); strings.Contains(string(r.Body), "evil") {
			t.Errorf("GET %s after the forms: %s", path, r.Body)
		}
	}
}

// TestBrowserDownloads runs test/browser/downloads.mjs: Debian's
// Chromium, headless, follows links (carrying their own credentials, as
// a link on another site may) to a schema's SDL and a document listing
// as NDJSON, which it saves as files: each is named after its type,
// install.bat.graphql and install.bat.ndjson, not install.bat, the
// database's name, under which a database's writers made the browser
// save a command script of theirs (TestDownloadsAreNamedByTheirType).
func TestBrowserDownloads(t *testing.T) {
	dt.SkipWithoutBrowser(t)
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "install.bat", "\"\"\"\r\ncalc.exe\r\n\"\"\"\ntype Note { text: String }")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/install.bat", `{"@type":"Note","@id":"a","text":"||calc.exe||"}`)
	dt.RunBrowserScript(t, "downloads.mjs", d.URL, "admin", dt.AdminPassword, "admin/install.bat")
}

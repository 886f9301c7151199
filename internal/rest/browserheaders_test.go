package rest_test

import (
	"mime"
	"net/http"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestDownloadsAreNamedByTheirType: the answers a browser cannot show, and
// so saves as a file (a schema's SDL, a listing as NDJSON), name that file
// <database>.graphql and <database>.ndjson. Found by review: a browser
// named the file after the URL's last segment, the database's name, which
// may end in .bat or .cmd; and a database's writers choose what the file
// holds (a description in the SDL, a value in a document), so a link to
// such a database on Sluice's own address, followed with the credentials
// the browser remembers or with the link's own, saved a command script of
// theirs as install.bat (TestBrowserDownloads shows it in Chromium).
func TestDownloadsAreNamedByTheirType(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "install.bat", "\"\"\"\r\ncalc.exe\r\n\"\"\"\ntype Note { text: String }\ntype Empty { n: Int }")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/install.bat", `{"@type":"Note","@id":"a","text":"||calc.exe||"}`)
	for _, c := range []struct{ path, ctype, file string }{
		{"/api/schema/admin/install.bat", "application/graphql", "install.bat.graphql"},
		{"/api/document/admin/install.bat", "application/x-ndjson", "install.bat.ndjson"},
		{"/api/document/admin/install.bat?type=Note&count=1", "application/x-ndjson", "install.bat.ndjson"},
		// No document: the listing is empty, and still NDJSON.
		{"/api/document/admin/install.bat?type=Empty", "application/x-ndjson", "install.bat.ndjson"},
	} {
		res := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, c.path, nil)
		if ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); ct != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %s", c.path, res.Header.Get("Content-Type"), c.ctype)
		}
		disp, params, err := mime.ParseMediaType(res.Header.Get("Content-Disposition"))
		if err != nil || disp != "attachment" || params["filename"] != c.file {
			t.Errorf("GET %s: Content-Disposition %q, want attachment; filename=%q", c.path, res.Header.Get("Content-Disposition"), c.file)
		}
	}
	// What a browser shows (JSON) is named nothing: it is not saved.
	for _, path := range []string{"/api/document/admin/install.bat?as_list=true", "/api/document/admin/install.bat?id=Note/a", "/api/db/admin/install.bat"} {
		if res := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, path, nil); res.Header.Get("Content-Disposition") != "" {
			t.Errorf("GET %s: Content-Disposition %q on JSON", path, res.Header.Get("Content-Disposition"))
		}
	}
}

// TestEveryAnswerForbidsSniffing: every answer says X-Content-Type-Options:
// nosniff, not only the console's and GraphiQL's files: JSON (a success,
// an error, a refusal before authentication), an SDL, NDJSON, a GraphQL
// answer, a redirect's HTML, the health checks and the metrics. Found by
// review: the API's answers, which carry what writers wrote, did not, so
// a browser was free to guess their type from their bytes.
func TestEveryAnswerForbidsSniffing(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "notes", "type Note { text: String }")
	for _, c := range []struct {
		method, path, body string
		auth               dt.Auth
		header             []string
		status             int
	}{
		{http.MethodGet, "/api/db", "", dt.Admin(), nil, http.StatusOK},
		{http.MethodGet, "/api/db/admin/none", "", dt.Admin(), nil, http.StatusNotFound},
		{http.MethodGet, "/api/db", "", dt.NoAuth(), nil, http.StatusUnauthorized},
		{http.MethodGet, "/api/schema/admin/notes", "", dt.Admin(), nil, http.StatusOK},
		{http.MethodGet, "/api/document/admin/notes", "", dt.Admin(), nil, http.StatusOK},
		{http.MethodPost, "/api/graphql/admin/notes", `{"query":"{ Note { _id } }"}`, dt.Admin(), []string{"Content-Type", "application/json"}, http.StatusOK},
		{http.MethodPost, "/api/tokens", `{"name":"x"}`, dt.Admin(), []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://elsewhere.example"}, http.StatusForbidden},
		{http.MethodGet, "/nowhere", "", dt.Admin(), nil, http.StatusNotFound},
		{http.MethodGet, "/healthz", "", dt.NoAuth(), nil, http.StatusOK},
		{http.MethodGet, "/metrics", "", dt.Admin(), nil, http.StatusOK},
		{http.MethodGet, "/", "", dt.Admin(), nil, http.StatusOK},
	} {
		res := d.Do(t, c.auth, c.method, c.path, c.body, c.header...)
		if res.Status != c.status {
			t.Errorf("%s %s: status %d, want %d: %s", c.method, c.path, res.Status, c.status, res.Body)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d, %s): X-Content-Type-Options %q, want nosniff", c.method, c.path, res.Status, res.Header.Get("Content-Type"), got)
		}
	}
	// The redirects, to GraphiQL and to the console, as sent (HTML).
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/api/graphql/admin/notes", "/console"} {
		req, err := http.NewRequest(http.MethodGet, d.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "text/html")
		dt.Admin()(req)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode/100 != 3 || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d, X-Content-Type-Options %q; want a redirect, nosniff", path, res.StatusCode, res.Header.Get("X-Content-Type-Options"))
		}
	}
}

package graphiql_test

import (
	"bytes"
	"compress/gzip"
	"html"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/graphiql"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/webfiles/webfilestest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestPage checks what a browser gets: the page of a database and of
// _system behind the API's auth (a Basic challenge without credentials),
// with the Content-Security-Policy, loading only files the daemon serves,
// without credentials, byte for byte the vendored ones.
func TestPage(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "kennel", "type Dog { name: String! }")

	r := d.Do(t, dt.NoAuth(), http.MethodGet, "/api/graphiql/admin/kennel", nil)
	if r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("without credentials: %d %v", r.Status, r.Header)
	}
	if r := d.Do(t, dt.Admin(), http.MethodPost, "/api/graphiql/admin/kennel", nil); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", r.Status)
	}

	for path, endpoint := range map[string]string{
		"/api/graphiql/admin/kennel": "/api/graphql/admin/kennel",
		"/api/graphiql/_system":      "/api/graphql/_system",
	} {
		r := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, path, nil)
		if got := r.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", path, got)
		}
		if got := r.Header.Get("Content-Security-Policy"); got != graphiql.ContentSecurityPolicy {
			t.Errorf("%s: Content-Security-Policy %q", path, got)
		}
		if !strings.Contains(string(r.Body), `data-endpoint="`+endpoint+`"`) {
			t.Errorf("%s: the page does not name the endpoint %s:\n%s", path, endpoint, r.Body)
		}
		refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(r.Body), -1)
		if len(refs) != 8 {
			t.Errorf("%s: %d references, want 8 (an icon, 2 stylesheets, 5 scripts): %v", path, len(refs), refs)
		}
		for _, m := range refs {
			ref := m[1]
			if ref == "data:," {
				continue
			}
			if !strings.HasPrefix(ref, graphiql.AssetsPath) {
				t.Errorf("%s: loads %s, not from %s", path, ref, graphiql.AssetsPath)
				continue
			}
			a := d.MustDo(t, http.StatusOK, dt.NoAuth(), http.MethodGet, ref, nil, "Accept-Encoding", "identity")
			want, err := os.ReadFile(sourceFile(strings.TrimPrefix(ref, graphiql.AssetsPath)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Body, want) {
				t.Errorf("%s: %d bytes differ from the vendored %d", ref, len(a.Body), len(want))
			}
			ctype := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}[filepath.Ext(ref)]
			if got := a.Header.Get("Content-Type"); got != ctype {
				t.Errorf("%s: Content-Type %q, want %q", ref, got, ctype)
			}
			if a.Header.Get("Content-Encoding") != "" || a.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: headers %v", ref, a.Header)
			}
		}
	}
	d.MustDo(t, http.StatusNotFound, dt.NoAuth(), http.MethodGet, graphiql.AssetsPath+"nope.js", nil)
}

// sourceFile returns the file in this package's directory that an asset
// name is served from: Sluice's own in web/, the vendored ones in assets/.
func sourceFile(name string) string {
	if strings.HasPrefix(name, "sluice-") {
		return filepath.Join("web", name)
	}
	return filepath.Join("assets", name)
}

// TestAssetEncodingAndRevalidation: gzip to clients that accept it, each
// encoding with its own ETag, and 304 for a matching If-None-Match.
func TestAssetEncodingAndRevalidation(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	path := graphiql.AssetsPath + "graphiql.min.js"
	want, err := os.ReadFile("assets/graphiql.min.js")
	if err != nil {
		t.Fatal(err)
	}
	plain := d.MustDo(t, http.StatusOK, dt.NoAuth(), http.MethodGet, path, nil, "Accept-Encoding", "identity")
	gz := d.MustDo(t, http.StatusOK, dt.NoAuth(), http.MethodGet, path, nil, "Accept-Encoding", "br, gzip;q=0.5")
	if gz.Header.Get("Content-Encoding") != "gzip" || !slices.Contains(gz.Header.Values("Vary"), "Accept-Encoding") {
		t.Fatalf("gzip response headers: %v", gz.Header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz.Body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("gunzipped body: %d bytes (%v), want the %d of the file", len(got), err, len(want))
	}
	if len(gz.Body) >= len(want)/2 {
		t.Errorf("gzip body is %d bytes of %d", len(gz.Body), len(want))
	}
	pe, ge := plain.Header.Get("ETag"), gz.Header.Get("ETag")
	if pe == "" || ge == "" || pe == ge {
		t.Fatalf("ETags %q (identity) and %q (gzip): want two different ones", pe, ge)
	}
	r := d.MustDo(t, http.StatusNotModified, dt.NoAuth(), http.MethodGet, path, nil, "Accept-Encoding", "gzip", "If-None-Match", `"x", `+ge)
	if len(r.Body) != 0 || r.Header.Get("ETag") != ge {
		t.Errorf("304: %v %q", r.Header, r.Body)
	}
	// The identity ETag does not validate the gzip representation.
	d.MustDo(t, http.StatusOK, dt.NoAuth(), http.MethodGet, path, nil, "Accept-Encoding", "gzip", "If-None-Match", pe)
	d.MustDo(t, http.StatusOK, dt.NoAuth(), http.MethodGet, path, nil, "Accept-Encoding", "gzip;q=0", "If-None-Match", ge)
}

// TestVendoredAssets checks that the committed files are the ones `make
// graphiql-assets` copied (their SHA-256 in the manifest it wrote) from
// the versions tools/graphiql/package-lock.json pins.
func TestVendoredAssets(t *testing.T) {
	t.Parallel()
	webfilestest.CheckVendored(t, "assets", "../../tools/graphiql/package-lock.json", "graphiql-assets", 5)
}

// TestLandingPageAndRedirect: / is the landing page (behind the API's
// auth, as GraphiQL's pages are), linking to the GraphiQL page of each
// database its reader may read, with the same Content-Security-Policy;
// a browser that opens a GraphQL URL is sent to GraphiQL, which opens on
// a query of the database's first class; a GraphQL client is not.
func TestLandingPageAndRedirect(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "kennel", "type Owner { name: String! pets: [Dog] }\ntype Dog { name: String! owner: Owner age: Int chip: String @private }")
	d.CreateDatabase(t, "empty", "")
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/roles/admin/kennel", `{"user":"rita","role":"read"}`)

	if r := d.Do(t, dt.NoAuth(), http.MethodGet, "/", nil); r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("/ without credentials: %d %v", r.Status, r.Header)
	}
	r := d.MustDo(t, http.StatusOK, dt.Basic("rita", "rita-password"), http.MethodGet, "/", nil, "Accept", "text/html")
	page := string(r.Body)
	if r.Header.Get("Content-Type") != "text/html; charset=utf-8" || r.Header.Get("Content-Security-Policy") != graphiql.ContentSecurityPolicy {
		t.Errorf("/ headers: %v", r.Header)
	}
	for _, want := range []string{`<a href="/api/graphiql/admin/kennel">admin/kennel</a>`, "signed in as <b>rita</b>", graphiql.Docs, `<a href="/console/">`, `<a href="/console/admin/kennel">`, `href="` + graphiql.AssetsPath + `sluice-landing.css"`} {
		if !strings.Contains(page, want) {
			t.Errorf("/ for rita lacks %s:\n%s", want, page)
		}
	}
	for _, not := range []string{"admin/empty", "_system"} {
		if strings.Contains(page, not) {
			t.Errorf("/ for rita shows %s, which she may not read:\n%s", not, page)
		}
	}
	admin := string(d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/", nil).Body)
	for _, want := range []string{`href="/api/graphiql/admin/empty"`, `href="/api/graphiql/_system"`} {
		if !strings.Contains(admin, want) {
			t.Errorf("/ for admin lacks %s", want)
		}
	}
	d.MustDo(t, http.StatusOK, dt.NoAuth(), http.MethodGet, graphiql.AssetsPath+"sluice-landing.css", nil)
	// A user without databases is shown how to make one, at the origin
	// the browser used: https behind a proxy that ended TLS (it said so
	// in X-Forwarded-Proto), so the command does not send the password in
	// the clear. It said http://.
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/users", `{"name":"nodb","organization":"admin","password":"nodb-password"}`)
	host := strings.TrimPrefix(d.URL, "http://")
	for proto, want := range map[string]string{"": "http://" + host + "/api/db/admin/people", "https": "https://" + host + "/api/db/admin/people"} {
		if page := string(d.MustDo(t, http.StatusOK, dt.Basic("nodb", "nodb-password"), http.MethodGet, "/", nil, "X-Forwarded-Proto", proto).Body); !strings.Contains(page, "-X POST "+want) {
			t.Errorf("/ for a user without databases, X-Forwarded-Proto %q: want the command to POST %s:\n%s", proto, want, page)
		}
	}

	// A browser on a GraphQL URL goes to GraphiQL; a GraphQL client
	// (asking for JSON, or sending a query) does not.
	chrome := "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
	for path, page := range map[string]string{"/api/graphql/admin/kennel": "/api/graphiql/admin/kennel", "/api/graphql/_system": "/api/graphiql/_system"} {
		req, _ := http.NewRequest(http.MethodGet, d.URL+path, nil)
		req.Header.Set("Accept", chrome)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page {
			t.Errorf("a browser on %s: %d to %q, want 303 to %s", path, resp.StatusCode, resp.Header.Get("Location"), page)
		}
	}
	if r := d.Do(t, dt.Admin(), http.MethodGet, "/api/graphql/admin/kennel", nil, "Accept", "application/json"); r.Status != http.StatusBadRequest {
		t.Errorf("a GraphQL client without a query: %d %s", r.Status, r.Body)
	}
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/graphql/admin/kennel?query={__typename}", nil, "Accept", chrome)

	// GraphiQL opens on the first class's documents, with the fields the
	// reader may read that hold values.
	sample := func(auth dt.Auth, path string) string {
		body := string(d.MustDo(t, http.StatusOK, auth, http.MethodGet, path, nil).Body)
		_, after, _ := strings.Cut(body, `data-sample="`)
		v, _, _ := strings.Cut(after, `"`)
		return html.UnescapeString(v)
	}
	if got := sample(dt.Basic("rita", "rita-password"), "/api/graphiql/admin/kennel"); !strings.Contains(got, "{\n  Owner(limit: 10) {\n    _id\n    name\n  }\n}\n") {
		t.Errorf("rita's sample query of admin/kennel:\n%s", got)
	}
	if got := sample(dt.Admin(), "/api/graphiql/admin/empty"); !strings.Contains(got, "admin/empty has no classes yet") {
		t.Errorf("the sample query of a database without classes:\n%s", got)
	}
	if got := sample(dt.Admin(), "/api/graphiql/_system"); !strings.Contains(got, "{\n  UserDatabase(limit: 10) {\n    _id\n    name\n") {
		t.Errorf("the sample query of _system:\n%s", got)
	}
}

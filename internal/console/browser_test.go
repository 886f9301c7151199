package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// TestBrowserConsole runs test/browser/console.mjs: Debian's Chromium,
// headless, driven by puppeteer-core, goes through every view of the
// console on daemon A while the script writes through daemon B on the same
// Postgres, checks each view with axe-core, and fails on any request
// outside A's origin (see the script for the steps, and
// dt.RunBrowserScript for what it needs). SLUICE_CONSOLE_SCREENSHOTS names
// a directory to keep the screenshots of the views in (make
// console-screenshots: docs/console).
func TestBrowserConsole(t *testing.T) {
	dt.SkipWithoutBrowser(t)
	t.Parallel()
	// The webhook's receiver: it fails the first two requests, so the
	// console has failed attempts to show.
	var requests atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) <= 2 {
			http.Error(w, "not yet", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	loopback := func(c *config.Config) { c.WebhookAllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} }
	// A with fewer statements a request than the console's 20 counts
	// a request: it splits the requests A refuses.
	fewStatements := func(c *config.Config) { c.GraphQLMaxStatements = 8 }
	a := dt.Start(t, loopback, fewStatements)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL), loopback)

	a.CreateDatabase(t, "shop", "type Product { name: String! price: Float! stock: Int @index secret: String @private }")
	var docs []string
	for i := 1; i <= 120; i++ {
		docs = append(docs, fmt.Sprintf(`{"@type":"Product","@id":"p%03d","name":"Product %d","price":%d,"stock":%d,"secret":"secret-%d"}`, i, i, i, i%7, i))
	}
	a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/shop?author=ann&message=catalog", "["+strings.Join(docs, ",")+"]")
	a.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/roles/admin/shop", `{"user":"rita","role":"read"}`)
	// A database of 30 classes: the console counts them in several
	// requests, each within graphql_max_statements.
	var many []string
	for i := range 30 {
		many = append(many, fmt.Sprintf("type C%02d { n: Int }", i))
	}
	a.CreateDatabase(t, "many", strings.Join(many, "\n"))
	a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/many", `{"@type":"C29","@id":"last","n":1}`)
	a.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/webhooks/admin/shop",
		`{"url":"`+receiver.URL+`/hook","description":"receiver","classes":["Product"]}`)
	// A database whose first commit retention pruned: Note/kept, made
	// there and updated since, has a history that says so.
	a.CreateDatabase(t, "aged", "type Note { text: String! }")
	a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/aged", `{"@type":"Note","@id":"kept","text":"first"}`)
	a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/document/admin/aged?message=second+words", `{"@type":"Note","@id":"Note/kept","text":"second"}`)
	pruneFirstCommit(t, a, "aged")

	dt.RunBrowserScript(t, "console.mjs", a.URL, b.URL, dt.AdminPassword, "rita", "rita-password", os.Getenv("SLUICE_CONSOLE_SCREENSHOTS"))
}

// pruneFirstCommit makes the first commit of database admin/db on d older
// than an hour and prunes the log with a retention of an hour, which
// removes that commit alone (the others were just made).
func pruneFirstCommit(t *testing.T, d *dt.Daemon, db string) {
	t.Helper()
	ctx := context.Background()
	pg, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	if _, err := pg.Exec(ctx, `UPDATE sluice.commits SET committed_at = now() - interval '2 hours'
		WHERE seq = 1 AND db_id = (SELECT id FROM sluice.databases WHERE org = 'admin' AND name = $1)`, db); err != nil {
		t.Fatal(err)
	}
	store, err := postgres.Open(ctx, d.DatabaseURL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Prune(ctx, time.Now(), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserConsoleNames runs test/browser/console-names.mjs: the
// console on a class whose fields are named as properties every
// JavaScript object has (constructor, toString, valueOf, hasOwnProperty),
// whose values must never be read from Object.prototype (edited,
// inserted and shown in the history as stored), and on a JSON value with
// a key __proto__ (no field can be named so: a field's name starts with a
// letter) or with null members (saved as typed, also over a conflict,
// where a merge patch would remove them; refused where the document
// holds a whole number JavaScript cannot carry); an Int typed as 1e400, refused
// next to its field, not sent as null (removed), and in the filter
// builder (null there is no condition); a commit in the URL that is no
// commit id (?commit=abc), named as such; a token holding a character a header cannot
// carry; Back to the console after leaving it, which asks to sign in
// again; the console opened at an address carrying credentials.
func TestBrowserConsoleNames(t *testing.T) {
	dt.SkipWithoutBrowser(t)
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "names", "type Thing { n: String constructor: String toString: String valueOf: Int hasOwnProperty: [String] meta: JSON }")
	a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/names?author=ann&message=things",
		`[{"@type":"Thing","@id":"Thing/a","n":"one"},`+
			`{"@type":"Thing","@id":"Thing/b","n":"one","constructor":"c","toString":"t","valueOf":5,"hasOwnProperty":["h"],"meta":{"__proto__":{"x":1},"k":1}},`+
			`{"@type":"Thing","@id":"Thing/big","meta":{"big":12345678901234567890,"k":1}}]`)
	dt.RunBrowserScript(t, "console-names.mjs", a.URL, dt.AdminPassword)
}

// TestBrowserConsoleStreamBounds runs test/browser/console-stream.mjs:
// the Stream view while a writer makes large commits keeps at most 20
// changes of each commit, and none of their documents, and a commit of
// more documents than one event may carry (graphql_max_result_rows) is
// said to be too large to show there, while the stream goes on.
func TestBrowserConsoleStreamBounds(t *testing.T) {
	dt.SkipWithoutBrowser(t)
	t.Parallel()
	const maxRows = 500
	a := dt.Start(t, func(c *config.Config) { c.GraphQLMaxResultRows = maxRows })
	a.CreateDatabase(t, "big", "type Note { n: Int body: String }")
	dt.RunBrowserScript(t, "console-stream.mjs", a.URL, dt.AdminPassword, fmt.Sprint(maxRows))
}

// TestBrowserConsoleHostile runs test/browser/console-hostile.mjs: what
// a writer of a database (and its admin, for its label, comment, schema
// and webhooks) puts in it, markup, script and javascript: URLs in every
// place the console and GraphiQL show, is shown to the super user as
// text, runs nothing and makes no element, in every view, the Stream
// view included (a commit made while it is open); a user of another
// organization sees nothing of the database; and a page of another site
// cannot frame the console, GraphiQL or the landing page.
func TestBrowserConsoleHostile(t *testing.T) {
	dt.SkipWithoutBrowser(t)
	t.Parallel()
	d := dt.Start(t)
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/db/admin/hostile",
		`{"label":"<img src=x onerror=alert(1)>","comment":"</script><script>alert(2)</script>",`+
			`"schema":"\"\"\"<img src=x onerror=alert(3)> [a link](javascript:alert(4))\"\"\"\ntype Note { \"\"\"<b onmouseover=alert(16)>text</b>\"\"\" text: String meta: JSON }"}`)
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/users", `{"name":"wendy","organization":"admin","password":"wendy-password"}`)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/roles/admin/hostile", `{"user":"wendy","role":"write"}`)
	// otto, of another organization, has no role on it.
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/organizations", `{"name":"elsewhere"}`)
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/users", `{"name":"otto","organization":"elsewhere","password":"otto-password"}`)
	d.MustDo(t, http.StatusOK, dt.Basic("wendy", "wendy-password"), http.MethodPost,
		"/api/document/admin/hostile?author=%3Cimg%20src%3Dx%20onerror%3Dalert(5)%3E&message=%3Cscript%3Ealert(10)%3C%2Fscript%3E",
		`{"@type":"Note","@id":"Note/<img/src=x/onerror=alert(6)>","text":"<img src=x onerror=alert(7)>","meta":{"<img src=x onerror=alert(8)>":"javascript:alert(9)"}}`)
	// A second version of it whose message starts with a right-to-left
	// override and holds, reversed, what the writer wants read where the
	// document's history names the user who wrote it: "· admin".
	spoof := []rune("fixed typo” · admin")
	slices.Reverse(spoof)
	d.MustDo(t, http.StatusOK, dt.Basic("wendy", "wendy-password"), http.MethodPut,
		"/api/document/admin/hostile?message="+url.QueryEscape("\u202e"+string(spoof)),
		`{"@type":"Note","@id":"Note/<img/src=x/onerror=alert(6)>","text":"<img src=x onerror=alert(7)>","meta":{"<img src=x onerror=alert(8)>":"javascript:alert(9)"}}`)
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/webhooks/admin/hostile",
		`{"url":"https://hooks.example.com/sluice","description":"<img src=x onerror=alert(11)>"}`)
	// A page of another site (localhost, where the daemon is at
	// 127.0.0.1) that frames the console, GraphiQL, the landing page and
	// /api/ok.
	frames := ""
	for _, p := range []string{"/console/", "/api/graphiql/admin/hostile", "/", "/api/ok"} {
		frames += `<iframe src="` + d.URL + p + `"></iframe>`
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>another site</title>" + frames + "\n"))
	}))
	defer page.Close()
	dt.RunBrowserScript(t, "console-hostile.mjs", d.URL, dt.AdminPassword, "wendy", "wendy-password", "hostile",
		strings.Replace(page.URL, "127.0.0.1", "localhost", 1))
}

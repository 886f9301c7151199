package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestOtherOrganizationsDatabasesDoNotExist: a database of an organization
// the caller does not belong to answers exactly as one that does not exist,
// on every route; _system and the caller's own organization's databases
// keep their 403.
func TestOtherOrganizationsDatabasesDoNotExist(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/organizations", `{"name":"acme"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/acme/secret", `{"schema":"type Note { text: String }"}`)
	d.CreateDatabase(t, "own", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"otto","organization":"admin","password":"otto-password"}`)
	otto := dt.Basic("otto", "otto-password")
	sub := url.QueryEscape(`subscription { Note_added { text } }`)
	q := url.QueryEscape(`{ Note { text } }`)
	routes := []struct {
		method, path, body string
		header             []string
	}{
		{"GET", "/api/db/%s", "", nil},
		{"DELETE", "/api/db/%s", "", nil},
		{"GET", "/api/schema/%s", "", nil},
		{"PUT", "/api/schema/%s", "type Note { text: String }", nil},
		{"GET", "/api/document/%s?type=Note", "", nil},
		{"POST", "/api/document/%s", `{"@type":"Note","text":"x"}`, nil},
		{"DELETE", "/api/document/%s?id=Note/x", "", nil},
		{"GET", "/api/log/%s", "", nil},
		{"GET", "/api/changes/%s?after=0", "", nil},
		{"GET", "/api/asyncapi/%s", "", nil},
		{"PUT", "/api/roles/%s", `{"user":"otto","role":"read"}`, nil},
		{"GET", "/api/subscribe/%s/Note", "", nil},
		{"GET", "/api/graphql/%s?query=" + q, "", nil},
		{"GET", "/api/graphql/%s?query=" + sub, "", []string{"Accept", "text/event-stream"}},
		{"GET", "/api/graphql/%s?query=" + sub, "", []string{"Accept", "application/x-ndjson"}},
	}
	for _, r := range routes {
		path := func(db string) string { return strings.Replace(r.path, "%s", db, 1) }
		var body any
		if r.body != "" {
			body = r.body
		}
		exists := d.Do(t, otto, r.method, path("acme/secret"), body, r.header...)
		missing := d.Do(t, otto, r.method, path("acme/nothing"), body, r.header...)
		// The messages name the database asked for; with that name
		// swapped, the answers are identical.
		same := strings.ReplaceAll(string(missing.Body), "acme/nothing", "acme/secret")
		if exists.Status != missing.Status || string(exists.Body) != same || exists.Header.Get("Content-Type") != missing.Header.Get("Content-Type") {
			t.Errorf("%s %s: an existing database of another organization answers\n %d %s\nand a missing one\n %d %s",
				r.method, r.path, exists.Status, exists.Body, missing.Status, missing.Body)
		}
		if exists.Status != 404 {
			t.Errorf("%s %s: status %d, want 404", r.method, r.path, exists.Status)
		}
		if own := d.Do(t, otto, r.method, path("admin/own"), body, r.header...); own.Status != 403 {
			t.Errorf("%s %s on the own organization's database: %d %s, want 403", r.method, r.path, own.Status, own.Body)
		}
	}
	if r := d.Do(t, otto, "GET", "/api/document/_system/_system", nil); r.Status != 403 {
		t.Errorf("_system: %d %s, want 403", r.Status, r.Body)
	}
}

// TestHistoryAfterForcedSchemaChanges: history never shows a reader a
// field it cannot read now or that was protected when the commit was
// made; fields the current schema no longer knows are shown to admins
// only. Checked through /api/changes, _ChangeSet(commit:), a resumed
// GraphQL subscription and a resumed REST change stream.
func TestHistoryAfterForcedSchemaChanges(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "hr", `type Person { name: String ssn: String @private } type Badge { code: String }`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/hr", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/hr", `{"@type":"Badge","@id":"b0","code":"B-0"}`)                                                           // commit 1
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/hr", `[{"@type":"Person","@id":"ann","name":"Ann","ssn":"111"},{"@type":"Badge","@id":"b1","code":"B-1"}]`) // commit 2

	// The ssn is made public: the value written while it was private
	// stays hidden from rita in history; the value written after shows.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/hr?force=true", `type Person { name: String ssn: String } type Badge { code: String }`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/hr", `{"@type":"Person","@id":"Person/ann","name":"Ann","ssn":"222"}`) // commit 3
	// Commit 2 was made while ssn was private: its 111 stays hidden.
	// Commit 3 was made while it was public: its before image (111, which
	// rita could read then as the current document) and after (222) show.
	commit2 := string(d.MustDo(t, 200, rita, "GET", "/api/changes/admin/hr?after=1&limit=1", nil).Body)
	if strings.Contains(commit2, `"111"`) || !strings.Contains(commit2, `"Ann"`) {
		t.Errorf("rita's commit 2 after ssn became public: %s\nwant 111 (written while private) hidden", commit2)
	}
	if commit3 := string(d.MustDo(t, 200, rita, "GET", "/api/changes/admin/hr?after=2", nil).Body); !strings.Contains(commit3, `"111"`) || !strings.Contains(commit3, `"222"`) {
		t.Errorf("rita's commit 3: %s\nwant both ssn values (it was public then)", commit3)
	}
	q := url.QueryEscape(`{ _ChangeSet(commit: "2") { Person_added { _id name ssn } } }`)
	if r := string(d.MustDo(t, 200, rita, "GET", "/api/graphql/admin/hr?query="+q, nil).Body); strings.Contains(r, `"111"`) || !strings.Contains(r, "Ann") {
		t.Errorf("_ChangeSet(commit: 2) for rita: %s", r)
	}
	epoch := epochOf(t, d)
	s := d.MustOpenStream(t, rita, dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/hr",
		Body:   `{"query":"subscription { _ChangeSet { Person_added { _id ssn } Person_updated { _id ssn } } }","extensions":{"lastEventId":"` + epoch + `-1-0"}}`,
		Header: []string{"Accept", "text/event-stream"}})
	s.Next()
	if f := s.Event().String(); strings.Contains(f, `"111"`) || !strings.Contains(f, "Person/ann") {
		t.Errorf("resumed change set, commit 2: %s", f)
	}
	if f := s.Event().String(); !strings.Contains(f, `"222"`) {
		t.Errorf("resumed change set, commit 3: %s", f)
	}
	rs := d.MustOpenStream(t, rita, dt.StreamRequest{Path: "/api/subscribe/admin/hr/Person", Header: []string{"Last-Event-ID", epoch + "-1-0"}})
	rs.Next()
	if f := rs.Event().String(); strings.Contains(f, `"111"`) || !strings.Contains(f, "Person/ann") {
		t.Errorf("resumed REST stream, commit 2: %s", f)
	}

	// Dropping ssn and Badge by force: rita sees neither in history; the
	// database admin still does.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/hr?force=true", `type Person { name: String }`)
	changes := string(d.MustDo(t, 200, rita, "GET", "/api/changes/admin/hr?after=0", nil).Body)
	// The values are looked for as JSON strings: a commit's timestamp may
	// hold the digits 222.
	for _, secret := range []string{`"111"`, `"222"`, `"B-0"`, `"B-1"`} {
		if strings.Contains(changes, secret) {
			t.Errorf("rita's history after the forced drop shows %s: %s", secret, changes)
		}
	}
	if !strings.Contains(changes, `"Badge/b1"`) || !strings.Contains(changes, `"Ann"`) {
		t.Errorf("rita's history lost what she may see: %s", changes)
	}
	all := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/hr?after=0", nil).Body)
	for _, v := range []string{`"111"`, `"222"`, `"B-0"`, `"B-1"`} {
		if !strings.Contains(all, v) {
			t.Errorf("the admin's history lacks %s: %s", v, all)
		}
	}
}

// epochOf returns the epoch of admin/hr from its first change's position.
func epochOf(t *testing.T, d *dt.Daemon) string {
	t.Helper()
	var h struct {
		Commits []struct {
			Position string `json:"position"`
		} `json:"commits"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/hr?after=0&limit=1", nil).Body, &h); err != nil || len(h.Commits) == 0 {
		t.Fatalf("no first commit: %v", err)
	}
	return strings.Split(h.Commits[0].Position, "-")[0]
}

// TestOneBcryptPerCredential: concurrent requests with one new credential
// run one password hash; later ones run none, until the password changes.
func TestOneBcryptPerCredential(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "b", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"bea","organization":"admin","password":"bea-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/b", `{"user":"bea","role":"write"}`)
	bea := dt.Basic("bea", "bea-password")
	checks := func() float64 {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_auth_password_checks_total")
	}
	burst := func() {
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if r := d.Do(t, bea, "GET", "/api/document/admin/b?type=Note", nil); r.Status != 200 {
					t.Errorf("status %d: %s", r.Status, r.Body)
				}
			})
		}
		wg.Wait()
	}
	n0 := checks()
	burst()
	if n := checks() - n0; n != 1 {
		t.Fatalf("50 concurrent requests with one new credential ran %v password hashes, want 1", n)
	}
	burst()
	if n := checks() - n0; n != 1 {
		t.Fatalf("50 more requests ran %v more password hashes, want 0", n-1)
	}
	d.MustDo(t, 200, bea, "PUT", "/api/users/bea/password", `{"password":"bea-new-password"}`)
	d.MustDo(t, 401, bea, "GET", "/api/document/admin/b?type=Note", nil)
	d.MustDo(t, 200, dt.Basic("bea", "bea-new-password"), "GET", "/api/document/admin/b?type=Note", nil)
}

// TestCORS: an allowed origin gets the CORS headers on every answer,
// errors included; any other origin never gets credentials allowed, and
// its reads with Basic credentials are refused (see
// TestCrossSiteReadsWithBasicRefused).
func TestCORS(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, dt.WithCORS("https://app.example"))
	d.CreateDatabase(t, "c", "type Note { text: String }")
	for _, c := range []struct {
		name   string
		auth   dt.Auth
		path   string
		status int
		// cross is the status from another origin.
		cross int
	}{
		{"401", dt.NoAuth(), "/api/document/admin/c", 401, 401},
		{"404", dt.Admin(), "/api/document/admin/nothing", 404, 403},
		{"200", dt.Admin(), "/api/document/admin/c", 200, 403},
		{"401 on GraphQL", dt.NoAuth(), "/api/graphql/admin/c?query=%7B__typename%7D", 401, 401},
		{"401 on a stream", dt.NoAuth(), "/api/subscribe/admin/c/Note", 401, 401},
	} {
		r := d.Do(t, c.auth, "GET", c.path, nil, "Origin", "https://app.example")
		if r.Status != c.status || r.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			r.Header.Get("Access-Control-Allow-Credentials") != "true" || !strings.Contains(r.Header.Get("Vary"), "Origin") ||
			!strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
			t.Errorf("%s: %d %v", c.name, r.Status, r.Header)
		}
		r = d.Do(t, c.auth, "GET", c.path, nil, "Origin", "https://evil.example")
		if r.Status != c.cross || r.Header.Get("Access-Control-Allow-Credentials") != "" || r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s from another origin: %d %v", c.name, r.Status, r.Header)
		}
	}
	pre := d.Do(t, dt.NoAuth(), "OPTIONS", "/api/graphql/admin/c", nil, "Origin", "https://app.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	if pre.Status != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Headers") != "authorization, content-type" ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight: %d %v", pre.Status, pre.Header)
	}
	// Conditional and idempotent writes: PATCH and their headers are
	// allowed (also without Access-Control-Request-Headers), and the
	// headers their answers carry are exposed.
	pre = d.Do(t, dt.NoAuth(), "OPTIONS", "/api/document/admin/c", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "PATCH")
	for _, want := range []string{"If-Match", "If-None-Match", "Idempotency-Key"} {
		if !strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), want) || !strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), "PATCH") {
			t.Errorf("PATCH preflight: %d %v", pre.Status, pre.Header)
		}
	}
	r := d.Do(t, dt.Admin(), "GET", "/api/document/admin/c", nil, "Origin", "https://app.example")
	for _, want := range []string{"ETag", "Sluice-Position", "Idempotent-Replayed"} {
		if !strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), want) {
			t.Errorf("exposed headers %q lack %s", r.Header.Get("Access-Control-Expose-Headers"), want)
		}
	}
	pre = d.Do(t, dt.NoAuth(), "OPTIONS", "/api/graphql/admin/c", nil, "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	if pre.Header.Get("Access-Control-Allow-Methods") != "" || pre.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("preflight from another origin: %d %v", pre.Status, pre.Header)
	}
}

// TestOneOriginPolicy: an origin listed with its scheme's default port is
// the page browsers name without it, for CORS, the cross-site check and
// WebSocket upgrades alike; a page of another scheme is refused by all
// three.
func TestOneOriginPolicy(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, dt.WithCORS("https://app.example:443"))
	d.CreateDatabase(t, "o", "type Note { text: String }")
	for _, c := range []struct {
		from string
		ok   bool
	}{{"https://app.example", true}, {"http://app.example", false}} {
		r := d.Do(t, dt.Admin(), "GET", "/api/document/admin/o", nil, "Origin", c.from)
		if got := r.Header.Get("Access-Control-Allow-Origin") == c.from && r.Header.Get("Access-Control-Allow-Credentials") == "true"; got != c.ok {
			t.Errorf("CORS from %s: %v", c.from, r.Header)
		}
		want := 403
		if c.ok {
			want = 200
		}
		if r := d.Do(t, dt.Admin(), "POST", "/api/document/admin/o", `{"@type":"Note","text":"x"}`, "Origin", c.from, "Sec-Fetch-Site", "cross-site"); r.Status != want {
			t.Errorf("a write from a page of %s: %d %s, want %d", c.from, r.Status, r.Body, want)
		}
		want = 403
		if c.ok {
			want = 101
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+"/api/graphql/admin/o",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Origin": {c.from}}})
		cancel()
		if resp == nil || resp.StatusCode != want {
			t.Errorf("a WebSocket from a page of %s: %v %v, want %d", c.from, resp, err, want)
		}
		if ws != nil {
			_ = ws.CloseNow()
		}
	}
}

// TestSchemaShowsWhatARoleMayRead: GET /api/schema shows a reader and a
// writer the schema without the fields their role may not read (names,
// types, descriptions and comments), as their GraphQL schema does; the
// admin gets the source as it was put.
func TestSchemaShowsWhatARoleMayRead(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const sdl = "# ssn: kept for the auditors\ntype Person {\n  name: String\n  \"tax number\"\n  ssn: String @private\n  salary: Int @protected(role: \"write\")\n}\n"
	d.CreateDatabase(t, "staff", sdl)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"will","organization":"admin","password":"will-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/staff", `{"user":"rita","role":"read"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/staff", `{"user":"will","role":"write"}`)

	if got := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/schema/admin/staff", nil).Body); got != sdl {
		t.Errorf("admin's schema:\n%s\nwant the source:\n%s", got, sdl)
	}
	for _, c := range []struct {
		user       string
		auth       dt.Auth
		show, hide []string
	}{
		{"rita", dt.Basic("rita", "rita-password"), []string{"name: String"}, []string{"ssn", "salary", "tax number", "auditors"}},
		{"will", dt.Basic("will", "will-password"), []string{"name: String", "salary: Int"}, []string{"ssn", "tax number", "auditors"}},
	} {
		got := string(d.MustDo(t, 200, c.auth, "GET", "/api/schema/admin/staff", nil).Body)
		for _, s := range c.show {
			if !strings.Contains(got, s) {
				t.Errorf("%s's schema lacks %q:\n%s", c.user, s, got)
			}
		}
		for _, s := range c.hide {
			if strings.Contains(got, s) {
				t.Errorf("%s's schema shows %q:\n%s", c.user, s, got)
			}
		}
	}
}

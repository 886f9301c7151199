package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// The access tests run two daemons on one Postgres. Streams of every kind
// are opened on both; the access change is made on the first. A stream the
// change affects must have received the event before, end with an explicit
// error after, and never receive the commit made right after the change
// answered, on either replica.

const notesSDL = `type Note { text: String! secret: String @private }`

// accessFixture is organization acme with database acme/notes, its users
// ulla (whose access the tests change) and vera (same role, unaffected
// unless the database or organization goes), and two daemons.
type accessFixture struct {
	a, b  *dt.Daemon
	ulla  dt.Auth // Basic, or Bearer with a token
	vera  dt.Auth
	token int64 // ulla's token id when ulla authenticates with one
	n     int   // notes written
}

func newAccessFixture(t *testing.T, role string, withToken bool) *accessFixture {
	t.Helper()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/organizations", `{"name":"acme"}`)
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/db/acme/notes", mustJSON(t, map[string]string{"schema": notesSDL}))
	for _, u := range []string{"ulla", "vera"} {
		a.MustDo(t, 201, dt.Admin(), "POST", "/api/users", fmt.Sprintf(`{"name":%q,"organization":"acme","password":"%s-password"}`, u, u))
		a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/acme/notes", fmt.Sprintf(`{"user":%q,"role":%q}`, u, role))
	}
	f := &accessFixture{a: a, b: b, ulla: dt.Basic("ulla", "ulla-password"), vera: dt.Basic("vera", "vera-password")}
	if withToken {
		var tok struct {
			ID    int64  `json:"id"`
			Token string `json:"token"`
		}
		if err := json.Unmarshal(a.MustDo(t, 201, f.ulla, "POST", "/api/tokens", `{"name":"stream"}`).Body, &tok); err != nil {
			t.Fatal(err)
		}
		f.ulla, f.token = dt.Bearer(tok.Token), tok.ID
	}
	return f
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// write commits one note through daemon a as the super user and returns
// its id.
func (f *accessFixture) write(t *testing.T) string {
	t.Helper()
	f.n++
	id := fmt.Sprintf("Note/n%d", f.n)
	f.a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/acme/notes", fmt.Sprintf(`{"@type":"Note","@id":"n%d","text":"note %d","secret":"s%d"}`, f.n, f.n, f.n))
	return id
}

// kindStream is one open stream and how to read it.
type kindStream struct {
	name string
	s    *dt.Stream
	kind string // "sse", "ndjson" or "rest"
}

const noteSub = `{"query":"subscription { Note_added { _id text } }"}`

// openStreams opens, with auth, a GraphQL SSE stream, a GraphQL NDJSON
// stream and a REST change stream on daemon b, and a REST change stream
// on daemon a, and waits until each is registered.
func (f *accessFixture) openStreams(t *testing.T, who string, auth dt.Auth) []kindStream {
	t.Helper()
	gql := dt.StreamRequest{Method: "POST", Path: "/api/graphql/acme/notes", Body: noteSub}
	sse, nd := gql, gql
	sse.Header = []string{"Accept", "text/event-stream"}
	nd.Header = []string{"Accept", "application/x-ndjson"}
	rest := dt.StreamRequest{Path: "/api/subscribe/acme/notes/Note"}
	out := []kindStream{
		{who + " graphql-sse on b", f.b.MustOpenStream(t, auth, sse), "sse"},
		{who + " graphql-ndjson on b", f.b.MustOpenStream(t, auth, nd), "ndjson"},
		{who + " rest on b", f.b.MustOpenStream(t, auth, rest), "rest"},
		{who + " rest on a", f.a.MustOpenStream(t, auth, rest), "rest"},
	}
	for _, k := range out {
		first := k.s.Next().String()
		if k.kind == "ndjson" && first != "null" || k.kind != "ndjson" && !strings.HasPrefix(first, ": connected") {
			t.Fatalf("%s: first frame %q", k.name, first)
		}
	}
	return out
}

// expectEvent reads the next event of each stream and checks it is the
// note id's.
func expectEvent(t *testing.T, streams []kindStream, id string) {
	t.Helper()
	for _, k := range streams {
		f := k.s.Event()
		if !strings.Contains(f.String(), `"`+id+`"`) {
			t.Fatalf("%s: event %q, want one for %s", k.name, f, id)
		}
	}
}

// expectEnd waits for each stream to end and checks that it ended with the
// error code wantGraphQL (GraphQL) or wantREST (REST @type) and sent
// nothing about the note notID. It returns the longest time from since to
// a stream's end.
func expectEnd(t *testing.T, streams []kindStream, notID, wantGraphQL, wantREST string, since time.Time) time.Duration {
	t.Helper()
	var slowest time.Duration
	for _, k := range streams {
		frames := k.s.Ended()
		slowest = max(slowest, time.Since(since))
		all := ""
		for _, f := range frames {
			all += f.String() + "\n"
		}
		if notID != "" && strings.Contains(all, notID) {
			t.Errorf("%s: received %s, committed after the access change answered:\n%s", k.name, notID, all)
		}
		var errFrame, last string
		switch k.kind {
		case "sse":
			if len(frames) < 2 || frames[len(frames)-1].Field("event") != "complete" {
				t.Errorf("%s: want an error next and complete, got:\n%s", k.name, all)
				continue
			}
			errFrame, last = frames[len(frames)-2].Field("data"), wantGraphQL
		case "ndjson":
			if len(frames) < 2 || frames[len(frames)-1].String() != "" {
				t.Errorf("%s: want an error line and an empty line, got:\n%s", k.name, all)
				continue
			}
			errFrame, last = frames[len(frames)-2].String(), wantGraphQL
		case "rest":
			if len(frames) < 1 || frames[len(frames)-1].Field("event") != "error" {
				t.Errorf("%s: want event: error, got:\n%s", k.name, all)
				continue
			}
			errFrame, last = frames[len(frames)-1].Field("data"), "api:"+wantREST
		}
		if !strings.Contains(errFrame, `"`+last+`"`) {
			t.Errorf("%s: error %s, want %s", k.name, errFrame, last)
		}
	}
	return slowest
}

// TestAccessChangesEndStreams makes each kind of access change and checks
// every kind of stream on both replicas, and plain requests on the other
// replica.
func TestAccessChangesEndStreams(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		role      string // ulla's and vera's role
		token     bool   // ulla streams with a token
		change    func(t *testing.T, f *accessFixture)
		graphql   string // error code of the streams that end
		rest      string
		veraEnds  bool // the change ends vera's streams too
		afterAuth dt.Auth
		after     int // status of ulla's next request on daemon b
	}{
		{name: "token revoked", role: "read", token: true, graphql: "UNAUTHENTICATED", rest: "NotAuthenticated", after: 401,
			change: func(t *testing.T, f *accessFixture) {
				f.a.MustDo(t, 200, dt.Basic("ulla", "ulla-password"), "DELETE", fmt.Sprintf("/api/tokens/%d", f.token), nil)
			}},
		{name: "password changed", role: "read", graphql: "UNAUTHENTICATED", rest: "NotAuthenticated", after: 401,
			change: func(t *testing.T, f *accessFixture) {
				f.a.MustDo(t, 200, dt.Admin(), "PUT", "/api/users/ulla/password", `{"password":"another-password"}`)
			}},
		{name: "user deleted", role: "read", graphql: "UNAUTHENTICATED", rest: "NotAuthenticated", after: 401,
			change: func(t *testing.T, f *accessFixture) {
				f.a.MustDo(t, 200, dt.Admin(), "DELETE", "/api/users/ulla", nil)
			}},
		{name: "role revoked", role: "read", graphql: "FORBIDDEN", rest: "Forbidden", after: 403,
			change: func(t *testing.T, f *accessFixture) {
				f.a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/acme/notes", `{"user":"ulla","role":"none"}`)
			}},
		{name: "role narrowed", role: "admin", graphql: "FORBIDDEN", rest: "Forbidden", after: 200,
			change: func(t *testing.T, f *accessFixture) {
				f.a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/acme/notes", `{"user":"ulla","role":"read"}`)
			}},
		{name: "database deleted", role: "read", graphql: "NOT_FOUND", rest: "NotFound", veraEnds: true, after: 404,
			change: func(t *testing.T, f *accessFixture) {
				f.a.MustDo(t, 200, dt.Admin(), "DELETE", "/api/db/acme/notes", nil)
			}},
		{name: "organization deleted", role: "read", graphql: "NOT_FOUND", rest: "NotFound", veraEnds: true, after: 401,
			change: func(t *testing.T, f *accessFixture) {
				f.a.MustDo(t, 200, dt.Admin(), "DELETE", "/api/organizations/acme", nil)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newAccessFixture(t, c.role, c.token)
			ulla := f.openStreams(t, "ulla", f.ulla)
			vera := f.openStreams(t, "vera", f.vera)
			before := f.write(t)
			expectEvent(t, ulla, before)
			expectEvent(t, vera, before)

			c.change(t, f)
			answered := time.Now()
			// Daemon a, which made the change, refuses ulla's credential
			// at once.
			if r := f.a.Do(t, f.ulla, "GET", "/api/document/acme/notes?id="+url.QueryEscape(before), nil); c.after != 200 && r.Status != c.after {
				t.Errorf("ulla's next request on daemon a: %d %s, want %d", r.Status, r.Body, c.after)
			}
			later := "" // skipped by ulla's streams on both replicas
			if !c.veraEnds {
				later = f.write(t)
			}
			slowest := expectEnd(t, ulla, later, c.graphql, c.rest, answered)
			// Daemon b has read the change (its streams ended): its next
			// request with ulla's credential sees it too.
			if c.after == 200 {
				// Narrowed, not revoked: the new role (the secret field is
				// gone).
				r := f.b.MustDo(t, 200, f.ulla, "GET", "/api/document/acme/notes?id="+url.QueryEscape(before), nil)
				if strings.Contains(string(r.Body), "secret") {
					t.Errorf("after narrowing, daemon b still shows the secret: %s", r.Body)
				}
			} else if r := f.b.Do(t, f.ulla, "GET", "/api/document/acme/notes?id="+url.QueryEscape(before), nil); r.Status != c.after {
				t.Errorf("ulla's next request on daemon b: %d %s, want %d", r.Status, r.Body, c.after)
			}

			if c.veraEnds {
				expectEnd(t, vera, "", c.graphql, c.rest, answered)
			} else {
				// Vera shares ulla's GraphQL group (same query and role):
				// her streams go on and get the later note.
				expectEvent(t, vera, later)
			}
			t.Logf("streams ended %v after the change answered", slowest)
		})
	}
}

// TestAccessChangeEndsIdleStreams: with nothing committed after the
// change, the streams still end (the tailer reads the access log on every
// poll and notification).
func TestAccessChangeEndsIdleStreams(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t, "read", false)
	ulla := f.openStreams(t, "ulla", f.ulla)
	id := f.write(t)
	expectEvent(t, ulla, id)
	f.a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/acme/notes", `{"user":"ulla","role":"none"}`)
	answered := time.Now()
	slowest := expectEnd(t, ulla, "", "FORBIDDEN", "Forbidden", answered)
	t.Logf("idle streams ended %v after the change answered", slowest)
}

// TestSystemSubscriptionRevoked: a _system subscription of the super user
// opened with a token ends when the token is revoked.
func TestSystemSubscriptionRevoked(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	var tok struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(a.MustDo(t, 201, dt.Admin(), "POST", "/api/tokens", `{"name":"sys"}`).Body, &tok); err != nil {
		t.Fatal(err)
	}
	s := b.MustOpenStream(t, dt.Bearer(tok.Token), dt.StreamRequest{Method: "POST", Path: "/api/graphql/_system",
		Body: `{"query":"subscription { UserDatabase_added { _id } }"}`, Header: []string{"Accept", "text/event-stream"}})
	s.Next()
	a.CreateDatabase(t, "first", "type T { x: Int }")
	if f := s.Event(); !strings.Contains(f.String(), "UserDatabase/admin/first") {
		t.Fatalf("event %q", f)
	}
	a.MustDo(t, 200, dt.Admin(), "DELETE", fmt.Sprintf("/api/tokens/%d", tok.ID), nil)
	a.CreateDatabase(t, "second", "type T { x: Int }")
	expectEnd(t, []kindStream{{"_system graphql-sse on b", s, "sse"}}, "UserDatabase/admin/second", "UNAUTHENTICATED", "", time.Now())
}

// TestResumedStreamKeepsItsOpeningRole: a REST stream resumed from a
// position reads with a reader of its own, which re-reads its user's
// role when a commit shows a newer schema. It never shows more than the
// role the stream opened with: ulla, widened to admin while her stream
// was open (nothing ends for that), then narrowed back to read after a
// schema change had refreshed the reader, went on receiving private
// fields (the guard saw a narrowing to the role the stream opened with,
// no change).
func TestResumedStreamKeepsItsOpeningRole(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t, "read", false)
	first := answerOf(t, f.a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/acme/notes", `{"@type":"Note","@id":"n0","text":"note 0","secret":"s0"}`))
	s := f.a.MustOpenStream(t, f.ulla, dt.StreamRequest{Path: "/api/subscribe/acme/notes/Note", Header: []string{"Last-Event-ID", first.Position}})
	f.a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/acme/notes", `{"user":"ulla","role":"admin"}`)
	f.a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/acme/notes", `type Note { text: String! secret: String @private extra: String }`)
	event := func(id string) string {
		t.Helper()
		for {
			e := s.Event()
			if data := e.Field("data"); strings.Contains(data, id) {
				return data
			}
		}
	}
	f.a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/acme/notes", `{"@type":"Note","@id":"n1","text":"note 1","secret":"s1"}`)
	if data := event(`"Note/n1"`); strings.Contains(data, `"secret"`) {
		t.Errorf("widened while it was open, a stream opened with read shows a private field: %s", data)
	}
	f.a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/acme/notes", `{"user":"ulla","role":"read"}`)
	f.a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/acme/notes", `{"@type":"Note","@id":"n2","text":"note 2","secret":"s2"}`)
	if data := event(`"Note/n2"`); strings.Contains(data, `"secret"`) {
		t.Errorf("narrowed back to read, the stream shows a private field: %s", data)
	}
}

// TestAccessChangesDoNotWaitOnNotifications: an access change is
// announced to the other processes by a NOTIFY sent once it committed,
// not in its transaction: Postgres's queue of notifications is the
// cluster's, and any role that may connect can fill it, after which a
// transaction that notifies fails at COMMIT. A token's revocation then
// failed (as did password and role changes, and user deletions): the
// token's holder kept its access. Here the channel's name is made one
// Postgres refuses, so that every NOTIFY fails: the revocation still
// succeeds, the token is refused, and its stream ends.
func TestAccessChangesDoNotWaitOnNotifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dt.Start(t)
	d.CreateDatabase(t, "an", "type Note { text: String }")
	var tok struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Admin(), "POST", "/api/tokens", `{"name":"n"}`).Body, &tok); err != nil {
		t.Fatal(err)
	}
	s := d.MustOpenStream(t, dt.Bearer(tok.Token), dt.StreamRequest{Path: "/api/subscribe/admin/an/Note"})
	pg, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	if _, err := pg.Exec(ctx, "UPDATE sluice.settings SET value = repeat('c', 100) WHERE key = 'commits_channel'"); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, 200, dt.Admin(), "DELETE", fmt.Sprintf("/api/tokens/%d", tok.ID), nil)
	d.MustDo(t, 401, dt.Bearer(tok.Token), "GET", "/api/db/admin/an", nil)
	for {
		f := s.Event()
		if f.Field("event") == "error" {
			if !strings.Contains(f.String(), "revoked") && !strings.Contains(f.String(), "Unauthenticated") {
				t.Fatalf("the revoked token's stream ended with %s", f)
			}
			break
		}
	}
}

// TestAccessChangesAreRateLimitedPerUser: every access change makes every
// replica read its clients' credentials again, so a user (the super user
// aside) makes at most 10 a second after a burst of 100; past that, 429
// with Retry-After, naming why. rita revokes a token that does not exist
// as fast as she can (each an attempt at an access change) until one is
// refused; the super user never is.
func TestAccessChangesAreRateLimitedPerUser(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	rita := dt.Basic("rita", "rita-password")
	refused := -1
	for i := 0; i < 2000 && refused < 0; i++ {
		switch r := d.Do(t, rita, "DELETE", "/api/tokens/999999", nil); r.Status {
		case 404:
		case 429:
			if !strings.Contains(string(r.Body), "changes of access") || r.Header.Get("Retry-After") == "" {
				t.Fatalf("the refusal: %d %s (Retry-After %q)", r.Status, r.Body, r.Header.Get("Retry-After"))
			}
			refused = i
		default:
			t.Fatalf("revocation %d of a token that does not exist: %d %s", i, r.Status, r.Body)
		}
	}
	if refused < 100 {
		t.Fatalf("rita's revocations were refused from the %dth, want after a burst of 100 (-1: never)", refused+1)
	}
	for i := range 150 {
		if r := d.Do(t, dt.Admin(), "DELETE", "/api/tokens/999999", nil); r.Status != 404 {
			t.Fatalf("the super user's revocation %d: %d %s", i, r.Status, r.Body)
		}
	}
}

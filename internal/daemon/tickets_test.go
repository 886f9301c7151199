package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// The stream ticket tests use the access fixture (access_test.go): two
// daemons a and b on one Postgres, database acme/notes, its readers ulla
// and vera.

// newTicket makes a stream ticket on d with auth and body (a JSON object
// or "") and returns it with its expiry.
func newTicket(t *testing.T, d *dt.Daemon, auth dt.Auth, body string) (string, time.Time) {
	t.Helper()
	r := d.MustDo(t, http.StatusCreated, auth, "POST", "/api/stream-tickets", body)
	var out struct {
		Status    string    `json:"api:status"`
		Ticket    string    `json:"ticket"`
		Expires   time.Time `json:"expires"`
		ExpiresIn int       `json:"expires_in"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("ticket answer %s: %v", r.Body, err)
	}
	if out.Status != "api:success" || !strings.HasPrefix(out.Ticket, "sluice-st_") || out.ExpiresIn < 1 || out.Expires.IsZero() {
		t.Fatalf("ticket answer %s", r.Body)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("ticket answer Cache-Control %q, want no-store", cc)
	}
	return out.Ticket, out.Expires
}

// eventSource is the request a browser's EventSource sends for path with
// ticket: GET, Accept: text/event-stream, no Authorization.
func eventSource(path, ticket string) dt.StreamRequest {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return dt.StreamRequest{Path: path + sep + "ticket=" + url.QueryEscape(ticket), Header: []string{"Accept", "text/event-stream"}}
}

// refused opens req and returns the status and error type of an answer
// that is not a stream, failing the test if it is one.
func refused(t *testing.T, d *dt.Daemon, auth dt.Auth, req dt.StreamRequest) (int, string, string) {
	t.Helper()
	s, resp := d.OpenStream(t, auth, req)
	if s != nil {
		s.Close()
		t.Fatalf("%s: opened a stream, want it refused", req.Path)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	typ, msg := errBody(t, dt.Response{Status: resp.StatusCode, Header: resp.Header, Body: b})
	return resp.StatusCode, typ, msg
}

const restNotes = "/api/subscribe/acme/notes/Note"

// TestStreamTicketSingleUse: a ticket made on one daemon opens a stream on
// the other, once; then it is refused on both.
func TestStreamTicketSingleUse(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t, "read", false)
	ticket, _ := newTicket(t, f.a, f.ulla, "")
	s := f.b.MustOpenStream(t, dt.NoAuth(), eventSource(restNotes, ticket))
	if first := s.Next().String(); !strings.HasPrefix(first, ": connected") {
		t.Fatalf("first frame %q", first)
	}
	id := f.write(t)
	if ev := s.Event(); !strings.Contains(ev.String(), `"`+id+`"`) || ev.Field("event") != "entity.create" {
		t.Fatalf("event %q, want the creation of %s", ev, id)
	}
	for _, d := range []*dt.Daemon{f.a, f.b} {
		status, typ, msg := refused(t, d, dt.NoAuth(), eventSource(restNotes, ticket))
		if status != 401 || typ != "api:NotAuthenticated" || !strings.Contains(msg, "already used") {
			t.Errorf("second use: %d %s %q, want 401 NotAuthenticated, already used", status, typ, msg)
		}
	}
}

// TestStreamTicketRace: the same ticket presented to both daemons at once
// opens exactly one stream.
func TestStreamTicketRace(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t, "read", false)
	for round := range 5 {
		ticket, _ := newTicket(t, f.a, f.ulla, `{"database":"acme/notes"}`)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		errs := make([]error, 2)
		for i, d := range []*dt.Daemon{f.a, f.b} {
			wg.Go(func() {
				req, err := http.NewRequestWithContext(ctx, "GET", d.URL+eventSource(restNotes, ticket).Path, nil)
				if err != nil {
					errs[i] = err
					return
				}
				req.Header.Set("Accept", "text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs[i] = err
					return
				}
				statuses[i] = resp.StatusCode
				// The stream's headers are enough; closing it ends it.
				resp.Body.Close()
			})
		}
		wg.Wait()
		cancel()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if !(statuses[0] == 200 && statuses[1] == 401 || statuses[0] == 401 && statuses[1] == 200) {
			t.Fatalf("round %d: statuses %v, want one 200 and one 401", round, statuses)
		}
	}
}

// TestStreamTicketExpires: a ticket not used within stream_ticket_ttl is
// refused.
func TestStreamTicketExpires(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.StreamTicketTTL = time.Second })
	d.CreateDatabase(t, "notes", notesSDL)
	ticket, expires := newTicket(t, d, dt.Admin(), "")
	if ttl := time.Until(expires); ttl > time.Second+time.Second/2 {
		t.Fatalf("the ticket expires in %v, want stream_ticket_ttl (1s)", ttl)
	}
	// Expiry is the event waited for: Postgres judges it by its clock,
	// the same machine's.
	<-time.After(time.Until(expires) + 100*time.Millisecond)
	status, typ, msg := refused(t, d, dt.NoAuth(), eventSource("/api/subscribe/admin/notes/Note", ticket))
	if status != 401 || typ != "api:NotAuthenticated" || !strings.Contains(msg, "expired") {
		t.Errorf("expired ticket: %d %s %q, want 401 NotAuthenticated, expired", status, typ, msg)
	}
}

// TestStreamTicketBoundToCredential: the stream a ticket opens holds the
// credential that made the ticket, so revoking that token or changing
// that password ends it on every replica; and a ticket made with a token
// revoked since cannot be used.
func TestStreamTicketBoundToCredential(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		token  bool
		change func(t *testing.T, f *accessFixture)
		msg    string
	}{
		{"token revoked", true, func(t *testing.T, f *accessFixture) {
			f.a.MustDo(t, 200, dt.Basic("ulla", "ulla-password"), "DELETE", fmt.Sprintf("/api/tokens/%d", f.token), nil)
		}, "revoked"},
		{"password changed", false, func(t *testing.T, f *accessFixture) {
			f.a.MustDo(t, 200, dt.Admin(), "PUT", "/api/users/ulla/password", `{"password":"another-password"}`)
		}, "password"},
		{"user deleted", false, func(t *testing.T, f *accessFixture) {
			f.a.MustDo(t, 200, dt.Admin(), "DELETE", "/api/users/ulla", nil)
		}, "ticket"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newAccessFixture(t, "read", c.token)
			opened, _ := newTicket(t, f.a, f.ulla, `{"database":"acme/notes"}`)
			unused, _ := newTicket(t, f.a, f.ulla, "")
			gql := eventSource("/api/graphql/acme/notes?query="+url.QueryEscape("subscription { Note_added { _id text } }"), opened)
			streams := []kindStream{{"ulla graphql-sse on b", f.b.MustOpenStream(t, dt.NoAuth(), gql), "sse"}}
			// A second ticket of the same credential opens a REST stream
			// on a.
			rest, _ := newTicket(t, f.b, f.ulla, "")
			streams = append(streams, kindStream{"ulla rest on a", f.a.MustOpenStream(t, dt.NoAuth(), eventSource(restNotes, rest)), "rest"})
			for _, k := range streams {
				if first := k.s.Next().String(); !strings.HasPrefix(first, ": connected") {
					t.Fatalf("%s: first frame %q", k.name, first)
				}
			}
			before := f.write(t)
			expectEvent(t, streams, before)

			c.change(t, f)
			answered := time.Now()
			later := f.write(t)
			expectEnd(t, streams, later, "UNAUTHENTICATED", "NotAuthenticated", answered)

			status, typ, msg := refused(t, f.b, dt.NoAuth(), eventSource(restNotes, unused))
			if status != 401 || typ != "api:NotAuthenticated" || !strings.Contains(msg, c.msg) {
				t.Errorf("a ticket made before the change: %d %s %q, want 401 NotAuthenticated naming %q", status, typ, msg, c.msg)
			}
		})
	}
}

// TestStreamTicketRefusals: a ticket opens only a stream, on its database,
// without other credentials; it is no bearer token; making one needs
// credentials and read access.
func TestStreamTicketRefusals(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t, "read", false)
	f.a.MustDo(t, 201, dt.Admin(), "POST", "/api/db/acme/other", mustJSON(t, map[string]string{"schema": notesSDL}))
	a := f.a

	t.Run("wrong database", func(t *testing.T) {
		t.Parallel()
		ticket, _ := newTicket(t, a, dt.Admin(), `{"database":"acme/notes"}`)
		status, typ, msg := refused(t, a, dt.NoAuth(), eventSource("/api/subscribe/acme/other/Note", ticket))
		if status != 403 || typ != "api:Forbidden" || !strings.Contains(msg, "for database acme/notes, not acme/other") {
			t.Errorf("%d %s %q, want 403 Forbidden naming both databases", status, typ, msg)
		}
		// Spent: a ticket tried in the wrong place may have leaked.
		if status, _, _ := refused(t, a, dt.NoAuth(), eventSource(restNotes, ticket)); status != 401 {
			t.Errorf("after the wrong database, on the right one: %d, want 401", status)
		}
	})
	t.Run("wrong database on _system", func(t *testing.T) {
		t.Parallel()
		ticket, _ := newTicket(t, a, dt.Admin(), `{"database":"acme/notes"}`)
		sys := eventSource("/api/graphql/_system?query="+url.QueryEscape("subscription { UserDatabase_added { name } }"), ticket)
		// In GraphQL's shape, as every error of a GraphQL URL.
		r := a.Do(t, dt.NoAuth(), "GET", sys.Path, nil, sys.Header...)
		if code, _ := gqlRefusal(t, r, "application/json"); r.Status != 403 || code != "FORBIDDEN" {
			t.Errorf("%d %s, want 403 FORBIDDEN", r.Status, code)
		}
	})
	t.Run("_system", func(t *testing.T) {
		t.Parallel()
		ticket, _ := newTicket(t, a, dt.Admin(), `{"database":"_system"}`)
		sys := eventSource("/api/graphql/_system?query="+url.QueryEscape("subscription { UserDatabase_added { name } }"), ticket)
		s := a.MustOpenStream(t, dt.NoAuth(), sys)
		if first := s.Next().String(); !strings.HasPrefix(first, ": connected") {
			t.Fatalf("first frame %q", first)
		}
	})

	notStreams := []struct {
		name   string
		method string
		path   string
		header []string
	}{
		{"document read", "GET", "/api/document/acme/notes", []string{"Accept", "text/event-stream"}},
		{"database list", "GET", "/api/db", nil},
		{"ticket from a ticket", "POST", "/api/stream-tickets", nil},
		{"GraphQL query as JSON", "GET", "/api/graphql/acme/notes?query=%7B+Note+%7B+_id+%7D+%7D", []string{"Accept", "application/json"}},
		{"GraphQL POST", "POST", "/api/graphql/acme/notes", []string{"Accept", "text/event-stream", "Content-Type", "application/json"}},
		{"REST stream without Accept", "GET", restNotes, nil},
		{"REST stream, Accept q=0", "GET", restNotes, []string{"Accept", "text/event-stream;q=0, */*"}},
		{"GraphQL query preferring JSON", "GET", "/api/graphql/acme/notes?query=%7B+Note+%7B+_id+%7D+%7D", []string{"Accept", "application/json, text/event-stream;q=0.5"}},
	}
	for _, c := range notStreams {
		t.Run("not a stream: "+c.name, func(t *testing.T) {
			t.Parallel()
			ticket, _ := newTicket(t, a, dt.Admin(), "")
			sep := "?"
			if strings.Contains(c.path, "?") {
				sep = "&"
			}
			var body any // a GET carries none (TestStrayBodiesAreRefused)
			if c.method == "POST" {
				body = `{"query":"subscription { Note_added { _id } }"}`
			}
			r := a.Do(t, dt.NoAuth(), c.method, c.path+sep+"ticket="+url.QueryEscape(ticket), body, c.header...)
			var typ, msg string
			want := "api:BadRequest"
			if strings.HasPrefix(c.path, "/api/graphql/") {
				// In GraphQL's shape, as every error of a GraphQL URL.
				typ, msg = gqlRefusal(t, r, "application/json")
				want = "BAD_REQUEST"
			} else {
				typ, msg = errBody(t, r)
			}
			if r.Status != 400 || typ != want || !strings.Contains(msg, "?ticket= authenticates only a stream") {
				t.Errorf("%d %s %q, want 400 %s naming ?ticket=", r.Status, typ, msg, want)
			}
			// Not spent: it still opens a stream.
			s := a.MustOpenStream(t, dt.NoAuth(), eventSource(restNotes, ticket))
			s.Close()
		})
	}

	t.Run("with an Authorization header too", func(t *testing.T) {
		t.Parallel()
		ticket, _ := newTicket(t, a, dt.Admin(), "")
		if status, typ, msg := refused(t, a, dt.Admin(), eventSource(restNotes, ticket)); status != 400 || !strings.Contains(msg, "both") {
			t.Errorf("%d %s %q, want 400 asking for one", status, typ, msg)
		}
	})
	t.Run("twice in the URL", func(t *testing.T) {
		t.Parallel()
		ticket, _ := newTicket(t, a, dt.Admin(), "")
		req := eventSource(restNotes+"?ticket="+url.QueryEscape(ticket), ticket)
		if status, _, msg := refused(t, a, dt.NoAuth(), req); status != 400 || !strings.Contains(msg, "given 2 times") {
			t.Errorf("%d %q, want 400", status, msg)
		}
	})
	t.Run("as a bearer token", func(t *testing.T) {
		t.Parallel()
		ticket, _ := newTicket(t, a, dt.Admin(), "")
		r := a.Do(t, dt.Bearer(ticket), "GET", "/api/db", nil)
		if _, msg := errBody(t, r); r.Status != 401 || !strings.Contains(msg, "not a bearer token") {
			t.Errorf("%d %q, want 401: not a bearer token", r.Status, msg)
		}
	})
	t.Run("unknown ticket", func(t *testing.T) {
		t.Parallel()
		for _, ticket := range []string{"nonsense", "sluice-st_" + strings.Repeat("A", 43)} {
			status, typ, _ := refused(t, a, dt.NoAuth(), eventSource(restNotes, ticket))
			if status != 401 || typ != "api:NotAuthenticated" {
				t.Errorf("ticket %q: %d %s, want 401", ticket, status, typ)
			}
		}
	})
	t.Run("making one", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			auth   dt.Auth
			body   string
			status int
			typ    string
		}{
			{dt.NoAuth(), "", 401, "api:NotAuthenticated"},
			{dt.Basic("ulla", "wrong"), "", 401, "api:NotAuthenticated"},
			{f.ulla, `{"database":"acme/other"}`, 403, "api:Forbidden"}, // her organization's, no role
			{f.ulla, `{"database":"acme/none"}`, 404, "api:NotFound"},
			{f.ulla, `{"database":"_system"}`, 403, "api:Forbidden"},
			{f.ulla, `{"database":"notes"}`, 400, "api:BadRequest"},
			{f.ulla, `{"db":"acme/notes"}`, 400, "api:BadRequest"},
		}
		for _, c := range cases {
			r := a.Do(t, c.auth, "POST", "/api/stream-tickets", c.body)
			if typ, _ := errBody(t, r); r.Status != c.status || typ != c.typ {
				t.Errorf("POST /api/stream-tickets %s: %d %s, want %d %s", c.body, r.Status, typ, c.status, c.typ)
			}
		}
	})
}

package gqltransport_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// varsBudgetSDL is the schema of the tests of the budgets of the streams'
// variables.
const varsBudgetSDL = "type Dog { name: String! }"

// The operations the tests open with about 300 KB of variables: each is
// charged 300,456 bytes ({"v":"…"}: 300,008 bytes of JSON, two values and
// an object of one member), so three fit in 1 MiB and a fourth does not.
const (
	varsSub  = `subscription($v: String) { Dog_added(filter: {name: {eq: $v}}) { name } }`
	varsLive = `query($v: String) @live { Dog(filter: {name: {eq: $v}}) { name } }`
)

var heavyVars = map[string]any{"v": strings.Repeat("a", 300_000)}

// openVars POSTs query with variables vars (nil: none) to admin/<db> as
// SSE with auth: the open stream, or nil and the refusal's status, its
// Retry-After and its body.
func openVars(t *testing.T, d *dt.Daemon, auth dt.Auth, db, query string, vars map[string]any) (*stream, int, string, string) {
	t.Helper()
	b := body(query)
	if vars != nil {
		b = body(query, "variables", vars)
	}
	s, resp := d.OpenStream(t, auth, dt.StreamRequest{Method: http.MethodPost, Path: "/api/graphql/admin/" + db, Body: b, Header: []string{"Accept", sse}})
	if s != nil {
		st := &stream{s, t, ""}
		st.connected()
		return st, 0, "", ""
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return nil, resp.StatusCode, resp.Header.Get("Retry-After"), string(rb)
}

// openUntilRefused opens subscriptions of auth with heavyVars until one is
// refused, and returns those that opened and the refusal.
func openUntilRefused(t *testing.T, d *dt.Daemon, auth dt.Auth, db string) (open []*stream, status int, retry, refusal string) {
	t.Helper()
	for range 10 {
		s, status, retry, refusal := openVars(t, d, auth, db, varsSub, heavyVars)
		if s == nil {
			return open, status, retry, refusal
		}
		open = append(open, s)
	}
	t.Fatalf("10 subscriptions of %d bytes of variables each opened", 300_008)
	return nil, 0, "", ""
}

// reopenAfterClose closes s and opens a subscription of auth with
// heavyVars once s's place was given back (as its request's goroutine
// ends: tried until a deadline).
func reopenAfterClose(t *testing.T, d *dt.Daemon, auth dt.Auth, db string, s *stream) {
	t.Helper()
	s.Close()
	deadline := time.Now().Add(wait)
	for {
		s, status, _, refusal := openVars(t, d, auth, db, varsSub, heavyVars)
		if s != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no subscription opened after one was closed: %d %s", status, refusal)
		}
	}
}

// TestStreamVariablesBudgetPerUser: with stream_variables_bytes_per_user
// at 1 MiB, a user's fourth subscription of 300 KB of variables is
// refused (429, Retry-After, naming the setting), as its live query and
// its subscriptions on a graphql-ws socket and in single connection mode
// are; one without variables is
// charged nothing and opens; another user and the super user are not
// refused; closing one of the user's lets another open.
func TestStreamVariablesBudgetPerUser(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.StreamVariablesBytesPerUser, c.StreamVariablesBytes = 1<<20, 0 })
	const db = "varsuser"
	d.CreateDatabase(t, db, varsBudgetSDL)
	for _, u := range []string{"rita", "mia"} {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"`+u+`","organization":"admin","password":"`+u+`-password"}`)
		d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"`+u+`","role":"read"}`)
	}
	rita, mia := dt.Basic("rita", "rita-password"), dt.Basic("mia", "mia-password")

	open, status, retry, refusal := openUntilRefused(t, d, rita, db)
	if len(open) != 3 || status != http.StatusTooManyRequests || retry == "" || !strings.Contains(refusal, "(config stream_variables_bytes_per_user)") ||
		!strings.Contains(refusal, "user rita's streams hold 901368 bytes") {
		t.Fatalf("after %d subscriptions: %d (Retry-After %q) %s", len(open), status, retry, refusal)
	}
	if s, status, _, refusal := openVars(t, d, rita, db, varsLive, heavyVars); s != nil || status != http.StatusTooManyRequests || !strings.Contains(refusal, "stream_variables_bytes_per_user") {
		t.Fatalf("a live query past the budget: opened %v, %d %s", s != nil, status, refusal)
	}
	if s, status, _, refusal := openVars(t, d, rita, db, varsSub, nil); s == nil {
		t.Fatalf("a subscription without variables: %d %s", status, refusal)
	}
	c, _, err := dialWS(t, d, "/api/graphql/admin/"+db, http.Header{"Authorization": {basicAuth("rita", "rita-password")}})
	if err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"connection_init"}`)
	c.expect(`{"type":"connection_ack"}`)
	c.send(`{"id":"1","type":"subscribe","payload":` + body(varsSub, "variables", heavyVars) + `}`)
	if got := c.read(); !strings.HasPrefix(got, `{"id":"1","type":"error","payload":[{"message":"the variables of user rita's streams hold 901368 bytes`) ||
		!strings.Contains(got, "(config stream_variables_bytes_per_user)") || !strings.Contains(got, `"code":"TOO_MANY_REQUESTS"`) {
		t.Fatalf("a graphql-ws subscription past the budget: %.300s", got)
	}
	tok := reserve(t, d, rita, db)
	r := d.MustDo(t, http.StatusTooManyRequests, rita, http.MethodPost, "/api/graphql/admin/"+db,
		body(varsSub, "variables", heavyVars, "extensions", map[string]any{"operationId": "1"}),
		"Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", tok)
	if !strings.Contains(string(r.Body), "(config stream_variables_bytes_per_user)") {
		t.Fatalf("a single connection mode subscription past the budget: %s", r.Body)
	}

	// Another user has a budget of its own; the super user has none.
	for i := range 3 {
		if s, status, _, refusal := openVars(t, d, mia, db, varsSub, heavyVars); s == nil {
			t.Fatalf("mia's subscription %d: %d %s", i+1, status, refusal)
		}
	}
	for i := range 5 {
		if s, status, _, refusal := openVars(t, d, dt.Admin(), db, varsLive, heavyVars); s == nil {
			t.Fatalf("the super user's live query %d: %d %s", i+1, status, refusal)
		}
	}

	reopenAfterClose(t, d, rita, db, open[0])
}

// TestStreamVariablesBudgetPerProcess: with stream_variables_bytes at
// 1 MiB, the fourth subscription of 300 KB of variables of the process
// is refused (503, Retry-After, naming the setting), whoever's, the
// super user's included; one without variables opens; closing one lets
// another open.
func TestStreamVariablesBudgetPerProcess(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.StreamVariablesBytesPerUser, c.StreamVariablesBytes = 0, 1<<20 })
	const db = "varsproc"
	d.CreateDatabase(t, db, varsBudgetSDL)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")

	first, status, _, refusal := openVars(t, d, rita, db, varsLive, heavyVars)
	if first == nil {
		t.Fatalf("rita's live query: %d %s", status, refusal)
	}
	open, status, retry, refusal := openUntilRefused(t, d, dt.Admin(), db)
	if len(open) != 2 || status != http.StatusServiceUnavailable || retry == "" || !strings.Contains(refusal, "(config stream_variables_bytes)") ||
		!strings.Contains(refusal, "this server's streams hold 901368 bytes") {
		t.Fatalf("after rita's live query and %d subscriptions of the super user: %d (Retry-After %q) %s", len(open), status, retry, refusal)
	}
	if s, status, _, refusal := openVars(t, d, rita, db, varsSub, heavyVars); s != nil || status != http.StatusServiceUnavailable || !strings.Contains(refusal, "(config stream_variables_bytes)") {
		t.Fatalf("rita's subscription past the budget: opened %v, %d %s", s != nil, status, refusal)
	}
	if s, status, _, refusal := openVars(t, d, rita, db, varsSub, nil); s == nil {
		t.Fatalf("a subscription without variables: %d %s", status, refusal)
	}
	reopenAfterClose(t, d, rita, db, first)
}

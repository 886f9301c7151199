package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/organizations", `{"name":"acme"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wade","organization":"admin","password":"wade-password"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"otto","organization":"acme","password":"otto-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/people", `{"user":"rita","role":"read"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/people", `{"user":"wade","role":"write"}`)

	// A token for rita, then one revoked.
	var tok struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Basic("rita", "rita-password"), "POST", "/api/tokens", `{"name":"ci"}`).Body, &tok); err != nil {
		t.Fatal(err)
	}
	var revoked struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Basic("rita", "rita-password"), "POST", "/api/tokens", "").Body, &revoked); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, 200, dt.Basic("rita", "rita-password"), "DELETE", fmt.Sprintf("/api/tokens/%d", revoked.ID), nil)
	// Another user cannot revoke rita's token.
	d.MustDo(t, 404, dt.Basic("wade", "wade-password"), "DELETE", fmt.Sprintf("/api/tokens/%d", tok.ID), nil)

	read := func(a dt.Auth) dt.Response { return d.Do(t, a, "GET", "/api/document/admin/people", nil) }
	write := func(a dt.Auth) dt.Response {
		return d.Do(t, a, "POST", "/api/document/admin/people", `{"@type":"Person","name":"x"}`)
	}
	cases := []struct {
		name   string
		do     func(dt.Auth) dt.Response
		auth   dt.Auth
		status int
		msg    string
	}{
		{"no credentials", read, dt.NoAuth(), 401, "authentication required"},
		{"wrong password", read, dt.Basic("rita", "nope"), 401, "wrong user name or password"},
		{"unknown user", read, dt.Basic("ghost", "nope"), 401, "wrong user name or password"},
		{"token reads", read, dt.Bearer(tok.Token), 200, ""},
		{"bad token", read, dt.Bearer("sluice_nonsense"), 401, "invalid or revoked token"},
		{"revoked token", read, dt.Bearer(revoked.Token), 401, "invalid or revoked token"},
		{"reader reads", read, dt.Basic("rita", "rita-password"), 200, ""},
		{"reader writes", write, dt.Basic("rita", "rita-password"), 403, "needs the write role"},
		{"token of a reader writes", write, dt.Bearer(tok.Token), 403, "needs the write role"},
		{"writer writes", write, dt.Basic("wade", "wade-password"), 200, ""},
		{"other organization reads", read, dt.Basic("otto", "otto-password"), 404, "database admin/people does not exist"},
		{"other organization writes", write, dt.Basic("otto", "otto-password"), 404, "database admin/people does not exist"},
		{"admin writes", write, dt.Admin(), 200, ""},
		// What would outlive the token's revocation.
		{"token makes a token", func(a dt.Auth) dt.Response { return d.Do(t, a, "POST", "/api/tokens", `{"name":"child"}`) }, dt.Bearer(tok.Token), 403, "an API token cannot create tokens"},
		{"token sets the password", func(a dt.Auth) dt.Response {
			return d.Do(t, a, "PUT", "/api/users/rita/password", `{"password":"taken-over"}`)
		}, dt.Bearer(tok.Token), 403, "an API token cannot change its user's password"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.do(c.auth)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			if c.status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic realm=") {
				t.Fatalf("401 without WWW-Authenticate: %v", r.Header)
			}
			if c.msg != "" {
				if _, msg := errBody(t, r); !strings.Contains(msg, c.msg) {
					t.Fatalf("message %q, want %q", msg, c.msg)
				}
			}
		})
	}

	// Only the super user manages users and reads _system; others get 403.
	d.MustDo(t, 403, dt.Basic("wade", "wade-password"), "POST", "/api/users", `{"name":"eve","organization":"admin","password":"eve-password"}`)
	d.MustDo(t, 403, dt.Basic("wade", "wade-password"), "GET", "/api/document/_system/_system", nil)
	// A user creates databases in its own organization only, and becomes
	// their admin.
	d.MustDo(t, 403, dt.Basic("otto", "otto-password"), "POST", "/api/db/admin/ottos", "")
	d.MustDo(t, 201, dt.Basic("otto", "otto-password"), "POST", "/api/db/acme/ottos", `{"schema":"type T { a: Int }"}`)
	d.MustDo(t, 200, dt.Basic("otto", "otto-password"), "PUT", "/api/schema/acme/ottos", "type T { a: Int b: String }")
	// The database list shows only what a user can read.
	var list []struct{ Path string }
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Basic("otto", "otto-password"), "GET", "/api/db", nil).Body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Path != "acme/ottos" {
		t.Fatalf("otto's databases: %+v", list)
	}
	// Passwords never appear in any answer.
	users := d.MustDo(t, 200, dt.Admin(), "GET", "/api/users", nil)
	sys := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/_system/_system?type=User", nil)
	for _, b := range [][]byte{users.Body, sys.Body} {
		if strings.Contains(string(b), "password") || strings.Contains(string(b), "$2a$") {
			t.Fatalf("secret leaked: %s", b)
		}
	}
}

// gqlRefusal returns the code and message of r, the answer of a GraphQL
// URL to a request refused before it ran, and fails t unless it has
// GraphQL's shape: {"errors":[…]} with one error and nothing else, in
// media (with charset=utf-8).
func gqlRefusal(t *testing.T, r dt.Response, media string) (code, msg string) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &top); err != nil {
		t.Fatalf("error body is not JSON: %s", r.Body)
	}
	var errs []struct {
		Message    string `json:"message"`
		Extensions struct {
			Code string `json:"code"`
		} `json:"extensions"`
	}
	if err := json.Unmarshal(top["errors"], &errs); err != nil || len(top) != 1 || len(errs) != 1 || errs[0].Message == "" {
		t.Fatalf("error body is not a GraphQL response of one error: %s", r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != media+"; charset=utf-8" {
		t.Fatalf("error Content-Type %q, want %s", ct, media)
	}
	return errs[0].Extensions.Code, errs[0].Message
}

// TestAuthenticationRefusalsInGraphQLShape: what authentication refuses
// on a GraphQL URL (no credentials, a wrong password, a revoked token,
// too many wrong passwords, a stream ticket of another database, a
// ticket on a request that is no stream or on a graphql-ws upgrade) is
// answered as every other error of the URL, {"errors":[…]} with
// extensions.code, with the status, WWW-Authenticate and Retry-After of
// a REST route's answer, on every transport of the URL (over HTTP in
// either media type, a graphql-sse stream, a graphql-ws upgrade); a REST
// route answers the same refusals in the REST shape. Without the change
// each was a REST body on the GraphQL URL, from which a GraphQL client
// reads no code, and a graphql-ws upgrade's 401 had no WWW-Authenticate.
func TestAuthenticationRefusalsInGraphQLShape(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.AuthMaxFailures, c.AuthFailureWindow = 10, time.Hour })
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	d.CreateDatabase(t, "other", "type Person { name: String! }")
	for _, u := range []string{"rita", "bea"} {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"`+u+`","organization":"admin","password":"`+u+`-password"}`)
		d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/people", `{"user":"`+u+`","role":"read"}`)
	}
	var revoked struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Basic("rita", "rita-password"), "POST", "/api/tokens", `{"name":"ci"}`).Body, &revoked); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, 200, dt.Basic("rita", "rita-password"), "DELETE", fmt.Sprintf("/api/tokens/%d", revoked.ID), nil)
	// bea's password is guessed wrong as often as auth_max_failures
	// allows: her next requests from this address are throttled.
	for range 10 {
		d.MustDo(t, 401, dt.Basic("bea", "guess"), "GET", "/api/info", nil)
	}

	const gql = "/api/graphql/admin/people"
	query := `{"query":"{ Person { name } }"}`
	subscription := "?query=" + url.QueryEscape("subscription { Person_added { name } }")
	transports := []struct {
		name, method, path string
		body               any
		header             []string
		media              string // of the answer
	}{
		{"POST application/json", "POST", gql, query, []string{"Content-Type", "application/json", "Accept", "application/json"}, "application/json"},
		{"POST graphql-response+json", "POST", gql, query, []string{"Content-Type", "application/json", "Accept", "application/graphql-response+json"}, "application/graphql-response+json"},
		{"GET graphql-response+json", "GET", gql + "?query=" + url.QueryEscape("{ Person { name } }"), nil, []string{"Accept", "application/graphql-response+json"}, "application/graphql-response+json"},
		{"GET graphql-sse", "GET", gql + subscription, nil, []string{"Accept", "text/event-stream"}, "application/json"},
		{"POST graphql-sse", "POST", gql, `{"query":"subscription { Person_added { name } }"}`, []string{"Content-Type", "application/json", "Accept", "text/event-stream"}, "application/json"},
		{"graphql-ws upgrade", "GET", gql, nil, []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
			"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol", "graphql-transport-ws"}, "application/json"},
	}
	refusals := []struct {
		name   string
		auth   dt.Auth
		status int
		code   string
		msg    string
		rest   string // the REST @type
	}{
		{"no credentials", dt.NoAuth(), 401, "UNAUTHENTICATED", "authentication required", "api:NotAuthenticated"},
		{"wrong password", dt.Basic("rita", "nope"), 401, "UNAUTHENTICATED", "wrong user name or password", "api:NotAuthenticated"},
		{"revoked token", dt.Bearer(revoked.Token), 401, "UNAUTHENTICATED", "invalid or revoked token", "api:NotAuthenticated"},
		{"throttled", dt.Basic("bea", "bea-password"), 429, "TOO_MANY_REQUESTS", "auth_max_failures", "api:TooManyRequests"},
	}
	headers := func(t *testing.T, r dt.Response, status int) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
		}
		if status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic realm=") {
			t.Errorf("401 without WWW-Authenticate: %v", r.Header)
		}
		if status == 429 && r.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After: %v", r.Header)
		}
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			// A graphql-ws upgrade without credentials is accepted: they
			// may come in its connection_init.
			for _, tr := range transports {
				if tr.name == "graphql-ws upgrade" && c.name == "no credentials" {
					continue
				}
				r := d.Do(t, c.auth, tr.method, tr.path, tr.body, tr.header...)
				headers(t, r, c.status)
				if code, msg := gqlRefusal(t, r, tr.media); code != c.code || !strings.Contains(msg, c.msg) {
					t.Errorf("%s: %s %q, want %s naming %q", tr.name, code, msg, c.code, c.msg)
				}
			}
			for _, path := range []string{"/api/document/admin/people", "/api/subscribe/admin/people/Person"} {
				r := d.Do(t, c.auth, "GET", path, nil)
				headers(t, r, c.status)
				if typ, msg := errBody(t, r); typ != c.rest || !strings.Contains(msg, c.msg) {
					t.Errorf("%s: %s %q, want %s naming %q", path, typ, msg, c.rest, c.msg)
				}
			}
		})
	}

	t.Run("ticket of another database", func(t *testing.T) {
		ticket, _ := newTicket(t, d, dt.Admin(), `{"database":"admin/other"}`)
		r := d.Do(t, dt.NoAuth(), "GET", gql+subscription+"&ticket="+url.QueryEscape(ticket), nil, "Accept", "text/event-stream")
		headers(t, r, 403)
		if code, msg := gqlRefusal(t, r, "application/json"); code != "FORBIDDEN" || !strings.Contains(msg, "for database admin/other, not admin/people") {
			t.Errorf("%s %q, want FORBIDDEN naming both databases", code, msg)
		}
		ticket, _ = newTicket(t, d, dt.Admin(), `{"database":"admin/other"}`)
		r = d.Do(t, dt.NoAuth(), "GET", "/api/subscribe/admin/people/Person?ticket="+url.QueryEscape(ticket), nil, "Accept", "text/event-stream")
		headers(t, r, 403)
		if typ, _ := errBody(t, r); typ != "api:Forbidden" {
			t.Errorf("REST stream: %s, want api:Forbidden", typ)
		}
	})
	t.Run("ticket on a request that is no stream", func(t *testing.T) {
		ticket, _ := newTicket(t, d, dt.Admin(), "")
		r := d.Do(t, dt.NoAuth(), "POST", gql+"?ticket="+url.QueryEscape(ticket), query, "Content-Type", "application/json", "Accept", "application/graphql-response+json")
		headers(t, r, 400)
		if code, msg := gqlRefusal(t, r, "application/graphql-response+json"); code != "BAD_REQUEST" || !strings.Contains(msg, "?ticket= authenticates only a stream") {
			t.Errorf("%s %q, want BAD_REQUEST naming ?ticket=", code, msg)
		}
		// Nor does a graphql-ws upgrade take one.
		r = d.Do(t, dt.NoAuth(), "GET", gql+"?ticket="+url.QueryEscape(ticket), nil, "Connection", "Upgrade", "Upgrade", "websocket",
			"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol", "graphql-transport-ws")
		headers(t, r, 400)
		if code, msg := gqlRefusal(t, r, "application/json"); code != "BAD_REQUEST" || !strings.Contains(msg, "?ticket= authenticates only a stream") {
			t.Errorf("graphql-ws upgrade: %s %q, want BAD_REQUEST naming ?ticket=", code, msg)
		}
	})
}

// TestEarlyRefusalsInGraphQLShape: what the router refuses before any
// route's handler runs (a GET carrying a body, a body whose Content-Length
// is over max_body_bytes, a cross-site write, a method no route serves, a
// path under /api/graphql/ that is no GraphQL URL, a WebSocket upgrade
// there) is answered on the GraphQL URLs as their other errors are,
// {"errors":[…]} with extensions.code, with the status and headers of a
// REST route's answer (a 405's Allow), and in the REST shape on
// a REST route. Without the change each was a REST body on the GraphQL
// URLs too, as authentication's refusals were before 4273e1b.
func TestEarlyRefusalsInGraphQLShape(t *testing.T) {
	t.Parallel()
	const limit = 1000
	d := dt.Start(t, func(c *config.Config) { c.MaxBodyBytes = limit })
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	query := `{"query":"{ Person { name } }"}`
	asJSON := []string{"Content-Type", "application/json"}
	upgrade := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
		"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol", "graphql-transport-ws"}
	cases := []struct {
		name           string
		method         string
		gql, rest      string // the paths asked
		body           any
		header         []string
		status         int
		code, restType string
		msg            string
	}{
		{name: "GET with a body", method: "GET", gql: "/api/graphql/admin/people", rest: "/api/document/admin/people", body: query, header: asJSON,
			status: 400, code: "BAD_REQUEST", restType: "api:BadRequest", msg: "a GET request carries no body here"},
		{name: "Content-Length over max_body_bytes", method: "POST", gql: "/api/graphql/admin/people", rest: "/api/document/admin/people", body: strings.Repeat(" ", limit+1), header: asJSON,
			status: 413, code: "BAD_REQUEST", restType: "api:PayloadTooLarge", msg: "max_body_bytes"},
		{name: "cross-site write", method: "POST", gql: "/api/graphql/_system", rest: "/api/tokens", body: query,
			header: append([]string{"Origin", "https://elsewhere.example", "Sec-Fetch-Site", "cross-site"}, asJSON...),
			status: 403, code: "FORBIDDEN", restType: "api:Forbidden", msg: "cross-origin request refused"},
		{name: "a method no route serves", method: "PROPFIND", gql: "/api/graphql/admin/people", rest: "/api/document/admin/people",
			status: 405, code: "METHOD_NOT_ALLOWED", restType: "api:MethodNotAllowed", msg: "method PROPFIND is not allowed"},
		{name: "no such GraphQL URL", method: "POST", gql: "/api/graphql/admin", rest: "/api/document/admin", body: query, header: asJSON,
			status: 404, code: "NOT_FOUND", restType: "api:NotFound", msg: "no route for POST /api/"},
		{name: "WebSocket upgrade to no GraphQL URL", method: "GET", gql: "/api/graphql/admin/people/more", rest: "/api/document/admin/people", header: upgrade,
			status: 400, code: "BAD_REQUEST", restType: "api:BadRequest", msg: "does not accept WebSocket upgrades"},
	}
	check := func(t *testing.T, r dt.Response, status int) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
		}
		if status == 405 && !strings.Contains(r.Header.Get("Allow"), "POST") {
			t.Errorf("405 without the Allow of the URL: %v", r.Header)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Either media type of GraphQL over HTTP, as the Accept
			// header prefers.
			for _, media := range []string{"application/json", "application/graphql-response+json"} {
				r := d.Do(t, dt.Admin(), c.method, c.gql, c.body, append([]string{"Accept", media}, c.header...)...)
				check(t, r, c.status)
				if code, msg := gqlRefusal(t, r, media); code != c.code || !strings.Contains(msg, c.msg) {
					t.Errorf("%s %s: %s %q, want %s naming %q", c.method, c.gql, code, msg, c.code, c.msg)
				}
			}
			r := d.Do(t, dt.Admin(), c.method, c.rest, c.body, c.header...)
			check(t, r, c.status)
			if typ, msg := errBody(t, r); typ != c.restType || !strings.Contains(msg, c.msg) {
				t.Errorf("%s %s: %s %q, want %s naming %q", c.method, c.rest, typ, msg, c.restType, c.msg)
			}
		})
	}
}

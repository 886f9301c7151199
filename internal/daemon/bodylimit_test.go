package daemon_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// everyRoute is a request of each route of the API (the GraphQL URL and
// the change stream included), with the ones that read a body marked.
var everyRoute = []struct {
	method, path string
	reads        bool
}{
	{"GET", "/", false}, {"GET", "/api/ok", false}, {"GET", "/healthz", false}, {"GET", "/readyz", false}, {"GET", "/metrics", false},
	{"GET", "/api/info", false}, {"GET", "/api/db", false}, {"GET", "/api/db/admin/big", false},
	{"POST", "/api/db/admin/other", true}, {"DELETE", "/api/db/admin/nothing", false},
	{"GET", "/api/schema/admin/big", false}, {"PUT", "/api/schema/admin/big", true},
	{"GET", "/api/document/admin/big", false}, {"POST", "/api/document/admin/big", true},
	{"PUT", "/api/document/admin/big", true}, {"DELETE", "/api/document/admin/big", true},
	{"GET", "/api/log/admin/big", false}, {"GET", "/api/changes/admin/big", false}, {"GET", "/api/asyncapi/admin/big", false},
	{"GET", "/api/admin/subscriptions", false}, {"GET", "/api/organizations", false}, {"POST", "/api/organizations", true},
	{"DELETE", "/api/organizations/none", false}, {"GET", "/api/users", false}, {"POST", "/api/users", true},
	{"DELETE", "/api/users/none", false}, {"PUT", "/api/users/admin/password", true}, {"PUT", "/api/roles/admin/big", true},
	{"GET", "/api/tokens", false}, {"POST", "/api/tokens", true}, {"DELETE", "/api/tokens/1", false},
	{"POST", "/api/stream-tickets", true}, {"GET", "/api/webhooks/admin/big", false}, {"POST", "/api/webhooks/admin/big", true},
	{"GET", "/api/webhooks/admin/big/1", false}, {"PATCH", "/api/webhooks/admin/big/1", false},
	{"DELETE", "/api/webhooks/admin/big/1", false}, {"GET", "/api/webhooks/admin/big/1/attempts", false},
	{"POST", "/api/webhooks/admin/big/1/pause", false}, {"POST", "/api/webhooks/admin/big/1/resume", false},
	{"POST", "/api/webhooks/admin/big/1/replay", false}, {"POST", "/api/webhooks/admin/big/1/rotate-secret", false},
	{"GET", "/api/graphiql/admin/big", false}, {"GET", "/api/subscribe/admin/big/Note", false},
	{"POST", "/api/graphql/admin/big", true}, {"POST", "/api/graphql/_system", true}, {"GET", "/no/such/route", false},
}

// TestBodyLimitOnEveryRoute: on every route, a body whose Content-Length
// is over max_body_bytes is answered 413, naming the setting (400 for a
// GET, which carries none), before any of it is sent, and the connection
// closes; on every route that reads a body, one sent without a
// Content-Length is answered the same once it passes the limit.
func TestBodyLimitOnEveryRoute(t *testing.T) {
	t.Parallel()
	const limit = 1000
	d := dt.Start(t, func(c *config.Config) { c.MaxBodyBytes = limit })
	d.CreateDatabase(t, "big", "type Note { text: String }")
	addr := strings.TrimPrefix(d.URL, "http://")
	req, _ := http.NewRequest("GET", "/", nil)
	dt.Admin()(req)
	authz := req.Header.Get("Authorization")
	for _, rt := range everyRoute {
		// The headers only: the answer must come without the body.
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			rt.method, rt.path, addr, authz, limit+1)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s %s with a Content-Length over the limit and no body sent: %v", rt.method, rt.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		// A GET carries no body at all (TestStrayBodiesAreRefused).
		want, says := 413, "the request body is larger than 1000 bytes, the most max_body_bytes allows"
		if rt.method == "GET" {
			want, says = 400, "a GET request carries no body here"
		}
		if resp.StatusCode != want || !strings.Contains(string(b), says) || !resp.Close {
			t.Errorf("%s %s with a Content-Length over the limit: %d %s (closes the connection: %v)", rt.method, rt.path, resp.StatusCode, b, resp.Close)
		}
		if !rt.reads {
			continue
		}
		// No Content-Length: refused once the limit is passed. (A DELETE
		// body is read as it goes, and one that is not an array of ids
		// is refused at its first byte: this one is an array.)
		body := `{"text":"` + strings.Repeat("x", 2*limit) + `"}`
		if rt.method == "DELETE" {
			body = `["` + strings.Repeat("x", 2*limit) + `"]`
		}
		r, _ := http.NewRequest(rt.method, d.URL+rt.path, io.MultiReader(strings.NewReader(body)))
		r.ContentLength = -1
		r.Header.Set("Content-Type", "application/json")
		dt.Admin()(r)
		resp, err = http.DefaultClient.Do(r)
		if err != nil {
			t.Fatalf("%s %s with a chunked body over the limit: %v", rt.method, rt.path, err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(b), "max_body_bytes") {
			t.Errorf("%s %s with a chunked body over the limit: %d %s", rt.method, rt.path, resp.StatusCode, b)
		}
	}
}

// TestDeleteAndPatchBodiesAreCheckedBeforeDecoded: a DELETE or PATCH body
// is not decoded before its checks: a user who may not write is refused
// without the body being read (the request here never ends its body), and
// a DELETE of more ids than max_write_documents is refused at the first
// id too many, naming the setting, rather than after max_body_bytes of
// ids decoded (64 MiB of "" is 22 million ids, gigabytes).
func TestDeleteAndPatchBodiesAreCheckedBeforeDecoded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxWriteDocuments = 3 })
	d.CreateDatabase(t, "few", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"nosy","organization":"admin","password":"nosy-password"}`)
	send := func(auth dt.Auth, method, path, contentType, prefix, item string) (int, string) {
		t.Helper()
		return sendEndless(t, d, auth, method, path, contentType, prefix, item)
	}
	nosy := dt.Basic("nosy", "nosy-password")
	const docs = "/api/document/admin/few"
	if status, body := send(nosy, "DELETE", docs, "application/json", `[`, `"",`); status != 403 {
		t.Errorf("a DELETE by a user without a role: %d %s", status, body)
	}
	if status, body := send(nosy, "PATCH", docs+"?id=Note/a", "application/merge-patch+json", `{"text":[`, `0,`); status != 403 {
		t.Errorf("a PATCH by a user without a role: %d %s", status, body)
	}
	if status, body := send(dt.Admin(), "DELETE", docs, "application/json", `["Note/a",`, `"Note/b",`); status != 413 || !strings.Contains(body, "more than 3 documents (max_write_documents)") {
		t.Errorf("a DELETE of more ids than max_write_documents: %d %s", status, body)
	}
}

// TestSmallBodiesAreBoundedBeforeRead: the routes whose body is one small
// JSON object (a token's name, a user, a password...) refuse a body over
// 8 KiB, naming that limit, rather than read and decode up to
// max_body_bytes (64 MiB) to find a field too long: from its
// Content-Length before any of it is sent, and without one once it
// passes the limit (the body here never ends).
func TestSmallBodiesAreBoundedBeforeRead(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "small", "type Note { text: String }")
	addr := strings.TrimPrefix(d.URL, "http://")
	req, _ := http.NewRequest("GET", "/", nil)
	dt.Admin()(req)
	authz := req.Header.Get("Authorization")
	const says = "the request body is larger than 8192 bytes, the most this route takes"
	for _, rt := range []struct{ method, path, prefix string }{
		{"POST", "/api/tokens", `{"name":"`},
		{"POST", "/api/organizations", `{"name":"`},
		{"POST", "/api/users", `{"name":"`},
		{"PUT", "/api/users/admin/password", `{"password":"`},
		{"PUT", "/api/roles/admin/small", `{"user":"`},
		{"PATCH", "/api/db/admin/small", `{"log_retention":"`},
		{"POST", "/api/stream-tickets", `{"database":"`},
		{"POST", "/api/webhooks/admin/small/1/resume", `{"after":"`},
		{"POST", "/api/webhooks/admin/small/1/replay", `{"after":"`},
		{"POST", "/api/webhooks/admin/small/1/rotate-secret", `{"grace":"`},
	} {
		// A 1 MB Content-Length, the headers only: the answer must come
		// without the body.
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			rt.method, rt.path, addr, authz, 1<<20)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s %s with a 1 MB Content-Length and no body sent: %v", rt.method, rt.path, err)
			conn.Close()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(b), says) || !resp.Close {
			t.Errorf("%s %s with a 1 MB Content-Length: %d %s (closes the connection: %v)", rt.method, rt.path, resp.StatusCode, b, resp.Close)
		}

		// No Content-Length, a body that never ends: refused once past
		// the limit.
		pr, pw := io.Pipe()
		go func() {
			if _, err := pw.Write([]byte(rt.prefix)); err != nil {
				return
			}
			chunk := []byte(strings.Repeat("x", 4096))
			for {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
		}()
		r, _ := http.NewRequest(rt.method, d.URL+rt.path, pr)
		r.Header.Set("Content-Type", "application/json")
		dt.Admin()(r)
		resp, err = http.DefaultClient.Do(r)
		if err != nil {
			pr.CloseWithError(io.ErrClosedPipe)
			t.Fatalf("%s %s with an endless body: %v", rt.method, rt.path, err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		pr.CloseWithError(io.ErrClosedPipe)
		if resp.StatusCode != 413 || !strings.Contains(string(b), says) {
			t.Errorf("%s %s with an endless body: %d %s", rt.method, rt.path, resp.StatusCode, b)
		}
	}
}

// TestUnauthenticatedBodyIsNotRead: a request whose credentials fail is
// answered without reading the body it announces, on every way to
// route (none, a wrong token), and its connection closes (a GET with a
// body, as a stream ticket's, is refused before authentication). net/http would otherwise read and discard up to 256
// KiB of it before answering, to keep the connection: here it would wait
// for a body that never comes until body_idle_timeout.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "anon", "type Note { text: String }")
	addr := strings.TrimPrefix(d.URL, "http://")
	for _, rt := range []struct{ method, path, header string }{
		{"POST", "/api/document/admin/anon", ""},
		{"POST", "/api/document/admin/anon", "Authorization: Bearer sluice_not-a-token\r\n"},
		{"POST", "/api/graphql/admin/anon", "Authorization: Bearer sluice_not-a-token\r\n"},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			rt.method, rt.path, addr, rt.header, 200_000)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s %s %q with a 200,000-byte Content-Length and no body sent: %v", rt.method, rt.path, rt.header, err)
			conn.Close()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != 401 || !resp.Close {
			t.Errorf("%s %s %q: %d %s (closes the connection: %v), want 401 and close", rt.method, rt.path, rt.header, resp.StatusCode, b, resp.Close)
		}
	}
}

// sendEndless sends a request to d whose body is prefix, then item for
// ever, until the answer comes, and returns the answer's status and body.
func sendEndless(t *testing.T, d *dt.Daemon, auth dt.Auth, method, path, contentType, prefix, item string) (int, string) {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		if _, err := pw.Write([]byte(prefix)); err != nil {
			return
		}
		for {
			if _, err := pw.Write([]byte(item)); err != nil {
				return
			}
		}
	}()
	defer pr.CloseWithError(io.ErrClosedPipe)
	req, err := http.NewRequest(method, d.URL+path, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestWebhookBodiesAreCheckedBeforeDecoded: a webhook's settings are read
// once the user is known to be an admin of the database, and within 512
// KiB: a user without the role is refused without the body being read
// (the requests here never end their bodies), and an admin's body past
// the bound is refused naming it. Both were decoded up to max_body_bytes
// first (60 MB of "" classes held 640 MB for one request of a user with
// no role on the database).
func TestWebhookBodiesAreCheckedBeforeDecoded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "hooked", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"nosy","organization":"admin","password":"nosy-password"}`)
	nosy := dt.Basic("nosy", "nosy-password")
	const hooks = "/api/webhooks/admin/hooked"
	if status, body := sendEndless(t, d, nosy, "POST", hooks, "application/json", `{"classes":[`, `"",`); status != 403 && status != 404 {
		t.Errorf("a webhook made by a user without a role: %d %s", status, body)
	}
	if status, body := sendEndless(t, d, nosy, "PATCH", hooks+"/1", "application/json", `{"classes":[`, `"",`); status != 403 && status != 404 {
		t.Errorf("a webhook changed by a user without a role: %d %s", status, body)
	}
	if status, body := sendEndless(t, d, dt.Admin(), "POST", hooks, "application/json", `{"classes":[`, `"",`); status != 413 || !strings.Contains(body, "the most this route takes (a webhook's settings)") {
		t.Errorf("an admin's webhook of endless settings: %d %s", status, body)
	}
}

// TestSchemaBodiesAreCheckedBeforeRead: a schema (PUT /api/schema) is read
// once the user is known to be an admin of the database, and at most
// max_schema_bytes of it; a new database's body (POST /api/db) once the
// user may create it there, and at most six times max_schema_bytes (a
// schema written as \u escapes) with room for a label and a comment.
// Both were read up to max_body_bytes first, by anyone signed in (four
// schemas of 60 MB at once held 550 MB).
func TestSchemaBodiesAreCheckedBeforeRead(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxSchemaBytes = 4096 })
	d.CreateDatabase(t, "sdl", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/organizations", `{"name":"elsewhere"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"nosy","organization":"elsewhere","password":"nosy-password"}`)
	nosy := dt.Basic("nosy", "nosy-password")
	if status, body := sendEndless(t, d, nosy, "PUT", "/api/schema/admin/sdl", "text/plain", "type A { a: String }\n", "# more\n"); status != 403 && status != 404 {
		t.Errorf("a schema sent by a user without a role: %d %s", status, body)
	}
	if status, body := sendEndless(t, d, dt.Admin(), "PUT", "/api/schema/admin/sdl", "text/plain", "type A { a: String }\n", "# more\n"); status != 413 || !strings.Contains(body, "larger than 4096 bytes, the most this route takes (a schema: max_schema_bytes)") {
		t.Errorf("an admin's endless schema: %d %s", status, body)
	}
	if status, body := sendEndless(t, d, nosy, "POST", "/api/db/admin/other", "application/json", `{"schema":"`, `type A { a: String } `); status != 403 || !strings.Contains(body, "may only create databases in organization elsewhere") {
		t.Errorf("a database made by a user of another organization: %d %s", status, body)
	}
	if status, body := sendEndless(t, d, nosy, "POST", "/api/db/elsewhere/mine", "application/json", `{"schema":"`, `type A { a: String } `); status != 413 || !strings.Contains(body, "six times max_schema_bytes") {
		t.Errorf("a database of an endless schema: %d %s", status, body)
	}
}

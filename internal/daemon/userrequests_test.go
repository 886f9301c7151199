package daemon_test

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestUserStalledRequestsAreBounded: a signed-in user with no role on
// any database asks GET /api/info 60 times on one HTTP/2 connection
// granting the server no flow-control window, so no answer's body can be
// sent and each handler waits write_timeout (10 minutes here). Every one
// was answered 200 and held: a user's requests in flight had no bound.
// With max_requests_per_user 20, 20 are held and the next are answered
// 429; the same user's request on another connection is refused 429,
// with Retry-After and the setting named. Refusals left unsent are
// bounded too (16, userRefusals): the requests past them are reset and
// counted in sluice_http_user_requests_aborted_total. Another user's
// requests, and the super user's, are served meanwhile, and once the
// stalled connection is gone its user is served again.
func TestUserStalledRequestsAreBounded(t *testing.T) {
	t.Parallel()
	const bound, refusals, streams = 20, 16, 60
	d, cert := startTLS(t, func(c *config.Config) {
		c.MaxRequestsPerUser = bound
		c.WriteTimeout = 10 * time.Minute
	})
	var dials atomic.Int64
	client := tlsClient(cert, &dials)
	base := "https://" + d.Addr()
	do := requester(t, client, base)
	for _, u := range []string{"mallory", "bob"} {
		if resp, body := do(dt.Admin(), "POST", "/api/users", fmt.Sprintf(`{"name":%q,"organization":"admin","password":"%s-password"}`, u, u)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("create user %s: %d %s", u, resp.StatusCode, body)
		}
	}

	h2 := dialStalled(t, d, cert)
	authz := basicAuthorization("mallory", "mallory-password")
	// The first is answered before the others are sent: a connection
	// that never carried an authenticated request has 16 requests in
	// flight (TestAnonymousHTTP2ConnectionHoldsFewRequests).
	h2.send(0, authz)
	if statuses, _ := h2.answer(0, 1); statuses["200"] != 1 {
		t.Fatalf("the first request: %v", statuses)
	}
	const first = bound + 4
	for i := 1; i < first; i++ {
		h2.send(i, authz)
	}
	statuses, reset := h2.answer(1, first)
	t.Logf("of %d more stalled requests of one user: %v answered, %d reset", first-1, statuses, reset)
	if statuses["200"] != bound-1 || statuses["429"] != 4 || reset != 0 {
		t.Errorf("of %d more stalled requests of one user, %d answered 200, %d 429 and %d reset; want %d, 4 and 0",
			first-1, statuses["200"], statuses["429"], reset, bound-1)
	}

	// Its next request, on another connection, is refused and says why.
	resp, body := do(dt.Basic("mallory", "mallory-password"), "GET", "/api/info", "")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "max_requests_per_user") {
		t.Errorf("mallory's next request: %d, Retry-After %q, %s; want 429 with Retry-After, naming max_requests_per_user", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}

	// Refusals whose answers are left unsent are bounded too: past
	// them, a request is reset, which holds nothing. (The refusal just
	// read is counted out once sent, which its client may see first.)
	eventually.Nil(t, 10*time.Second, "the refusal read counted out", func() error {
		_, metrics := do(dt.Admin(), "GET", "/metrics", "")
		if n := dt.MetricValue(metrics, "sluice_http_user_requests_refusals_in_flight"); n != 4 {
			return fmt.Errorf("%.0f refusals in flight, want the 4 unsent", n)
		}
		return nil
	})
	for i := first; i < streams; i++ {
		h2.send(i, authz)
	}
	statuses, reset = h2.answer(first, streams)
	t.Logf("of %d more stalled requests of one user: %v answered, %d reset", streams-first, statuses, reset)
	if len(statuses) != 1 || statuses["429"] != refusals-4 || reset != streams-first-(refusals-4) {
		t.Errorf("of %d more stalled requests of one user, %v answered and %d reset; want %d 429 and %d reset",
			streams-first, statuses, reset, refusals-4, streams-first-(refusals-4))
	}

	// Another user's requests, and the super user's, are served.
	for _, auth := range []dt.Auth{dt.Basic("bob", "bob-password"), dt.Admin()} {
		if resp, body := do(auth, "GET", "/api/info", ""); resp.StatusCode != http.StatusOK {
			t.Errorf("another user's request: %d %s", resp.StatusCode, body)
		}
	}
	_, metrics := do(dt.Admin(), "GET", "/metrics", "")
	if n := dt.MetricValue(metrics, "sluice_http_user_requests_aborted_total"); int(n) != reset {
		t.Errorf("sluice_http_user_requests_aborted_total is %.0f, want %d", n, reset)
	}
	if n := dt.MetricValue(metrics, "sluice_http_user_requests_in_flight"); int(n) != bound {
		t.Errorf("sluice_http_user_requests_in_flight is %.0f, want %d", n, bound)
	}

	// The stalled connection gone, its handlers return and its user's
	// requests are served again.
	_ = h2.conn.Close()
	eventually.Nil(t, 30*time.Second, "mallory served once her stalled connection is closed", func() error {
		return served(client, base, "mallory")
	})
}

// TestUserStreamsAreNotRequestsInFlight: a stream is counted among its
// user's streams (max_streams_per_user), not among its requests in
// flight, nor the process's, once it is open: with
// max_requests_per_user and max_requests_in_flight 2, a user opens
// six streams of every kind over HTTP/2 (where a stream's handler runs
// for its whole life: over HTTP/1 it is parked), two graphql-sse single
// connection mode ones among them, and its plain requests are still
// served. (A request is counted out just after its answer is sent, so a
// client may see it before: the test's requests, one at a time, leave
// the bound room for that.)
func TestUserStreamsAreNotRequestsInFlight(t *testing.T) {
	t.Parallel()
	d, cert := startTLS(t, func(c *config.Config) { c.MaxRequestsPerUser, c.MaxRequestsInFlight = 2, 2 })
	var dials atomic.Int64
	client := tlsClient(cert, &dials)
	base := "https://" + d.Addr()
	open := func(auth dt.Auth, method, path, body string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		auth(req)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	must := func(want int, auth dt.Auth, method, path, body string, header ...string) {
		t.Helper()
		resp := open(auth, method, path, body, header...)
		if resp.StatusCode != want {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s %s: %d %s; want %d", method, path, resp.StatusCode, b, want)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s %s: answered over %s, want HTTP/2", method, path, resp.Proto)
		}
	}
	must(201, dt.Admin(), "POST", "/api/organizations", `{"name":"acme"}`)
	must(201, dt.Admin(), "POST", "/api/db/acme/notes", mustJSON(t, map[string]string{"schema": notesSDL}))
	must(201, dt.Admin(), "POST", "/api/users", `{"name":"ulla","organization":"acme","password":"ulla-password"}`)
	must(200, dt.Admin(), "PUT", "/api/roles/acme/notes", `{"user":"ulla","role":"read"}`)
	ulla := dt.Basic("ulla", "ulla-password")

	// Each stream's headers are sent once it is open (its readiness).
	must(200, ulla, "POST", "/api/graphql/acme/notes", noteSub, "Content-Type", "application/json", "Accept", "text/event-stream")
	must(200, ulla, "POST", "/api/graphql/acme/notes", noteSub, "Content-Type", "application/json", "Accept", "application/x-ndjson")
	must(200, ulla, "GET", "/api/subscribe/acme/notes/Note", "")
	must(200, ulla, "GET", "/api/subscribe/acme/notes/Note", "")
	// Two graphql-sse single connection mode streams, and an operation
	// on the second.
	var tok []byte
	for range 2 {
		put := open(ulla, "PUT", "/api/graphql/acme/notes", "")
		var err error
		if tok, err = io.ReadAll(put.Body); err != nil || put.StatusCode != http.StatusCreated {
			t.Fatalf("PUT: %d %s %v", put.StatusCode, tok, err)
		}
		must(200, ulla, "GET", "/api/graphql/acme/notes", "", "Accept", "text/event-stream", "X-GraphQL-Event-Stream-Token", string(tok))
	}
	must(202, ulla, "POST", "/api/graphql/acme/notes", `{"query":"subscription { Note_added { _id text } }","extensions":{"operationId":"n"}}`,
		"Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", string(tok))
	must(200, ulla, "GET", "/api/info", "")
	must(200, ulla, "GET", "/api/db/acme/notes", "")
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestRequestsInFlightAreBoundedPerProcess: users, each under its own
// bound, hold at most max_requests_in_flight requests in flight
// together. Each signed-in user held its own max_requests_per_user, so
// a replica's stalled requests were bounded only by its users (any
// number, with a sign-up or a JWT issuer) and its connections. With
// max_requests_per_user 20 and max_requests_in_flight 30, two users hold
// 15 stalled requests each on one HTTP/2 connection granting no window;
// a third user's requests there, and on another connection, are
// answered 503 with Retry-After, naming the setting; the super user is
// served. Refusals left unsent are bounded for all users together (16,
// processRefusals): of 24 more requests of the three users, none past
// its own 16 refusals, 12 are answered 503 and 12 reset. Once the
// stalled connection is gone the third user is served.
func TestRequestsInFlightAreBoundedPerProcess(t *testing.T) {
	t.Parallel()
	const bound, each = 30, 15
	d, cert := startTLS(t, func(c *config.Config) {
		c.MaxRequestsPerUser = 20
		c.MaxRequestsInFlight = bound
		c.WriteTimeout = 10 * time.Minute
	})
	var dials atomic.Int64
	client := tlsClient(cert, &dials)
	do := requester(t, client, "https://"+d.Addr())
	users := []string{"ann", "ben", "cy"}
	authz := map[string]string{}
	for _, u := range users {
		if resp, body := do(dt.Admin(), "POST", "/api/users", fmt.Sprintf(`{"name":%q,"organization":"admin","password":"%s-password"}`, u, u)); resp.StatusCode != http.StatusCreated {
			t.Fatalf("create user %s: %d %s", u, resp.StatusCode, body)
		}
		authz[u] = basicAuthorization(u, u+"-password")
	}

	h2 := dialStalled(t, d, cert)
	// The first is answered before the others are sent: a connection
	// that never carried an authenticated request has 16 requests in
	// flight (TestAnonymousHTTP2ConnectionHoldsFewRequests).
	h2.send(0, authz["ann"])
	if statuses, _ := h2.answer(0, 1); statuses["200"] != 1 {
		t.Fatalf("the first request: %v", statuses)
	}
	for i := 1; i < bound; i++ {
		h2.send(i, authz[users[i/each]])
	}
	if statuses, reset := h2.answer(1, bound); statuses["200"] != bound-1 || reset != 0 {
		t.Fatalf("of %d more stalled requests of ann and ben, %v answered and %d reset; want every one 200", bound-1, statuses, reset)
	}
	const first = bound + 4
	for i := bound; i < first; i++ {
		h2.send(i, authz["cy"])
	}
	if statuses, reset := h2.answer(bound, first); statuses["503"] != 4 || reset != 0 {
		t.Errorf("of 4 stalled requests of cy, %v answered and %d reset; want 4 503", statuses, reset)
	}

	// Cy's request on another connection is refused and says why.
	resp, body := do(dt.Basic("cy", "cy-password"), "GET", "/api/info", "")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "max_requests_in_flight") {
		t.Errorf("cy's request: %d, Retry-After %q, %s; want 503 with Retry-After, naming max_requests_in_flight", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, body := do(dt.Admin(), "GET", "/api/info", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("the super user's request: %d %s", resp.StatusCode, body)
	}

	// Refusals left unsent are bounded for every user together. (The
	// refusal just read is counted out once sent, which its client may
	// see first.)
	eventually.Nil(t, 10*time.Second, "the refusal read counted out", func() error {
		_, metrics := do(dt.Admin(), "GET", "/metrics", "")
		if n := dt.MetricValue(metrics, "sluice_http_user_requests_refusals_in_flight"); n != 4 {
			return fmt.Errorf("%.0f refusals in flight, want the 4 unsent", n)
		}
		return nil
	})
	const more = 24
	for i := first; i < first+more; i++ {
		h2.send(i, authz[users[i%len(users)]])
	}
	statuses, reset := h2.answer(first, first+more)
	if len(statuses) != 1 || statuses["503"] != 12 || reset != 12 {
		t.Errorf("of %d more stalled requests of three users, %v answered and %d reset; want 12 503 and 12 reset", more, statuses, reset)
	}
	_, metrics := do(dt.Admin(), "GET", "/metrics", "")
	if n := dt.MetricValue(metrics, "sluice_http_user_requests_in_flight"); n != bound {
		t.Errorf("sluice_http_user_requests_in_flight is %.0f, want %d", n, bound)
	}
	if n := dt.MetricValue(metrics, "sluice_http_user_requests_aborted_total"); int(n) != reset {
		t.Errorf("sluice_http_user_requests_aborted_total is %.0f, want %d", n, reset)
	}

	// The stalled connection gone, its handlers return and every user
	// is served again.
	_ = h2.conn.Close()
	eventually.Nil(t, 30*time.Second, "cy served once the stalled connection is closed", func() error {
		return served(client, "https://"+d.Addr(), "cy")
	})
}

// served returns nil when user's GET /api/info (its password is
// user-password) is answered 200; until a stalled connection's handlers
// have returned it may be refused, or reset past the refusals.
func served(client *http.Client, base, user string) error {
	req, err := http.NewRequest("GET", base+"/api/info", nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(user, user+"-password")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}

// stalledH2 is an HTTP/2 connection to a daemon that grants it no
// flow-control window: no answer's body can be sent, and each handler
// waits write_timeout.
type stalledH2 struct {
	t    *testing.T
	addr string
	conn *tls.Conn
	fr   *http2.Framer
}

// dialStalled opens a stalledH2 to d, closed when the test ends.
func dialStalled(t *testing.T, d *dt.Daemon, cert dt.Certificate) *stalledH2 {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", d.Addr(), &tls.Config{RootCAs: cert.Pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	return &stalledH2{t: t, addr: d.Addr(), conn: conn, fr: fr}
}

// basicAuthorization is the Authorization header of user and password.
func basicAuthorization(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// send sends request i, GET /api/info with the Authorization header
// authz, on stream 2i+1.
func (h *stalledH2) send(i int, authz string) {
	t := h.t
	t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", h.addr}, {":path", "/api/info"}, {"authorization", authz}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// answer waits for the stream requests from, up to to, to be answered
// (their headers; their bodies wait for a window) or reset, and returns
// how many were answered with each status, and how many reset.
func (h *stalledH2) answer(from, to int) (map[string]int, int) {
	t := h.t
	t.Helper()
	statuses, reset := map[string]int{}, 0
	for n := from; n < to; {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %v answered and %d reset: %v", statuses, reset, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := h.fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.MetaHeadersFrame:
			statuses[f.PseudoValue("status")]++
			n++
		case *http2.RSTStreamFrame:
			reset++
			n++
		case *http2.GoAwayFrame:
			t.Fatalf("the server went away: %v", f.ErrCode)
		}
	}
	return statuses, reset
}

// requester returns a function that sends a request to base+path with
// client, authorized by auth, and returns its answer and body read whole.
func requester(t *testing.T, client *http.Client, base string) func(auth dt.Auth, method, path, body string) (*http.Response, string) {
	return func(auth dt.Auth, method, path, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		auth(req)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
}

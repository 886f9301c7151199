package gqltransport_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// wsConn is a graphql-transport-ws test client.
type wsConn struct {
	t  testing.TB
	c  *websocket.Conn
	tx context.Context
}

func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// dialWS opens a socket to path with the graphql-transport-ws
// subprotocol and the given upgrade headers.
func dialWS(t testing.TB, d *dt.Daemon, path string, header http.Header) (*wsConn, *http.Response, error) {
	t.Helper()
	return dialWSFrom(t, d, "", path, header)
}

// dialWSFrom is dialWS from the local address from (such as 127.0.0.2,
// another client address to the daemon on 127.0.0.1); "": any.
func dialWSFrom(t testing.TB, d *dt.Daemon, from, path string, header http.Header) (*wsConn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	opts := &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: header}
	if from != "" {
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		tr := &http.Transport{DialContext: dialer.DialContext}
		t.Cleanup(tr.CloseIdleConnections)
		opts.HTTPClient = &http.Client{Transport: tr}
	}
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+path, opts)
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	return &wsConn{t: t, c: c, tx: ctx}, resp, nil
}

// lasting gives the socket's reads and writes d in all from now, in place
// of wait from its dial: for tests whose whole exchange (hundreds of
// megabytes) can take longer than wait on a loaded machine. The socket
// outlives its dial's context (the handshake is over).
func (c *wsConn) lasting(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	c.t.Cleanup(cancel)
	c.tx = ctx
}

// mustConnect opens a socket to admin/<db> and initialises it as the
// admin (credentials in the connection_init payload).
func mustConnect(t testing.TB, d *dt.Daemon, db string) *wsConn {
	t.Helper()
	c, _, err := dialWS(t, d, "/api/graphql/admin/"+db, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"connection_init","payload":{"Authorization":"` + basicAuth("admin", dt.AdminPassword) + `"}}`)
	c.expect(`{"type":"connection_ack"}`)
	return c
}

func (c *wsConn) send(msg string) {
	c.t.Helper()
	if err := c.c.Write(c.tx, websocket.MessageText, []byte(msg)); err != nil {
		c.t.Fatalf("send %s: %v", msg, err)
	}
}

// read returns the next message, skipping the server's pings.
func (c *wsConn) read() string {
	c.t.Helper()
	for {
		_, b, err := c.c.Read(c.tx)
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		if string(b) != `{"type":"ping"}` {
			return string(b)
		}
	}
}

func (c *wsConn) expect(want string) {
	c.t.Helper()
	if got := c.read(); got != want {
		c.t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// expectClose reads until the server closes the socket and checks the
// close code and reason.
func (c *wsConn) expectClose(code websocket.StatusCode, reason string) {
	c.t.Helper()
	for {
		_, b, err := c.c.Read(c.tx)
		if err == nil {
			continue // a message before the close, such as a ping
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			c.t.Fatalf("read: %v (after %s), want close %d", err, b, code)
		}
		if ce.Code != code || !strings.Contains(ce.Reason, reason) {
			c.t.Fatalf("closed with %d %q, want %d %q", ce.Code, ce.Reason, code, reason)
		}
		return
	}
}

// barrier runs a query on the socket: Sluice reads a socket's next
// message only once the operation before it is under way, so when the
// query answers, every subscription sent before it is registered.
func (c *wsConn) barrier(id string) {
	c.t.Helper()
	c.send(`{"id":"` + id + `","type":"subscribe","payload":{"query":"{ __typename }"}}`)
	c.expect(`{"id":"` + id + `","type":"next","payload":{"data":{"__typename":"Query"}}}`)
	c.expect(`{"id":"` + id + `","type":"complete"}`)
}

var positionRE = regexp.MustCompile(`"lastEventId":"([a-z0-9]+-[0-9]+-[0-9]+(?:-[0-9a-v]{8})?)"`)

// expectNext reads a next of operation id whose payload, with its
// position replaced by POS, is want; it returns the position.
func (c *wsConn) expectNext(id, want string) string {
	c.t.Helper()
	got := c.read()
	m := positionRE.FindStringSubmatch(got)
	if m == nil {
		c.t.Fatalf("no position in %s", got)
	}
	got = strings.Replace(got, m[1], "POS", 1)
	if w := `{"id":"` + id + `","type":"next","payload":` + want + `}`; got != w {
		c.t.Fatalf("got  %s\nwant %s", got, w)
	}
	return m[1]
}

func insertDog(t testing.TB, d *dt.Daemon, db, name string) {
	t.Helper()
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/"+db, `{"@type":"Dog","@id":"Dog/`+name+`","name":"`+name+`"}`)
}

// TestSocketMessages: the exact graphql-transport-ws messages of a
// subscription (with its position), a query, pings, completes from both
// sides, a validation error, and a resume with extensions.lastEventId.
func TestSocketMessages(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "wsmsg", "type Dog { name: String! }")
	c := mustConnect(t, d, "wsmsg")

	c.send(`{"type":"ping","payload":{"x":1}}`)
	c.expect(`{"type":"pong"}`)

	c.send(`{"id":"s1","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`)
	c.barrier("b1")
	insertDog(t, d, "wsmsg", "a")
	pos := c.expectNext("s1", `{"data":{"Dog_added":{"name":"a"}},"extensions":{"lastEventId":"POS"}}`)

	// The client completes: nothing more for s1, and the id is free again.
	// (The barrier: the socket has read the complete before "b" is
	// written; a change the server commits before it reads the complete
	// is still owed to s1.)
	c.send(`{"id":"s1","type":"complete"}`)
	c.barrier("b0")
	insertDog(t, d, "wsmsg", "b")
	c.send(`{"id":"s1","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }","extensions":{"lastEventId":"` + pos + `"}}}`)
	c.expectNext("s1", `{"data":{"Dog_added":{"name":"b"}},"extensions":{"lastEventId":"POS"}}`)

	// A mutation on the socket, then its event on the subscription.
	c.send(`{"id":"m1","type":"subscribe","payload":{"query":"mutation { _insertDocuments(json: \"{\\\"@type\\\":\\\"Dog\\\",\\\"name\\\":\\\"c\\\",\\\"@id\\\":\\\"Dog/c\\\"}\") }"}}`)
	got := []string{c.read(), c.read(), c.read()}
	want := map[string]bool{
		`{"id":"m1","type":"next","payload":{"data":{"_insertDocuments":["Dog/c"]}}}`: true,
		`{"id":"m1","type":"complete"}`:                                               true,
	}
	n := 0
	for _, g := range got {
		if want[withoutPosition(g)] {
			n++
		} else if !strings.HasPrefix(g, `{"id":"s1","type":"next","payload":{"data":{"Dog_added":{"name":"c"}}`) {
			t.Fatalf("unexpected message %s", g)
		}
	}
	if n != 2 {
		t.Fatalf("mutation messages %q", got)
	}

	// Validation errors are an error message, with no complete.
	c.send(`{"id":"v1","type":"subscribe","payload":{"query":"subscription { Cat_added { name } }"}}`)
	if got := c.read(); !strings.HasPrefix(got, `{"id":"v1","type":"error","payload":[{"message":"Cannot query field \"Cat_added\"`) {
		t.Fatalf("validation error %s", got)
	}
	// A position that does not parse too.
	c.send(`{"id":"v2","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }","extensions":{"lastEventId":"nope"}}}`)
	if got := c.read(); !strings.HasPrefix(got, `{"id":"v2","type":"error","payload":[{"message":"extensions.lastEventId: `) {
		t.Fatalf("bad position %s", got)
	}
	c.barrier("b2")

	// An id in use closes the socket.
	c.send(`{"id":"s1","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`)
	c.expectClose(4409, "Subscriber for s1 already exists")
}

// TestSocketProtocolErrors: the close codes of graphql-transport-ws and
// the HTTP errors of upgrades that cannot be served.
func TestSocketProtocolErrors(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "wserr", "type Dog { name: String! }")
	path := "/api/graphql/admin/wserr"
	open := func(header http.Header) *wsConn {
		c, _, err := dialWS(t, d, path, header)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Run("subscribe before connection_init", func(t *testing.T) {
		c := open(nil)
		c.send(`{"id":"1","type":"subscribe","payload":{"query":"{ __typename }"}}`)
		c.expectClose(4401, "Unauthorized")
	})
	t.Run("no credentials", func(t *testing.T) {
		c := open(nil)
		c.send(`{"type":"connection_init"}`)
		c.expectClose(4403, "Forbidden: authentication required")
	})
	t.Run("wrong password in connection_init", func(t *testing.T) {
		c := open(nil)
		c.send(`{"type":"connection_init","payload":{"headers":{"authorization":"` + basicAuth("admin", "wrong") + `"}}}`)
		c.expectClose(4403, "Forbidden: wrong user name or password")
	})
	t.Run("credentials of the upgrade request", func(t *testing.T) {
		c := open(http.Header{"Authorization": {basicAuth("admin", dt.AdminPassword)}})
		c.send(`{"type":"connection_init"}`)
		c.expect(`{"type":"connection_ack"}`)
		c.barrier("1")
		c.send(`{"type":"connection_init"}`)
		c.expectClose(4429, "Too many initialisation requests")
	})
	t.Run("invalid message", func(t *testing.T) {
		c := open(nil)
		c.send(`{"typ":"connection_init"}`)
		c.expectClose(4400, "Invalid message")
	})
	t.Run("unknown type", func(t *testing.T) {
		c := mustConnect(t, d, "wserr")
		c.send(`{"type":"start","id":"1"}`)
		c.expectClose(4400, "Invalid message: unknown type start")
	})
	t.Run("wrong credentials on the upgrade", func(t *testing.T) {
		_, resp, err := dialWS(t, d, path, http.Header{"Authorization": {basicAuth("admin", "wrong")}})
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Fatalf("upgrade with a wrong password: %v %v, want 401", err, resp)
		}
	})
	t.Run("no such database", func(t *testing.T) {
		c, _, err := dialWS(t, d, "/api/graphql/admin/nope", nil)
		if err != nil {
			t.Fatal(err)
		}
		c.send(`{"type":"connection_init","payload":{"Authorization":"` + basicAuth("admin", dt.AdminPassword) + `"}}`)
		c.expectClose(4403, "Forbidden: database admin/nope does not exist")
	})
	t.Run("legacy subprotocol", func(t *testing.T) {
		r := d.Do(t, dt.Admin(), "GET", path, nil, "Connection", "Upgrade", "Upgrade", "websocket",
			"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol", "graphql-ws")
		if r.Status != 400 || !strings.Contains(string(r.Body), "subprotocol graphql-transport-ws") {
			t.Fatalf("legacy subprotocol: %d %s", r.Status, r.Body)
		}
	})
	t.Run("a URL that does not speak WebSocket", func(t *testing.T) {
		r := d.Do(t, dt.Admin(), "GET", "/api/subscribe/admin/wserr/Dog", nil, "Connection", "Upgrade", "Upgrade", "websocket",
			"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol", "graphql-transport-ws")
		if r.Status != 400 || !strings.Contains(string(r.Body), "does not accept WebSocket upgrades") {
			t.Fatalf("upgrade of the REST stream: %d %s", r.Status, r.Body)
		}
	})
}

// TestSocketDistinctSubscriptions: the distinct subscriptions of one
// socket (other variables, another class) are evaluated from one change
// feed subscription, and each gets only its own events; one that
// completes leaves the others running.
func TestSocketDistinctSubscriptions(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "wsdist", "type Dog { name: String! } type Cat { name: String! }")
	c := mustConnect(t, d, "wsdist")
	dog := func(id, name string) {
		c.send(`{"id":"` + id + `","type":"subscribe","payload":{"query":"subscription($n: String!) { Dog_added(filter: {name: {eq: $n}}) { name } }","variables":{"n":"` + name + `"}}}`)
	}
	dog("a", "a")
	dog("b", "b")
	c.send(`{"id":"cat","type":"subscribe","payload":{"query":"subscription { Cat_added { name } }"}}`)
	c.barrier("b1")
	var subs []struct{ Transport string }
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/admin/subscriptions", nil).Body, &subs); err != nil {
		t.Fatal(err)
	}
	if len(subs) != 1 || subs[0].Transport != "graphql-ws" {
		t.Fatalf("change feed subscriptions for 3 distinct subscriptions of one socket: %+v", subs)
	}
	insertDog(t, d, "wsdist", "b")
	c.expectNext("b", `{"data":{"Dog_added":{"name":"b"}},"extensions":{"lastEventId":"POS"}}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/wsdist", `{"@type":"Cat","@id":"Cat/c","name":"c"}`)
	c.expectNext("cat", `{"data":{"Cat_added":{"name":"c"}},"extensions":{"lastEventId":"POS"}}`)
	c.send(`{"id":"b","type":"complete"}`)
	c.barrier("b2")
	insertDog(t, d, "wsdist", "bb")
	insertDog(t, d, "wsdist", "a")
	c.expectNext("a", `{"data":{"Dog_added":{"name":"a"}},"extensions":{"lastEventId":"POS"}}`)
}

// TestSocketAccessChange: revoking the subscriber's role ends its
// subscription with an error message before any later commit reaches it,
// then closes the socket (4403): it no longer holds a place among the
// streams, and its user no longer may read the database.
func TestSocketAccessChange(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "wsrev", "type Dog { name: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/wsrev", `{"user":"rita","role":"read"}`)
	c, _, err := dialWS(t, d, "/api/graphql/admin/wsrev", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"connection_init","payload":{"Authorization":"` + basicAuth("rita", "rita-password") + `"}}`)
	c.expect(`{"type":"connection_ack"}`)
	c.send(`{"id":"s","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`)
	c.barrier("b")
	insertDog(t, d, "wsrev", "a")
	c.expectNext("s", `{"data":{"Dog_added":{"name":"a"}},"extensions":{"lastEventId":"POS"}}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/wsrev", `{"user":"rita","role":"none"}`)
	insertDog(t, d, "wsrev", "b")
	c.expect(`{"id":"s","type":"error","payload":[{"message":"the access of rita to admin/wsrev was revoked","extensions":{"code":"FORBIDDEN"}}]}`)
	c.expectClose(4403, "Forbidden: the access of rita to admin/wsrev was revoked")
}

// TestSocketCaps: an acknowledged socket and each of its subscriptions
// count in the stream caps; a subscription past max_streams_per_user is
// an error message, the others go on; a socket past it is closed at
// connection_init (1013, naming the setting), and closing one admits
// another.
func TestSocketCaps(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxStreamsPerUser = 3 })
	d.CreateDatabase(t, "wscap", "type Dog { name: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/wscap", `{"user":"rita","role":"read"}`)
	c, _, err := dialWS(t, d, "/api/graphql/admin/wscap", http.Header{"Authorization": {basicAuth("rita", "rita-password")}})
	if err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"connection_init"}`)
	c.expect(`{"type":"connection_ack"}`)
	for _, id := range []string{"1", "2"} {
		c.send(`{"id":"` + id + `","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`)
	}
	c.send(`{"id":"3","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`)
	if got := c.read(); !strings.HasPrefix(got, `{"id":"3","type":"error","payload":[{"message":"user rita holds its maximum of 3 open streams`) ||
		!strings.Contains(got, `"code":"TOO_MANY_REQUESTS"`) {
		t.Fatalf("third subscription: %s", got)
	}
	insertDog(t, d, "wscap", "a")
	seen := map[string]bool{}
	for range 2 {
		var m struct{ ID string }
		if err := json.Unmarshal([]byte(c.read()), &m); err != nil {
			t.Fatal(err)
		}
		seen[m.ID] = true
	}
	if !seen["1"] || !seen["2"] {
		t.Fatalf("events for %v, want 1 and 2", seen)
	}
	// Another socket of rita's is past the cap; once the first is closed,
	// one is admitted (the first's places are given back as its
	// goroutines end: tried until a deadline).
	init := func() (*wsConn, websocket.CloseError) {
		s, _, err := dialWS(t, d, "/api/graphql/admin/wscap", nil)
		if err != nil {
			t.Fatal(err)
		}
		s.send(`{"type":"connection_init","payload":{"Authorization":"` + basicAuth("rita", "rita-password") + `"}}`)
		_, b, err := s.c.Read(s.tx)
		var ce websocket.CloseError
		if err == nil && string(b) == `{"type":"connection_ack"}` {
			return s, ce
		}
		if !errors.As(err, &ce) {
			t.Fatalf("connection_init past the cap: %s %v", b, err)
		}
		return nil, ce
	}
	if s, ce := init(); s != nil || ce.Code != websocket.StatusTryAgainLater || !strings.Contains(ce.Reason, "max_streams_per_user") {
		t.Fatalf("a socket past the cap: admitted %v, closed %d %q", s != nil, ce.Code, ce.Reason)
	}
	_ = c.c.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, ce := init()
		if s != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket admitted after the first closed: %d %q", ce.Code, ce.Reason)
		}
	}
}

// TestSocketShutdown: on shutdown every subscription of a socket gets
// complete, then the socket closes with 1001, and the daemon's Run
// returns with no socket goroutine left behind.
func TestSocketShutdown(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "wsstop", "type Dog { name: String! }")
	c := mustConnect(t, d, "wsstop")
	c.send(`{"id":"s","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`)
	c.barrier("b")
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		d.Stop(t)
	}()
	c.expect(`{"id":"s","type":"complete"}`)
	c.expectClose(websocket.StatusGoingAway, "server shutting down")
	<-stopped
}

// TestSocketSlowReaderLosesNothing: a socket that stops reading falls
// behind its subscriptions' share (the connection's pump blocks on it, the
// share detaches it, it reads the log on its own); once it reads again it
// gets every event, once, in order.
func TestSocketSlowReaderLosesNothing(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "slow", "type Dog { name: String! }")
	c := mustConnect(t, d, "slow")
	// Another socket with the same subscription keeps the share going.
	fast := mustConnect(t, d, "slow")
	for _, w := range []*wsConn{c, fast} {
		w.send(`{"id":"s","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`)
		w.barrier("b")
	}
	const commits, perCommit = 20, 100
	pad := strings.Repeat("x", 4000)
	go func() {
		for i := range commits {
			var docs []string
			for j := range perCommit {
				docs = append(docs, fmt.Sprintf(`{"@type":"Dog","name":"%05d-%s"}`, i*perCommit+j, pad))
			}
			d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/slow", "["+strings.Join(docs, ",")+"]")
		}
	}()
	check := func(w *wsConn) {
		for i := range commits * perCommit {
			msg := w.read()
			want := fmt.Sprintf(`"name":"%05d-`, i)
			if !strings.Contains(msg, want) {
				t.Fatalf("event %d: %.120s", i, msg)
			}
		}
	}
	check(fast)
	check(c) // read only now: 8 MB behind
	if n := dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_stream_catchups_total"); n < 1 {
		t.Fatalf("%v catch-ups: the slow socket never fell out of its share", n)
	}
}

// TestSocketOrigins: a page may open a socket when it is of the server's
// own origin or listed in cors_origins, compared as CORS does (scheme,
// host and port); clients that send no Origin always may. With "*" a page
// of any origin may, but the credentials its browser adds to the upgrade
// by itself do not count: only connection_init's.
func TestSocketOrigins(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, dt.WithCORS("http://app.example"))
	d.CreateDatabase(t, "origins", "type Dog { name: String! }")
	path := "/api/graphql/admin/origins"
	for origin, want := range map[string]int{
		"http://app.example":      101,
		"http://APP.example:80":   101,
		d.URL:                     101, // the server's own
		"":                        101, // no page
		"https://app.example":     403,
		"ws://app.example":        403,
		"http://app.example:8080": 403,
		"http://evil.example":     403,
		"null":                    403,
	} {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		c, resp, err := dialWS(t, d, path, h)
		got := 0
		if resp != nil {
			got = resp.StatusCode
		}
		if got != want {
			t.Errorf("upgrade from origin %q: %d (%v), want %d", origin, got, err, want)
		}
		if c != nil {
			_ = c.c.CloseNow()
		}
	}

	e := dt.Start(t, dt.WithCORS("*"))
	e.CreateDatabase(t, "origins", "type Dog { name: String! }")
	admin := http.Header{"Authorization": {basicAuth("admin", dt.AdminPassword)}, "Origin": {"https://evil.example"}}
	c, _, err := dialWS(t, e, path, admin)
	if err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"connection_init"}`)
	c.expectClose(4403, "Forbidden: authentication required")
	c, _, err = dialWS(t, e, path, admin)
	if err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"connection_init","payload":{"Authorization":"` + basicAuth("admin", dt.AdminPassword) + `"}}`)
	c.expect(`{"type":"connection_ack"}`)
	c.barrier("1")
	own := http.Header{"Authorization": {basicAuth("admin", dt.AdminPassword)}, "Origin": {e.URL}}
	c, _, err = dialWS(t, e, path, own)
	if err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"connection_init"}`)
	c.expect(`{"type":"connection_ack"}`)
}

// TestSocketBeforeAcknowledgement: what a socket sends before
// connection_ack is read up to max_header_bytes (a larger connection_init
// closes it with 1009, read no further); after it, messages up to
// graphql_ws_max_message_bytes. At most max_unauthenticated_sockets wait
// for their connection_ack; past it an upgrade is answered 503 with
// Retry-After. Ambiguous credentials close the socket with 4400, and a
// stream ticket on an upgrade is a 400.
func TestSocketBeforeAcknowledgement(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) {
		c.MaxHeaderBytes, c.GraphQLWSMaxMessageBytes, c.MaxUnauthenticatedSockets = 4096, 16384, 2
	})
	d.CreateDatabase(t, "preack", "type Dog { name: String! }")
	path := "/api/graphql/admin/preack"
	auth := basicAuth("admin", dt.AdminPassword)

	big, _, err := dialWS(t, d, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	big.send(`{"type":"connection_init","payload":{"pad":"` + strings.Repeat("x", 5000) + `"}}`)
	big.expectClose(websocket.StatusMessageTooBig, "")

	// The closed socket's place among those waiting for connection_init
	// (its address's one) comes back once the server has ended it: dial
	// until it has.
	var c *wsConn
	eventually.True(t, wait, "the closed socket's place comes back", func() bool {
		w, _, err := dialWS(t, d, path, nil)
		c = w
		return err == nil
	})
	c.send(`{"type":"connection_init","payload":{"Authorization":"` + auth + `"}}`)
	c.expect(`{"type":"connection_ack"}`)
	// 8 KiB of query: past the pre-acknowledgement limit, within the other.
	c.send(`{"id":"1","type":"subscribe","payload":{"query":"{ __typename ` + strings.Repeat(" ", 8000) + `}"}}`)
	c.expect(`{"id":"1","type":"next","payload":{"data":{"__typename":"Query"}}}`)
	c.expect(`{"id":"1","type":"complete"}`)
	c.send(`{"id":"2","type":"subscribe","payload":{"query":"{ __typename ` + strings.Repeat(" ", 17000) + `}"}}`)
	c.expectClose(websocket.StatusMessageTooBig, "")

	// Two sockets waiting for connection_init, from two addresses (each
	// holds at most one, a tenth of 2 rounded up), hold the cap.
	var waiting []*wsConn
	for _, from := range []string{"127.0.0.1", "127.0.0.2"} {
		w, _, err := dialWSFrom(t, d, from, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, w)
	}
	_, resp, err := dialWSFrom(t, d, "127.0.0.3", path, nil)
	if err == nil || resp == nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third unacknowledged socket: %v %v, want 503 with Retry-After", err, resp)
	}
	waiting[0].send(`{"type":"connection_init","payload":{"Authorization":"` + auth + `"}}`)
	waiting[0].expect(`{"type":"connection_ack"}`)
	if _, _, err := dialWSFrom(t, d, "127.0.0.3", path, nil); err != nil {
		t.Fatalf("a socket once another was acknowledged: %v", err)
	}

	// Ambiguous credentials, on a daemon without the cap.
	e := dt.Start(t)
	e.CreateDatabase(t, "preack", "type Dog { name: String! }")
	for name, payload := range map[string]string{
		"two spellings":         `{"authorization":"` + auth + `","Authorization":"` + auth + `"}`,
		"at the top and nested": `{"Authorization":"` + auth + `","headers":{"authorization":"` + auth + `"}}`,
		"not a string":          `{"Authorization":42}`,
		"one spelling twice":    `{"Authorization":"` + auth + `","Authorization":"Basic eDp5"}`,
		"twice in headers":      `{"headers":{"Authorization":"Basic eDp5","Authorization":"` + auth + `"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			w, _, err := dialWS(t, e, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			w.send(`{"type":"connection_init","payload":` + payload + `}`)
			w.expectClose(4400, "Invalid message")
		})
	}

	_, resp, err = dialWS(t, d, path+"?ticket=sluice-st_x", nil)
	if err == nil || resp == nil || resp.StatusCode != 400 {
		t.Fatalf("an upgrade with a ticket: %v %v, want 400", err, resp)
	}
}

// TestPendingSocketsHaveAShareByAddress: one client address holds at
// most a tenth of max_unauthenticated_sockets' sockets waiting for
// connection_init, and an upgrade with valid credentials of its own is
// not one of them (found by review: 50 raw upgrades from one address, no
// credentials, held the whole cap of 50 and the super user's upgrade
// with its Basic header was answered 503; with the default 1,000 one
// address refused every WebSocket of the process, for good by renewing
// them every 10 s).
func TestPendingSocketsHaveAShareByAddress(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxUnauthenticatedSockets = 50 })
	d.CreateDatabase(t, "share", "type Dog { name: String! }")
	path := "/api/graphql/admin/share"
	refused := func(from string) bool {
		t.Helper()
		_, resp, err := dialWSFrom(t, d, from, path, nil)
		if err == nil {
			return false
		}
		if resp == nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("an upgrade from %s: %v %v, want 101 or 503 with Retry-After", from, err, resp)
		}
		return true
	}
	// 127.0.0.1 opens sockets until refused: its share, 5.
	held := 0
	for !refused("127.0.0.1") {
		if held++; held > 50 {
			t.Fatal("one address holds every place")
		}
	}
	if held != 5 {
		t.Fatalf("one address held %d sockets, want 5 (a tenth of 50)", held)
	}
	// Another address still gets its own.
	if refused("127.0.0.2") {
		t.Fatal("an anonymous upgrade from another address was refused")
	}
	// The super user's upgrade from the address holding its share, with
	// its credentials, is accepted, and so are as many again: it is not
	// counted among the anonymous ones.
	own := http.Header{"Authorization": {basicAuth("admin", dt.AdminPassword)}}
	for i := range 60 {
		c, resp, err := dialWSFrom(t, d, "127.0.0.1", path, own)
		if err != nil {
			t.Fatalf("authenticated upgrade %d: %v %v, want 101", i, err, resp)
		}
		if i == 0 {
			c.send(`{"type":"connection_init"}`)
			c.expect(`{"type":"connection_ack"}`)
		}
	}
}

// TestSocketReusedIDKeepsItsOperation: a client completes subscription x
// and subscribes x again at once; the first x's stream ends after that,
// and takes nothing of the second's: a third subscribe x is refused with
// 4409, and complete x would stop the second (found by review: the first
// one's end deleted whatever was under x, so the second could not be
// stopped, a third ran beside it and each commit came twice). Twenty
// sockets: the first stream's end comes after the second subscribe in
// most, not all.
func TestSocketReusedIDKeepsItsOperation(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "wsreuse", "type Dog { name: String! }")
	const sub = `{"id":"x","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`
	for i := range 20 {
		c := mustConnect(t, d, "wsreuse")
		c.send(sub)
		c.barrier("b1")
		c.send(`{"id":"x","type":"complete"}`)
		c.send(sub)
		c.barrier("b2")
		insertDog(t, d, "wsreuse", fmt.Sprint("d", i))
		// The second x is served: its event comes.
		if got := c.read(); !strings.HasPrefix(got, `{"id":"x","type":"next","payload":{"data":{"Dog_added":{"name":"d`+fmt.Sprint(i)+`"}}`) {
			t.Fatalf("socket %d: got %s, want the second x's event", i, got)
		}
		// So it still holds x: a third is refused, the query after it
		// never read.
		c.send(sub)
		c.send(`{"id":"b3","type":"subscribe","payload":{"query":"{ __typename }"}}`)
		for {
			_, b, err := c.c.Read(c.tx)
			if err != nil {
				if websocket.CloseStatus(err) != 4409 {
					t.Fatalf("socket %d: %v, want close 4409", i, err)
				}
				break
			}
			if strings.Contains(string(b), `"id":"b3"`) {
				t.Fatalf("socket %d: a third x was accepted (%s)", i, b)
			}
		}
	}
}

// TestCompletedQuerySendsNothing: a query the client completes while it
// runs sends nothing more for its id, which the client may already have
// given to a new operation: its cancelled result and its complete went
// out, and the client took that complete as the end of the new
// subscription, which went on running on the server.
func TestCompletedQuerySendsNothing(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "wsdone", "type Dog { name: String! }")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id int64
	if err := conn.QueryRow(ctx, "SELECT id FROM sluice.databases WHERE org = 'admin' AND name = 'wsdone'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	// The query waits for the Dog table, locked here, until it is
	// cancelled.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{fmt.Sprintf("sluice_db_%d", id), "Dog"}.Sanitize()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	c := mustConnect(t, d, "wsdone")
	c.send(`{"id":"q0","type":"subscribe","payload":{"query":"{ Dog { name } }"}}`)
	eventually.True(t, wait, "the query waits for the lock", func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND application_name = 'sluice' AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n > 0
	})
	c.send(`{"id":"q0","type":"complete"}`)
	c.send(`{"id":"q0","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`)
	c.barrier("b1") // the first message after the complete: nothing of the old q0
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	insertDog(t, d, "wsdone", "a")
	c.expectNext("q0", `{"data":{"Dog_added":{"name":"a"}},"extensions":{"lastEventId":"POS"}}`)
}

// TestCloseReasonIsUTF8: a close reason cut to fit its frame is cut on a
// character's boundary: cut inside one, it was not UTF-8, and browsers
// failed the connection (1006, 1007) instead of reporting 4400.
func TestCloseReasonIsUTF8(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "wsreason", "type Dog { name: String! }")
	c := mustConnect(t, d, "wsreason")
	c.send(`{"type":"x` + strings.Repeat("€", 40) + `"}`)
	for {
		_, _, err := c.c.Read(c.tx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4400 || !utf8.ValidString(ce.Reason) || !strings.Contains(ce.Reason, "unknown type") {
			t.Fatalf("closed with %v, want 4400 with a UTF-8 reason", err)
		}
		return
	}
}

package daemon_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgembed"
)

// TestPostgresOutage stops the Postgres server under a daemon with writes
// and streams running: every request answers 503 api:Unavailable with
// Retry-After, open streams end with an error telling the client to
// reconnect, /readyz answers 503; once Postgres is back the daemon serves
// again and a stream resumed from its last event id misses nothing. Every
// transport shows the outage the same way, through the one mapping from
// an error to what a client sees: code Unavailable (UNAVAILABLE), the same
// message, and never the driver's text.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	// A cluster of this test's own, since it is stopped; short path for
	// the socket.
	dir, err := os.MkdirTemp("", "sluice-outage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := pgembed.Options{DataDir: filepath.Join(dir, "pg")}
	ctx := context.Background()
	pg, err := pgembed.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop(context.Background()) }) //nolint:errcheck // replaced below
	d := dt.Start(t, dt.WithDatabaseURL(pg.URL("postgres")))
	d.CreateDatabase(t, "o", "type Note { text: String! }")

	gql := dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/o", Body: `{"query":"subscription { Note_added { _id } }"}`, Header: []string{"Accept", "text/event-stream"}}
	rest := dt.StreamRequest{Path: "/api/subscribe/admin/o/Note"}
	nd := gql
	nd.Header = []string{"Accept", "application/x-ndjson"}
	streams := []kindStream{{"graphql-sse", d.MustOpenStream(t, dt.Admin(), gql), "sse"}, {"rest", d.MustOpenStream(t, dt.Admin(), rest), "rest"},
		{"graphql-ndjson", d.MustOpenStream(t, dt.Admin(), nd), "ndjson"}}
	for _, k := range streams {
		k.s.Next()
	}
	ws := openOutageSocket(t, d, "o")
	ws.subscribe(t, "s", `subscription { Note_added { _id } }`)
	mp := openOutageMultipart(t, d, "/api/graphql/admin/o", `{"query":"subscription { Note_added { _id } }"}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/o", `{"@type":"Note","@id":"a","text":"before"}`)
	var last []string // each stream's last event id
	for _, k := range streams {
		f := k.s.Event()
		if !strings.Contains(f.String(), "Note/a") {
			t.Fatalf("%s: %q", k.name, f)
		}
		last = append(last, f.Field("id"))
	}
	if m := ws.read(t); !strings.Contains(m, "Note/a") {
		t.Fatalf("graphql-ws: %s", m)
	}

	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	expectEnd(t, streams, "", "UNAVAILABLE", "Unavailable", time.Now())
	for _, k := range streams {
		for _, f := range k.s.Ended() {
			noInternalText(t, k.name+" end", f.String())
		}
	}
	// graphql-ws ends the operation with an error message, multipart with
	// a part carrying the errors.
	if m := ws.read(t); !strings.HasPrefix(m, `{"id":"s","type":"error"`) || !strings.Contains(m, `"UNAVAILABLE"`) {
		t.Errorf("graphql-ws end: %s", m)
	} else {
		noInternalText(t, "graphql-ws end", m)
	}
	if end := mp.rest(t); !strings.Contains(end, `"UNAVAILABLE"`) {
		t.Errorf("multipart end: %s", end)
	} else {
		noInternalText(t, "multipart end", end)
	}
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/api/document/admin/o", `{"@type":"Note","@id":"lost","text":"during"}`},
		{"GET", "/api/document/admin/o?type=Note", ""},
		{"GET", "/api/subscribe/admin/o/Note", ""},
	} {
		var body any
		if req.body != "" {
			body = req.body
		}
		r := d.Do(t, dt.Admin(), req.method, req.path, body)
		var e struct {
			Error map[string]string `json:"api:error"`
		}
		_ = json.Unmarshal(r.Body, &e)
		if r.Status != 503 || e.Error["@type"] != "api:Unavailable" || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s during the outage: %d %v %s", req.method, req.path, r.Status, r.Header, r.Body)
		}
		noInternalText(t, req.method+" "+req.path, string(r.Body))
	}
	// The GraphQL transports: a query over HTTP, a subscription over SSE,
	// NDJSON and multipart, a graphql-ws socket opened before (closed),
	// and a socket opened during the outage.
	for _, req := range []struct{ name, body, accept string }{
		{"graphql over http", `{"query":"{ Note { _id } }"}`, "application/json"},
		{"graphql-sse", `{"query":"subscription { Note_added { _id } }"}`, "text/event-stream"},
		{"graphql-ndjson", `{"query":"subscription { Note_added { _id } }"}`, "application/x-ndjson"},
		{"graphql multipart", `{"query":"subscription { Note_added { _id } }"}`, "multipart/mixed;subscriptionSpec=1.0"},
	} {
		r := d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/o", req.body, "Accept", req.accept, "Content-Type", "application/json")
		if r.Status != 503 || !strings.Contains(string(r.Body), `"UNAVAILABLE"`) || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s during the outage: %d %v %s", req.name, r.Status, r.Header, r.Body)
		}
		noInternalText(t, req.name, string(r.Body))
	}
	// Credentials not checked before the outage cannot be checked now:
	// authentication answers 503 itself, in the shape of its route's
	// answers.
	unchecked := dt.Basic("admin", "not-checked-before")
	r := d.Do(t, unchecked, "POST", "/api/graphql/admin/o", `{"query":"{ Note { _id } }"}`, "Accept", "application/json", "Content-Type", "application/json")
	if code, _ := gqlRefusal(t, r, "application/json"); r.Status != 503 || code != "UNAVAILABLE" || r.Header.Get("Retry-After") == "" {
		t.Errorf("graphql over http with credentials not checked before the outage: %d %v %s", r.Status, r.Header, r.Body)
	}
	r = d.Do(t, unchecked, "GET", "/api/document/admin/o?type=Note", nil)
	if typ, _ := errBody(t, r); r.Status != 503 || typ != "api:Unavailable" || r.Header.Get("Retry-After") == "" {
		t.Errorf("REST with credentials not checked before the outage: %d %v %s", r.Status, r.Header, r.Body)
	}
	// The socket opened before closes once its subscription ended: it no
	// longer holds a place among the streams (1013, try again later).
	if code, reason := ws.closed(t); code != 1013 || !strings.Contains(reason, "unavailable") {
		t.Errorf("graphql-ws socket opened before the outage: closed %d %q, want 1013 (try again later)", code, reason)
	} else {
		noInternalText(t, "graphql-ws close", reason)
	}
	if code, reason := outageSocketRefused(t, d, "o"); code != 1013 || !strings.Contains(reason, "unavailable") {
		t.Errorf("graphql-ws socket during the outage: closed %d %q, want 1013 (try again later)", code, reason)
	} else {
		noInternalText(t, "graphql-ws close", reason)
	}
	waitReady(t, d, 503)

	if pg, err = pgembed.Start(ctx, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop(context.Background()) }) //nolint:errcheck
	waitReady(t, d, 200)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/o", `{"@type":"Note","@id":"b","text":"after"}`)
	for i, req := range []dt.StreamRequest{gql, rest} {
		req.Header = append(req.Header, "Last-Event-ID", last[i])
		s := d.MustOpenStream(t, dt.Admin(), req)
		s.Next()
		if f := s.Event(); !strings.Contains(f.String(), "Note/b") {
			t.Errorf("%s resumed after the outage: %q, want Note/b", streams[i].name, f)
		}
	}
}

// waitReady waits until /readyz answers status.
func waitReady(t *testing.T, d *dt.Daemon, status int) {
	t.Helper()
	eventually.True(t, 60*time.Second, fmt.Sprintf("/readyz answering %d", status), func() bool {
		r := d.Do(t, dt.NoAuth(), "GET", "/readyz", nil)
		if r.Status == 503 && status == 503 && r.Header.Get("Retry-After") == "" {
			t.Errorf("/readyz 503 without Retry-After")
		}
		return r.Status == status
	})
}

// noInternalText fails t when what a client was sent holds a driver's,
// Go's or Postgres' text, or calls the outage an internal error.
func noInternalText(t *testing.T, what, text string) {
	t.Helper()
	for _, leak := range []string{"postgres unavailable", "SQLSTATE", "dial ", "connect:", "conn closed", "pgx", "pgconn", "internal error", "INTERNAL_SERVER_ERROR", "InternalError"} {
		if strings.Contains(text, leak) {
			t.Errorf("%s: %q shows %q", what, text, leak)
		}
	}
}

// outageSocket is a graphql-ws connection of the outage test.
type outageSocket struct {
	c   *websocket.Conn
	ctx context.Context
}

// openOutageSocket opens and initialises a graphql-ws socket to admin/db
// as the admin.
func openOutageSocket(t *testing.T, d *dt.Daemon, db string) *outageSocket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+"/api/graphql/admin/"+db,
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	s := &outageSocket{c: c, ctx: ctx}
	s.send(t, `{"type":"connection_init","payload":{"Authorization":"Basic `+base64.StdEncoding.EncodeToString([]byte("admin:"+dt.AdminPassword))+`"}}`)
	if m := s.read(t); m != `{"type":"connection_ack"}` {
		t.Fatalf("graphql-ws: %s", m)
	}
	return s
}

func (s *outageSocket) send(t *testing.T, msg string) {
	t.Helper()
	if err := s.c.Write(s.ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// read returns the next message but the server's pings.
func (s *outageSocket) read(t *testing.T) string {
	t.Helper()
	for {
		_, b, err := s.c.Read(s.ctx)
		if err != nil {
			t.Fatalf("graphql-ws read: %v", err)
		}
		if string(b) != `{"type":"ping"}` {
			return string(b)
		}
	}
}

// closed reads until the socket closes and returns its close code and
// reason.
func (s *outageSocket) closed(t *testing.T) (websocket.StatusCode, string) {
	t.Helper()
	for {
		_, _, err := s.c.Read(s.ctx)
		if err == nil {
			continue // a ping, or an operation's last message
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("graphql-ws read: %v, want a close", err)
		}
		return ce.Code, ce.Reason
	}
}

// subscribe starts subscription id and returns once it is registered
// (the socket answers a query sent after it only then).
func (s *outageSocket) subscribe(t *testing.T, id, query string) {
	t.Helper()
	s.send(t, `{"id":"`+id+`","type":"subscribe","payload":{"query":"`+query+`"}}`)
	s.send(t, `{"id":"barrier","type":"subscribe","payload":{"query":"{ __typename }"}}`)
	for _, want := range []string{`{"id":"barrier","type":"next","payload":{"data":{"__typename":"Query"}}}`, `{"id":"barrier","type":"complete"}`} {
		if m := s.read(t); m != want {
			t.Fatalf("graphql-ws: %s, want %s", m, want)
		}
	}
}

// outageSocketRefused opens a socket and sends connection_init, and
// returns the close code and reason the server answers with.
func outageSocketRefused(t *testing.T, d *dt.Daemon, db string) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+"/api/graphql/admin/"+db,
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	// A password the daemon has not seen: checking it needs Postgres.
	msg := `{"type":"connection_init","payload":{"Authorization":"Basic ` + base64.StdEncoding.EncodeToString([]byte("admin:not-seen-before")) + `"}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	for {
		_, _, err := c.Read(ctx)
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Reason
		}
		if err != nil {
			t.Fatalf("graphql-ws: %v", err)
		}
	}
}

// outageMultipart is an Apollo multipart subscription of the outage test.
type outageMultipart struct {
	body io.ReadCloser
	seen []byte
}

// openOutageMultipart opens a multipart subscription with body at path as
// the admin, and returns once its first part (registered) arrived.
func openOutageMultipart(t *testing.T, d *dt.Daemon, path, body string) *outageMultipart {
	t.Helper()
	req, err := http.NewRequest("POST", d.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "multipart/mixed;subscriptionSpec=1.0")
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth("admin", dt.AdminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	m := &outageMultipart{body: resp.Body}
	buf := make([]byte, 4096)
	for !strings.Contains(string(m.seen), "{}") {
		n, err := resp.Body.Read(buf)
		m.seen = append(m.seen, buf[:n]...)
		if err != nil {
			t.Fatalf("multipart: %v after %q", err, m.seen)
		}
	}
	return m
}

// rest reads the response to its end and returns what came after the
// first part.
func (m *outageMultipart) rest(t *testing.T) string {
	t.Helper()
	b, err := io.ReadAll(m.body)
	if err != nil {
		t.Fatalf("multipart: %v", err)
	}
	return string(b)
}

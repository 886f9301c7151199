package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/internal/eventually"
)

// Clients that stop reading: each connects with a 4 KiB receive buffer,
// opens its stream and then reads nothing more, so that the daemon's
// writes of a large event to it block until write_timeout.

// dialStalled connects to addr with a 4 KiB receive buffer (set before
// the handshake, so the window the client offers stays small).
func dialStalled(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	return d.DialContext(ctx, "tcp", addr)
}

// sendBufferMax returns the most a TCP socket's send buffer holds
// (the third number of net.ipv4.tcp_wmem).
func sendBufferMax(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		t.Fatalf("tcp_wmem %q: %v", b, err)
	}
	return n
}

// unread returns how many bytes wait unread in conn's receive buffer.
func unread(t *testing.T, conn net.Conn) int {
	t.Helper()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if cerr := raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// stalledStream opens the REST change stream at path and reads it up to
// its readiness frame (the stream is registered then), and no further.
func stalledStream(t *testing.T, p *proc, path string) net.Conn {
	t.Helper()
	conn, err := dialStalled(t.Context(), p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: sluice\r\nAuthorization: Basic %s\r\n\r\n", path,
		base64.StdEncoding.EncodeToString([]byte("admin:secret-pw")))
	if err := conn.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Byte by byte, so that nothing after the frame is taken from the
	// socket's buffer.
	var got strings.Builder
	b := make([]byte, 1)
	connected := func() bool {
		_, after, found := strings.Cut(got.String(), ": connected")
		return found && strings.Contains(after, "\n\n")
	}
	for !connected() {
		if _, err := conn.Read(b); err != nil {
			t.Fatalf("stream %s: %v after %q", path, err, got.String())
		}
		got.WriteByte(b[0])
	}
	if !strings.HasPrefix(got.String(), "HTTP/1.1 200 ") {
		t.Fatalf("stream %s answered %q", path, got.String())
	}
	return conn
}

// stalledSocket opens a graphql-ws socket on the database at path and
// subscribes to query as operation "1", and returns once it is
// registered; read reads its next message. Once the caller stops calling
// read, the socket is not read any more.
func stalledSocket(t *testing.T, p *proc, path, query string) (conn func() net.Conn, read func() string) {
	t.Helper()
	var raw net.Conn
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		c, err := dialStalled(ctx, addr)
		raw = c
		return c, err
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, "ws://"+p.Addr+path, &websocket.DialOptions{HTTPClient: client, Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	ws.SetReadLimit(-1)
	read = func() string {
		t.Helper()
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("graphql-ws: %v", err)
			}
			if !strings.Contains(string(b), `"type":"ping"`) {
				return string(b)
			}
		}
	}
	send := func(msg string) {
		t.Helper()
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"type":"connection_init","payload":{"Authorization":"Basic ` + base64.StdEncoding.EncodeToString([]byte("admin:secret-pw")) + `"}}`)
	if m := read(); m != `{"type":"connection_ack"}` {
		t.Fatalf("graphql-ws: %s", m)
	}
	send(`{"type":"subscribe","id":"1","payload":{"query":` + fmt.Sprintf("%q", query) + `}}`)
	// A query sent after it is answered only once the subscription is
	// registered.
	send(`{"type":"subscribe","id":"barrier","payload":{"query":"{ __typename }"}}`)
	for _, want := range []string{`{"id":"barrier","type":"next","payload":{"data":{"__typename":"Query"}}}`, `{"id":"barrier","type":"complete"}`} {
		if m := read(); m != want {
			t.Fatalf("graphql-ws: %s, want %s", m, want)
		}
	}
	return func() net.Conn { return raw }, read
}

// TestStopCutsStreamsOfClientsThatDoNotRead: clients that stop reading
// (REST change streams, which are parked and then continue on goroutines
// of their own, and graphql-ws sockets) with large events owed hold up
// shutdown for shutdown_timeout, not write_timeout: once it runs out,
// their connections are closed, the log says how many, and Sluice exits
// 0 with its embedded Postgres stopped cleanly. (Their drain waited for
// each blocked write's write_timeout, here an hour.)
func TestStopCutsStreamsOfClientsThatDoNotRead(t *testing.T) {
	t.Parallel()
	// One document larger than a socket's send buffer ever grows
	// (tcp_wmem's maximum), by more than the kernel may take past it:
	// once the first bytes of its event reach a client, the daemon is
	// writing that event, which the socket cannot take whole, so its
	// write to that client blocks. Several documents of 512 KiB, as many
	// in all, did not make sure of that: on loopback a send buffer grows
	// to tcp_wmem's maximum (4 MiB took 2.9 MB of events), and when the
	// change feed had read only the first few documents by SIGTERM (a
	// loaded machine; what it has not read when it stops is not sent),
	// each REST stream wrote them and its end without blocking, and ended
	// before shutdown_timeout ran out, so the warning said writing=0.
	size := sendBufferMax(t) + 1<<20
	limits := []string{"SLUICE_MAX_BODY_BYTES=" + strconv.Itoa(2*size), "SLUICE_GRAPHQL_MAX_RESPONSE_BYTES=" + strconv.Itoa(2*size)}
	dataDir := filepath.Join(tempDir(t), "data")
	p, logs := startLogged(t, dataDir, append(limits, "SLUICE_SHUTDOWN_TIMEOUT=2s", "SLUICE_WRITE_TIMEOUT=1h")...)
	if code, body := p.do(t, "POST", "/api/db/admin/big", `{"schema":"type Doc { text: String! }"}`); code != 201 {
		t.Fatalf("create database: %d %s", code, body)
	}
	var clients []net.Conn
	for range 2 {
		clients = append(clients, stalledStream(t, p, "/api/subscribe/admin/big/Doc"))
	}
	var sockets []func() net.Conn
	var reads []func() string
	for range 2 {
		conn, read := stalledSocket(t, p, "/api/graphql/admin/big", "subscription { Doc_added { text } }")
		sockets, reads = append(sockets, conn), append(reads, read)
	}
	// A small document first, read by the sockets (graphql-ws reads
	// nothing more once a message stops being read).
	if code, body := p.do(t, "POST", "/api/document/admin/big", `{"@type":"Doc","text":"small"}`); code != 200 {
		t.Fatalf("insert: %d %s", code, body)
	}
	for _, read := range reads {
		if m := read(); !strings.Contains(m, `"small"`) {
			t.Fatalf("graphql-ws: %s", m)
		}
	}
	for _, conn := range sockets {
		clients = append(clients, conn())
	}
	// The small document's event is a few hundred bytes: more unread
	// is the large one's.
	text := strings.Repeat("x", size)
	if code, body := p.do(t, "POST", "/api/document/admin/big", `{"@type":"Doc","text":"`+text+`"}`); code != 200 {
		t.Fatalf("insert: %d %.200s", code, body)
	}
	eventually.True(t, time.Minute, "every client's receive buffer holds part of the large event", func() bool {
		for _, c := range clients {
			if unread(t, c) < 2<<10 {
				return false
			}
		}
		return true
	})

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := p.wait(t); err != nil {
		t.Fatalf("sluice exited with %v after SIGTERM", err)
	}
	t.Logf("stopped %v after SIGTERM", time.Since(stopped))
	// The warnings name what was cut: the two REST streams blocked
	// writing, and the two sockets.
	for _, want := range []string{"writing=2", "sockets=2"} {
		if !logs.has("shutdown_timeout ran out", want) {
			t.Errorf("no warning naming %s in the log:\n%s", want, logs.all())
		}
	}

	_, logs = startLogged(t, dataDir)
	checkCleanStart(t, logs)
}

// TestStopCancelsWebhookAttempts: shutdown stops the webhook deliverer
// as it begins, so an attempt in flight is cancelled at once (it was
// stopped only after the HTTP server's drain, up to shutdown_timeout
// later), and its event is delivered again by the next start, with the
// same webhook-id.
func TestStopCancelsWebhookAttempts(t *testing.T) {
	t.Parallel()
	type attempt struct {
		id        string
		cancelled chan struct{}
	}
	attempts := make(chan attempt, 10)
	answer := make(chan struct{}) // closed: the receiver answers 204
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read whole: only then does the server notice the client
		// leaving (the request's context ends).
		_, _ = io.Copy(io.Discard, r.Body)
		a := attempt{id: r.Header.Get("webhook-id"), cancelled: make(chan struct{})}
		attempts <- a
		select {
		case <-answer:
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
			close(a.cancelled)
		}
	}))
	defer receiver.Close()
	defer close(answer)

	dataDir := filepath.Join(tempDir(t), "data")
	// An attempt is not given up before the test's waits end.
	env := []string{"SLUICE_WEBHOOK_ALLOW_NETWORKS=127.0.0.1/32", "SLUICE_WEBHOOK_TIMEOUT=5m"}
	// The drain is held (up to an hour) by a write whose body is half
	// sent, read as it arrives (as past write_spool_bytes), without a
	// limit on its pauses.
	p, _ := startLogged(t, dataDir, append(env, "SLUICE_SHUTDOWN_TIMEOUT=1h", "SLUICE_WRITE_SPOOL_BYTES=0", "SLUICE_BODY_IDLE_TIMEOUT=0")...)
	if code, body := p.do(t, "POST", "/api/db/admin/hooked", `{"schema":"type Doc { text: String! }"}`); code != 201 {
		t.Fatalf("create database: %d %s", code, body)
	}
	if code, body := p.do(t, "POST", "/api/webhooks/admin/hooked", `{"url":"`+receiver.URL+`/hook"}`); code != 201 {
		t.Fatalf("create webhook: %d %s", code, body)
	}
	if code, body := p.do(t, "POST", "/api/document/admin/hooked", `{"@type":"Doc","text":"hooked"}`); code != 200 {
		t.Fatalf("insert: %d %s", code, body)
	}
	var first attempt
	select {
	case first = <-attempts:
	case <-time.After(time.Minute):
		t.Fatal("no webhook attempt within a minute")
	}
	send, answered := halfSentWrite(t, p, "/api/document/admin/hooked", "Doc")
	eventually.True(t, time.Minute, "the write's transaction is open", func() bool {
		return openTransactions(t, filepath.Join(dataDir, "pg")) > 0
	})

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.cancelled:
	case <-time.After(time.Minute):
		t.Fatal("the webhook attempt in flight was not cancelled within a minute of SIGTERM, while the drain waited")
	}
	send.Close() // the write, and the drain, end
	if err := <-answered; err != nil {
		t.Fatalf("the write in flight: %v", err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("sluice exited with %v after SIGTERM", err)
	}

	startLogged(t, dataDir, env...) // stopped when the test ends
	var again attempt
	select {
	case again = <-attempts:
	case <-time.After(time.Minute):
		t.Fatal("the cancelled attempt's event was not delivered again within a minute of the restart")
	}
	if again.id != first.id {
		t.Errorf("after the restart the webhook sent %s, want %s again", again.id, first.id)
	}
}

// halfSentWrite starts an NDJSON write of 300 documents of class to path
// (more than one chunk of 250, so that its transaction opens) and leaves
// its body open: closing send ends it, and answered then says how it was
// answered (nil: 200).
func halfSentWrite(t *testing.T, p *proc, path, class string) (send io.Closer, answered <-chan error) {
	t.Helper()
	body, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	req, _ := http.NewRequest("POST", p.url+path, body)
	req.SetBasicAuth("admin", "secret-pw")
	req.Header.Set("Content-Type", "application/x-ndjson")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("answered %d %s", resp.StatusCode, b)
			}
		}
		done <- err
	}()
	var docs strings.Builder
	for i := range 300 {
		fmt.Fprintf(&docs, `{"@type":%q,"@id":"half-%d","text":"sent before SIGTERM"}`+"\n", class, i)
	}
	if _, err := io.WriteString(w, docs.String()); err != nil {
		t.Fatal(err)
	}
	return w, done
}

package daemon_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestPipelinedStreamAfterAParkedOne: a client that sends a second
// stream's request on a connection behind a first stream's (HTTP/1.1
// pipelining) gets both, each parked in turn: when the first ends, its
// connection goes back to the server with the second request, already
// read from the socket, to be read first. That connection could not be
// parked again (it had no socket to hand over), and the second stream,
// its headers and readiness frame sent, had its connection closed.
func TestPipelinedStreamAfterAParkedOne(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "first", "type Note { text: String! }")
	d.CreateDatabase(t, "second", "type Note { text: String! }")
	conn, err := net.Dial("tcp", d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("admin:" + dt.AdminPassword))
	// One write: the second request reaches the server with the first.
	fmt.Fprintf(conn, "GET /api/subscribe/admin/first/Note HTTP/1.1\r\nHost: sluice\r\nAuthorization: Basic %s\r\n\r\n"+
		"GET /api/subscribe/admin/second/Note HTTP/1.1\r\nHost: sluice\r\nAuthorization: Basic %s\r\n\r\n", auth, auth)
	if err := conn.SetReadDeadline(time.Now().Add(parkWait)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	open := func(name string) *bufio.Reader {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("the %s stream: %v %v", name, resp, err)
		}
		body := bufio.NewReader(resp.Body)
		if line, err := body.ReadString('\n'); !strings.HasPrefix(line, ": connected") {
			t.Fatalf("the %s stream's first line: %q, %v", name, line, err)
		}
		return body
	}
	first := open("first")
	eventually.True(t, parkWait, "the first stream parked", func() bool { return parked(t, d) == 1 })
	// The first stream ends: its database is deleted.
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/db/admin/first", nil)
	if rest, err := io.ReadAll(first); err != nil {
		t.Fatalf("the first stream ended with %q, %v", rest, err)
	}
	second := open("second")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/second", `{"@type":"Note","text":"after"}`)
	var got strings.Builder
	for !strings.Contains(got.String(), `"after"`) {
		line, err := second.ReadString('\n')
		got.WriteString(line)
		if err != nil {
			t.Fatalf("the second stream, after %q: %v", got.String(), err)
		}
	}
	if n := parked(t, d); n != 1 {
		t.Fatalf("%v streams parked, want the second", n)
	}
}

// TestStopClosesParkedStreamsConnections: a parked stream that ends
// because the daemon stops sends its last frame and the end of its body,
// and then its connection is closed, as the HTTP server closes an idle
// keep-alive connection when it stops. It was given back to the HTTP
// server as a new connection, which the server's drain waits for (net/http
// takes a new connection for idle only once it has sent nothing for five
// seconds): a client that keeps its connections open between requests
// (a browser, Go's http.Transport) held every stop up to
// shutdown_timeout, which then logged that it timed out.
func TestStopClosesParkedStreamsConnections(t *testing.T) {
	t.Parallel()
	logs := logCapture{mu: new(sync.Mutex), recs: new([]slog.Record)}
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminPassword = dt.AdminPassword
	// Under the five seconds net/http waits for a new connection.
	cfg.ShutdownTimeout = 3 * time.Second
	cfg.DatabaseURL = pgtest.NewDatabase(t)
	d := daemon.New(cfg, slog.New(logs), daemon.Options{Version: "test", BcryptCost: 4})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Started():
	case err := <-done:
		t.Fatalf("daemon failed to start: %v", err)
	}
	td := &dt.Daemon{Daemon: d, URL: "http://" + d.Addr(), DatabaseURL: cfg.DatabaseURL}
	td.CreateDatabase(t, "s", "type Note { text: String! }")

	conn, err := net.Dial("tcp", d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/subscribe/admin/s/Note HTTP/1.1\r\nHost: sluice\r\nAuthorization: Basic %s\r\n\r\n",
		base64.StdEncoding.EncodeToString([]byte("admin:"+dt.AdminPassword)))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	body := bufio.NewReader(resp.Body)
	if line, _ := body.ReadString('\n'); !strings.HasPrefix(line, ": connected") {
		t.Fatalf("first line %q", line)
	}
	eventually.True(t, parkWait, "the stream parked", func() bool { return parked(t, td) == 1 })

	stop()
	rest, err := io.ReadAll(body)
	if err != nil || !strings.Contains(string(rest), ": server shutting down") {
		t.Fatalf("the stream ended with %q, %v; want its shutdown frame", rest, err)
	}
	// The client keeps its connection, sending nothing: the server
	// closes it.
	if err := conn.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the stream's end: read %d, %v; want the connection closed", n, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("daemon exited with %v", err)
	}
	if w := logs.find("http shutdown timed out"); len(w) > 0 {
		t.Fatalf("the stop timed out waiting for the connection of a parked stream that ended: %q", w[0].Message)
	}
}

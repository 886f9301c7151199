package gqltransport_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// dialSlowReader opens a socket to admin/<db> whose client reads little
// at a time (a small receive buffer and small segments, which keep the
// daemon's send buffer small too), and initialises it as the admin.
func dialSlowReader(t *testing.T, d *dt.Daemon, db string) *wsConn {
	t.Helper()
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			if err == nil {
				err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 536)
			}
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	tr := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 5*wait)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+"/api/graphql/admin/"+db,
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	w := &wsConn{t: t, c: c, tx: ctx}
	w.send(`{"type":"connection_init","payload":{"Authorization":"` + basicAuth("admin", dt.AdminPassword) + `"}}`)
	w.expect(`{"type":"connection_ack"}`)
	return w
}

// flushWaiting reports whether a goroutine of the process waits in an
// operation's flush for room in its connection's queue.
func flushWaiting() bool {
	buf := make([]byte, 64<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if strings.Contains(head, "[select") && strings.Contains(g, "gqltransport.(*muxOp).flush(") && strings.Contains(g, "gqltransport.(*muxOut).wait(") {
			return true
		}
	}
	return false
}

// TestSocketStoppedWhileWaitingForRoom: a subscription the client
// completes while it waits for room in the socket's queue (the client
// reads nothing, and the queue holds more than its bound) ends at once:
// its place among the streams and its place under
// graphql_ws_max_operations are given back, and a subscription sent next
// runs, while the client still reads nothing. Found by review: the
// completed subscription waited for room until the client read (or
// write_timeout cut the socket), holding both places, so a client at
// graphql_ws_max_operations that completed an operation could start no
// other. Not parallel: it looks for the waiting flush among the process's
// goroutines.
func TestSocketStoppedWhileWaitingForRoom(t *testing.T) {
	d := dt.Start(t, func(c *config.Config) {
		c.GraphQLWSMaxOperations = 1
		c.WriteTimeout = time.Hour // the client's reads, not a cut, free the queue
	})
	d.CreateDatabase(t, "wsroom", "type Person { name: String! }")
	c := dialSlowReader(t, d, "wsroom")
	subscribers := func() float64 {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_stream_subscribers", `transport="graphql-ws"`)
	}
	const sub = `"type":"subscribe","payload":{"query":"subscription { Person_added { name } }"}}`
	c.send(`{"id":"s",` + sub)
	eventually.True(t, wait, "the subscription is registered", func() bool { return subscribers() == 1 })
	// The writer takes the first commit's events and waits for the
	// client; the second's fill the queue past its bound, and the
	// subscription waits for room.
	pad := strings.Repeat("x", 4000)
	for i := range 2 {
		var docs []string
		for j := range 100 {
			docs = append(docs, fmt.Sprintf(`{"@type":"Person","@id":"Person/c%d-%d","name":"%s"}`, i, j, pad))
		}
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/wsroom", "["+strings.Join(docs, ",")+"]")
	}
	eventually.True(t, wait, "the subscription waits for room", flushWaiting)

	c.send(`{"id":"s","type":"complete"}`)
	eventually.True(t, wait, "the completed subscription gives its place back", func() bool { return subscribers() == 0 })
	// Its place under graphql_ws_max_operations (1) is free: the next
	// subscription runs.
	c.send(`{"id":"t",` + sub)
	eventually.True(t, wait, "the next subscription is registered", func() bool { return subscribers() == 1 })

	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/wsroom", `{"@type":"Person","@id":"Person/after","name":"after"}`)
	for {
		got := c.read()
		if strings.HasPrefix(got, `{"id":"t","type":"error"`) {
			t.Fatalf("the subscription sent after the complete: %.300s", got)
		}
		if strings.HasPrefix(got, `{"id":"t","type":"next","payload":{"data":{"Person_added":{"name":"after"}}`) {
			break
		}
	}
}

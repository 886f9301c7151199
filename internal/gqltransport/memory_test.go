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

	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// BenchmarkExtraSubscription measures what one more subscription on an
// open connection costs (graphql-ws, single connection mode): the heap
// and goroutine stack in use after a GC, over 2,000 subscriptions,
// reported per subscription. Identical subscriptions share their events
// (the common case: many clients watching one thing); distinct ones each
// have a share of their own, evaluated from the connection's one change
// feed subscription, either from one document with different variables
// (how client libraries subscribe to "this item") or from a document of
// their own (which the subscription holds parsed).
//
//	go test -run '^$' -bench ExtraSubscription -benchtime 1x ./internal/gqltransport/
func BenchmarkExtraSubscription(b *testing.B) {
	const n = 2000
	// Each kind runs on a daemon of its own: what the previous one tears
	// down in the background does not cloud the figure.
	start := func(b *testing.B) *dt.Daemon {
		d := dt.Start(b)
		d.CreateDatabase(b, "mem", "type Dog { name: String! }")
		return d
	}
	// payload returns the GraphQL request of subscription i of a kind.
	payload := func(kind string, i int) string {
		switch kind {
		case "variables":
			return fmt.Sprintf(`{"query":"subscription($n: String!) { Dog_added(filter: {name: {eq: $n}}) { name } }","variables":{"n":"d%d"}}`, i)
		case "documents":
			return fmt.Sprintf(`{"query":"subscription { Dog_added(filter: {name: {eq: \"d%d\"}}) { name } }"}`, i)
		}
		return `{"query":"subscription { Dog_added { name } }"}`
	}
	withID := func(p, key, id string) string {
		return p[:len(p)-1] + fmt.Sprintf(`,%q:%s}`, key, id)
	}
	measure := func(b *testing.B, open func(i int)) {
		open(-1) // the first one starts what later ones share
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC() // and what finalizers of the first freed
		runtime.ReadMemStats(&before)
		for i := range n {
			open(i)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heapB/sub")
		b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/n, "stackB/sub")
	}
	for _, kind := range []string{"identical", "variables", "documents"} {
		b.Run("graphql-ws/"+kind, func(b *testing.B) {
			d := start(b)
			for range b.N {
				c := mustConnect(b, d, "mem")
				measure(b, func(i int) {
					c.send(fmt.Sprintf(`{"id":"s%d","type":"subscribe","payload":%s}`, i, payload(kind, i)))
					if i%100 == 99 || i < 0 {
						c.barrier(fmt.Sprintf("b%d", i))
					}
				})
				_ = c.c.CloseNow()
			}
		})
		b.Run("single-connection/"+kind, func(b *testing.B) {
			d := start(b)
			for range b.N {
				tok := reserve(b, d, dt.Admin(), "mem")
				st := mustOpen(b, d, dt.Admin(), "GET", "/api/graphql/admin/mem", "", nil, "Accept", sse, "X-GraphQL-Event-Stream-Token", tok)
				st.connected()
				client := &http.Client{}
				measure(b, func(i int) {
					body := withID(payload(kind, i), "extensions", fmt.Sprintf(`{"operationId":"s%d"}`, i))
					req, _ := http.NewRequest("POST", d.URL+"/api/graphql/admin/mem", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-GraphQL-Event-Stream-Token", tok)
					req.SetBasicAuth("admin", dt.AdminPassword)
					resp, err := client.Do(req)
					if err != nil || resp.StatusCode != 202 {
						b.Fatalf("POST: %v %v", err, resp)
					}
					resp.Body.Close()
				})
				st.Close()
			}
		})
	}
}

// TestSocketThatDoesNotReadHoldsLittle: a socket sends 1,000 queries,
// each answered with about 200 KB, and reads nothing. Its queries run one
// at a time, each once the socket's queued messages are within 64 KiB,
// and the socket reads its next message only once the query before it
// has its turn. The heap grows by a few MB and the goroutines by a few
// (found by review: every query ran on a goroutine of its own and queued
// its whole result, and 1,500 took the heap from 3 to 346 MB; then up to
// graphql_ws_max_operations, 100, waited their turns, decoded). Not
// parallel: it measures the process's heap.
func TestSocketThatDoesNotReadHoldsLittle(t *testing.T) {
	const n = 1000
	d := dt.Start(t)
	d.CreateDatabase(t, "wsheap", "type Dog { name: String! }")
	var docs []string
	for i := range 200 {
		docs = append(docs, fmt.Sprintf(`{"@type":"Dog","@id":"Dog/d%d","name":"%s"}`, i, strings.Repeat("x", 1000)))
	}
	insert(t, d, "wsheap", "["+strings.Join(docs, ",")+"]")
	c := mustConnect(t, d, "wsheap")
	c.lasting(5 * time.Minute) // 200 MB to read back: minutes under load
	c.barrier("b")
	before := heapNow()

	sent := make(chan error, 1)
	go func() {
		for i := range n {
			msg := fmt.Sprintf(`{"id":"q%d","type":"subscribe","payload":{"query":"{ Dog { name } }"}}`, i)
			if err := c.c.Write(c.tx, websocket.MessageText, []byte(msg)); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	// Nothing announces that the daemon is done with what it read: wait
	// until each of the socket's goroutines waits for its queue (or the
	// reader for the query it read to have its turn).
	eventually.True(t, wait, "the socket's goroutines wait", func() bool {
		return socketWaits(true)
	})
	after := heapNow()
	t.Logf("%d queries on a socket that does not read: heap %d -> %d KiB, goroutines %d -> %d",
		n, before.heap>>10, after.heap>>10, before.goroutines, after.goroutines)
	if grew := after.heap - before.heap; grew > 12<<20 {
		t.Errorf("the heap grew by %d MiB, want a few", grew>>20)
	}
	if grew := after.goroutines - before.goroutines; grew > 10 {
		t.Errorf("%d more goroutines, want a few", grew)
	}
	if err := <-sent; err != nil {
		t.Fatalf("send the queries: %v", err)
	}

	// Read: every query is answered with its result.
	results := 0
	for results < n {
		m := c.read()
		switch {
		case strings.Contains(m, `"type":"next"`):
			results++
		case strings.Contains(m, `"type":"complete"`):
		default:
			t.Fatalf("unexpected message %.300s", m)
		}
	}
}

// socketWaits reports whether every goroutine of the process's graphql-ws
// sockets waits: an operation's for its queue (muxOut), a reader's for
// the next message or, holding a subscribe, for the operation before it
// to be under way (a select in socket.read itself). With reading set, a
// reader must be holding one: its client sent more than it has read.
func socketWaits(reading bool) bool {
	buf := make([]byte, 64<<20)
	waiting := false
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		op := strings.Contains(g, "gqltransport.(*socket).operation(")
		reader := strings.Contains(g, "gqltransport.(*socket).read(")
		inRead := reader && strings.Contains(g, "websocket.(*Conn).Read")
		holding := reader && !inRead && strings.Contains(head, "[select")
		waiting = waiting || holding
		if (op || reader) && !strings.Contains(g, "gqltransport.(*muxOut)") && !inRead && !holding {
			return false
		}
	}
	return waiting || !reading
}

type heapUse struct{ heap, goroutines int64 }

// heapNow returns the heap in use after a collection, and the goroutines.
func heapNow() heapUse {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heapUse{int64(ms.HeapAlloc), int64(runtime.NumGoroutine())}
}

// TestPingsBeforeAcknowledgementCostLittle: sockets not yet acknowledged
// send thousands of pings each and read nothing (their receive buffers
// small, as a client's that does not read soon are full). One pong waits
// for each, the others are dropped (found by review: every ping queued a
// pong until 64 KiB waited, and the writer held as much again, 200 to 285
// KiB a socket, 280 MB for max_unauthenticated_sockets' 1,000).
//
// What a socket holds is counted, not weighed: the heap moves by a few
// hundred KiB on its own on a busy machine, as much as the pongs of a few
// sockets, and what the pongs of the fault held depended on how far the
// daemon's writer lagged when the heap was read. Each pong the daemon
// holds for a socket, it sends once the client reads: the client, having
// pinged, sends connection_init and counts the pongs before
// connection_ack. They are those the socket's buffers took, at most about
// 120 KB (some 7,000 pongs: the client's small segments, TCP_MAXSEG, keep
// the daemon's send buffer small too; with loopback's defaults it takes
// 2.8 MB, every pong of a daemon whose writer keeps up), and those the
// daemon held: all 24,000 when it held every one. Not parallel: the
// sockets' readers are found among the process's goroutines.
func TestPingsBeforeAcknowledgementCostLittle(t *testing.T) {
	const sockets, pings = 2, 24000
	// The sockets hold off connection_init for as long as the pings take
	// (more than the default 10 s on a loaded machine).
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, GraphQLWSInitTimeout: time.Hour})
	d.CreateDatabase(t, "any", "type Dog { name: String! }")
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
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var conns []*websocket.Conn
	for range sockets {
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+"/api/graphql/admin/any",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		conns = append(conns, c)
	}
	errs := make(chan error, sockets)
	for _, c := range conns {
		go func() {
			var err error
			for i := 0; i < pings && err == nil; i++ {
				err = c.Write(ctx, websocket.MessageText, []byte(`{"type":"ping"}`))
			}
			errs <- err
		}()
	}
	for range sockets {
		if err := <-errs; err != nil {
			t.Fatalf("ping: %v", err)
		}
	}
	// Nothing announces that the daemon has read them: wait until every
	// socket's reader waits, for the network or for its queue.
	eventually.True(t, 5*time.Minute, "the sockets' readers wait", func() bool {
		buf := make([]byte, 64<<20)
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "gqltransport.(*socket).read(") && !strings.Contains(g, "[IO wait") && !strings.Contains(g, "gqltransport.(*muxOut)") {
				return false
			}
		}
		return true
	})
	for i, c := range conns {
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"connection_init","payload":{"Authorization":"`+basicAuth("admin", dt.AdminPassword)+`"}}`)); err != nil {
			t.Fatal(err)
		}
		pongs := 0
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("socket %d, after %d pongs: %v", i, pongs, err)
			}
			if string(b) == `{"type":"connection_ack"}` {
				break
			}
			if string(b) == `{"type":"pong"}` {
				pongs++
			}
		}
		t.Logf("socket %d: %d pings answered with %d pongs", i, pings, pongs)
		if pongs > pings/2 {
			t.Errorf("socket %d: %d pings answered with %d pongs before connection_ack: the daemon held the pongs its buffers did not take, want one", i, pings, pongs)
		}
	}
}

// TestDeepConnectionInitCostsLittle: a connection_init whose payload
// nests "headers" as deep as max_header_bytes (16 KiB) allows, sent
// before any credential, is refused for its missing credentials having
// cost little. Found by review: the check for members named twice
// followed every nested "headers", reading the rest of the text again at
// each of some 1,300 levels: each such message cost about 86 MB of
// garbage and a fifth of a second of a core, for anyone who can connect.
// What the daemon allocated while serving the sockets is counted, not
// weighed after a GC: the cost was garbage. Not parallel: the process's
// allocations are the daemon's and this test's alone.
func TestDeepConnectionInitCostsLittle(t *testing.T) {
	d := dt.Start(t)
	d.CreateDatabase(t, "deep", "type Dog { name: String! }")
	const prefix, suffix, level = `{"type":"connection_init","payload":`, `}`, `{"headers":}`
	n := (16<<10 - len(prefix) - len(suffix) - len(`{}`)) / len(level)
	msg := prefix + strings.Repeat(`{"headers":`, n) + `{}` + strings.Repeat(`}`, n) + suffix
	const sockets = 4
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range sockets {
		c, _, err := dialWS(t, d, "/api/graphql/admin/deep", nil)
		if err != nil {
			t.Fatal(err)
		}
		c.send(msg)
		c.expectClose(4403, "authentication required")
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d sockets sending a connection_init of %d bytes, %d levels deep: %d KiB allocated", sockets, len(msg), n, allocated>>10)
	if allocated > 16<<20 {
		t.Errorf("%d anonymous connection_init messages of %d bytes allocated %d MiB, want a few", sockets, len(msg), allocated>>20)
	}
	// Credentials under "headers" still count, and one that is no string
	// is still refused.
	c, _, err := dialWS(t, d, "/api/graphql/admin/deep", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"connection_init","payload":{"headers":{"Authorization":"` + basicAuth("admin", dt.AdminPassword) + `"}}}`)
	c.expect(`{"type":"connection_ack"}`)
	if c, _, err = dialWS(t, d, "/api/graphql/admin/deep", nil); err != nil {
		t.Fatal(err)
	}
	c.send(`{"type":"connection_init","payload":{"headers":{"authorization":null}}}`)
	c.expectClose(4400, "must be a string")
}

package stream

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// bigEvaluator gives each commit one event of size bytes.
type bigEvaluator struct{ size int }

func (e bigEvaluator) Events(_ context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	return []sluice.Event{{ID: fmt.Sprint(c.Seq), Data: []byte(strings.Repeat("x", e.size))}}, sluice.Position{Epoch: c.Epoch, Seq: c.Seq, Index: -1}, nil
}

// smallBuffers is a listener whose connections have a small send buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// endSink is benchSink that writes its end as a frame.
type endSink struct{ benchSink }

func (k *endSink) End(error) { k.out.Buf.WriteString("event: end\n\n") }

// slowClient is a parked stream of 2 KiB events (bigEvaluator) whose
// client stopped reading after its readiness frame, with small socket
// buffers both ways: its socket soon takes no more.
type slowClient struct {
	l    *memLog
	m    *metrics.Stream
	hub  *changefeed.Hub
	tl   *changefeed.Tailer
	s    *Server
	conn net.Conn
	st   *Stream // the parked stream
}

const slowEventSize = 2 << 10

// newSlowClient starts a server of one shared stream (with endSink when
// ends is set) and a client of it, parked.
func newSlowClient(t *testing.T, ends bool) *slowClient {
	c := &slowClient{l: &memLog{}, m: metrics.NewStream(prometheus.NewRegistry())}
	c.hub = changefeed.NewHub(c.l, changefeed.HubOptions{})
	c.tl = changefeed.NewTailer(c.l, c.hub, changefeed.TailerOptions{Poll: 10 * time.Millisecond, Metrics: c.m})
	ctx, cancel := context.WithCancel(context.Background())
	tailed := make(chan struct{})
	go func() { defer close(tailed); c.tl.Run(ctx) }()
	c.s = New(c.hub, Options{Workers: 1})
	if c.s.parker == nil {
		t.Skip("streams are not parked on this platform")
	}
	eventually.True(t, wait, "the tailer running", c.tl.Running)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl := httpstream.NewListener(smallBuffers{ln})
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			spec := Spec{Label: "slow", Database: testDB, Grant: benchGrant,
				Share: &ShareOptions{Key: "k", New: func() Evaluator { return bigEvaluator{slowEventSize} }, Frame: benchFrame}}
			var sink Sink = &benchSink{out: httpstream.New(w, r, "text/event-stream", 0)}
			if ends {
				sink = &endSink{benchSink{out: httpstream.New(w, r, "text/event-stream", 0)}}
			}
			c.s.Serve(r.Context(), spec, sink)
		}),
		BaseContext: func(net.Listener) context.Context { return httpstream.WithListener(context.Background(), hl) },
	}
	go srv.Serve(hl) //nolint:errcheck // Close ends it
	// A small receive buffer, set before the connection is made.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	c.conn, err = d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.conn.Close()
		srv.Close()
		cancel()
		<-tailed
		c.hub.Close()
		c.s.Close(context.Background())
	})
	fmt.Fprintf(c.conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// Up to the readiness frame, byte by byte; then the client reads
	// nothing more.
	var got strings.Builder
	b := make([]byte, 1)
	for !strings.HasSuffix(got.String(), ": connected\n\n\r\n") {
		if _, err := c.conn.Read(b); err != nil {
			t.Fatalf("after %q: %v", got.String(), err)
		}
		got.WriteByte(b[0])
	}
	eventually.True(t, wait, "the stream parked", func() bool {
		c.s.parker.mu.Lock()
		defer c.s.parker.mu.Unlock()
		for x := range c.s.parker.all {
			c.st = x
		}
		return c.st != nil
	})
	return c
}

// fillShare makes n commits, which the share's history holds while the
// stream is not told of them.
func (c *slowClient) fillShare(t *testing.T, n int) {
	c.st.m.setNotify(nil)
	for range n {
		c.l.add()
	}
	c.tl.Wake(testDB.ID)
	eventually.True(t, wait, "the commits handed to the hub", func() bool {
		var pm dto.Metric
		_ = c.m.Published.WithLabelValues("1").Write(&pm)
		return pm.GetCounter().GetValue() >= float64(n)
	})
	sh := c.st.m.s
	eventually.True(t, wait, "the share's history holds every commit", func() bool {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return len(sh.hist) == n
	})
}

// TestParkedSlowReaderTakesOnlyWhatItWrites: a parked stream whose socket
// stops taking its writes (a client that reads slowly, or not at all)
// takes no more of its share's history than the take it was writing,
// and continues on a goroutine of its own, whose writes wait for the
// client. It went on taking every entry its share held and copied them
// into what its socket had not taken, its own: a share's history (up to
// 64 KiB a member, 64 MiB in all) copied once per slow member, rather
// than shared.
func TestParkedSlowReaderTakesOnlyWhatItWrites(t *testing.T) {
	c := newSlowClient(t, false)
	const commits = 28
	c.fillShare(t, commits)
	st, sh := c.st, c.st.m.s
	sh.mu.Lock()
	from := st.m.pos
	sh.mu.Unlock()
	st.m.setNotify(st.kick)
	c.s.parker.mark(st)
	eventually.True(t, wait, "the stream left the parker", func() bool {
		c.s.parker.mu.Lock()
		defer c.s.parker.mu.Unlock()
		return c.s.parker.n == 0
	})
	// Its goroutine waits on the client to write what it took: it takes
	// nothing more.
	sh.mu.Lock()
	took := st.m.pos - from
	sh.mu.Unlock()
	if took > takeMax {
		t.Fatalf("the stream took %d entries of %d bytes, more than one take (%d), for a socket that did not take them", took, slowEventSize, takeMax)
	}
}

// TestParkedSlowReaderGetsItsEnd: a parked stream whose share ends
// (the server shuts down) while its socket takes no more writes sends its
// last events and its end once the client reads them, and then ends its
// body: its connection was closed with them unsent, and its client saw a
// body cut short instead of its stream's end.
func TestParkedSlowReaderGetsItsEnd(t *testing.T) {
	c := newSlowClient(t, true)
	const commits = 10 // one take: 20 KiB, more than the sockets hold
	c.fillShare(t, commits)
	sh := c.st.m.s
	c.hub.Close()
	eventually.True(t, wait, "the share ended", func() bool {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return sh.ended
	})
	c.st.m.setNotify(c.st.kick)
	c.s.parker.mark(c.st)
	// Read until the body's end: the connection then goes back to the
	// server (keep-alive), which does not close it.
	const last = "event: end\n\n\r\n0\r\n\r\n"
	_ = c.conn.SetReadDeadline(time.Now().Add(wait))
	var body []byte
	var err error
	for buf := make([]byte, 4<<10); err == nil && !strings.HasSuffix(string(body), last) && len(body) < 1<<20; {
		var n int
		n, err = c.conn.Read(buf)
		body = append(body, buf[:n]...)
	}
	got := string(body)
	if n := strings.Count(got, "data: "); n != commits || !strings.HasSuffix(got, last) {
		t.Fatalf("the client read %d events and a body ending %q (%v), want %d events, the end and the body's last chunk", n, got[max(len(got)-40, 0):], err, commits)
	}
}

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

// TestParkedSlowReaderTakesOnlyWhatItWrites: a parked stream whose socket
// stops taking its writes (a client that reads slowly, or not at all)
// takes no more of its share's history than the take it was writing,
// and continues on a goroutine of its own, whose writes wait for the
// client. It went on taking every entry its share held and copied them
// into what its socket had not taken, its own: a share's history (up to
// 64 KiB a member, 64 MiB in all) copied once per slow member, rather
// than shared.
func TestParkedSlowReaderTakesOnlyWhatItWrites(t *testing.T) {
	l := &memLog{}
	m := metrics.NewStream(prometheus.NewRegistry())
	hub := changefeed.NewHub(l, changefeed.HubOptions{})
	tl := changefeed.NewTailer(l, hub, changefeed.TailerOptions{Poll: 10 * time.Millisecond, Metrics: m})
	ctx, cancel := context.WithCancel(context.Background())
	tailed := make(chan struct{})
	go func() { defer close(tailed); tl.Run(ctx) }()
	s := New(hub, Options{Workers: 1})
	if s.parker == nil {
		t.Skip("streams are not parked on this platform")
	}
	eventually.True(t, wait, "the tailer running", tl.Running)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl := httpstream.NewListener(smallBuffers{ln})
	const size = 2 << 10
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			spec := Spec{Label: "slow", Database: testDB, Grant: benchGrant,
				Share: &ShareOptions{Key: "k", New: func() Evaluator { return bigEvaluator{size} }, Frame: benchFrame}}
			s.Serve(r.Context(), spec, &benchSink{out: httpstream.New(w, r, "text/event-stream", 0)})
		}),
		BaseContext: func(net.Listener) context.Context { return httpstream.WithListener(context.Background(), hl) },
	}
	go srv.Serve(hl) //nolint:errcheck // Close ends it
	// A small receive buffer, set before the connection is made.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	conn, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		conn.Close()
		srv.Close()
		cancel()
		<-tailed
		hub.Close()
		s.Close(context.Background())
	}()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// Up to the readiness frame, byte by byte; then the client reads
	// nothing more.
	var got strings.Builder
	b := make([]byte, 1)
	for !strings.HasSuffix(got.String(), ": connected\n\n\r\n") {
		if _, err := conn.Read(b); err != nil {
			t.Fatalf("after %q: %v", got.String(), err)
		}
		got.WriteByte(b[0])
	}
	var st *Stream
	eventually.True(t, wait, "the stream parked", func() bool {
		s.parker.mu.Lock()
		defer s.parker.mu.Unlock()
		for x := range s.parker.all {
			st = x
		}
		return st != nil
	})
	// Its share's history fills while it is not told (within the
	// share's bound for one member: 64 KiB), then it is.
	st.m.setNotify(nil)
	const commits = 28
	for range commits {
		l.add()
	}
	tl.Wake(testDB.ID)
	eventually.True(t, wait, "the commits handed to the hub", func() bool {
		var pm dto.Metric
		_ = m.Published.WithLabelValues("1").Write(&pm)
		return pm.GetCounter().GetValue() >= commits
	})
	sh := st.m.s
	eventually.True(t, wait, "the share's history holds every commit", func() bool {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return len(sh.hist) == commits
	})
	sh.mu.Lock()
	from := st.m.pos
	sh.mu.Unlock()
	st.m.setNotify(st.kick)
	s.parker.mark(st)
	eventually.True(t, wait, "the stream left the parker", func() bool {
		s.parker.mu.Lock()
		defer s.parker.mu.Unlock()
		return s.parker.n == 0
	})
	// Its goroutine waits on the client to write what it took: it takes
	// nothing more.
	sh.mu.Lock()
	took := st.m.pos - from
	sh.mu.Unlock()
	if took > takeMax {
		t.Fatalf("the stream took %d entries of %d bytes, more than one take (%d), for a socket that did not take them", took, size, takeMax)
	}
}

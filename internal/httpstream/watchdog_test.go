package httpstream

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// watched is a writer around a response that has a Watchdog, as the REST
// middleware's is.
type watched struct {
	http.ResponseWriter
	dog *Watchdog
}

func (w watched) Watchdog() *Watchdog         { return w.dog }
func (w watched) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// h2Server serves handler over TLS and HTTP/2. With watch, each response
// is written through a writer that has a Watchdog of timeout (stopped
// when handler returns), as behind the REST middleware; without, the
// Writer sets and clears the deadline itself.
func h2Server(t *testing.T, watch bool, timeout time.Duration, handler func(w http.ResponseWriter, r *http.Request)) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("request over %s, want HTTP/2", r.Proto)
			return
		}
		if watch {
			dog := NewWatchdog(w, timeout)
			defer dog.Stop()
			w = watched{w, dog}
		}
		handler(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// stalledClient opens a connection to srv that grants no flow-control
// window to the server's answers and asks for path on stream 1.
func stalledClient(t *testing.T, srv *httptest.Server, path string) *http2.Framer {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	var hb strings.Builder
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", srv.Listener.Addr().String()}, {":path", path}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte(hb.String()), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	return fr
}

// TestHTTP2StalledFlushIsCut: over HTTP/2, a stream's flush that the
// client takes nothing of (it grants no window) fails once it has waited
// the write timeout, and the client's stream is reset; with a Watchdog,
// and without one (the deadline set and cleared around each flush).
func TestHTTP2StalledFlushIsCut(t *testing.T) {
	t.Parallel()
	for _, watch := range []bool{true, false} {
		t.Run(map[bool]string{true: "watchdog", false: "deadline"}[watch], func(t *testing.T) {
			t.Parallel()
			flushed := make(chan error, 1)
			srv := h2Server(t, watch, time.Second, func(w http.ResponseWriter, r *http.Request) {
				s := New(w, r, "text/event-stream", time.Second)
				if (s.dog != nil) != watch {
					t.Errorf("the Writer's watchdog: %v, want one: %v", s.dog, watch)
				}
				s.Start()
				s.Buf.WriteString(": connected\n\n")
				flushed <- s.Flush()
			})
			fr := stalledClient(t, srv, "/")
			reset := false
			for !reset {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("no reset of the stalled stream: %v", err)
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if !f.IsAck() {
						if err := fr.WriteSettingsAck(); err != nil {
							t.Fatal(err)
						}
					}
				case *http2.RSTStreamFrame:
					reset = f.StreamID == 1
				case *http2.DataFrame:
					t.Fatal("data sent without a window")
				}
			}
			select {
			case err := <-flushed:
				if err == nil {
					t.Fatal("the stalled flush succeeded")
				}
			case <-time.After(time.Minute):
				t.Fatal("the stalled flush did not return")
			}
		})
	}
}

// TestHTTP2SteadyAndIdleStreamsAreNotCut: over HTTP/2, a stream that
// flushes events steadily for longer than the write timeout, and then
// stays quiet for longer than it, is not cut: the timeout bounds one
// write, not a response; with a Watchdog, and without one.
func TestHTTP2SteadyAndIdleStreamsAreNotCut(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	for _, watch := range []bool{true, false} {
		t.Run(map[bool]string{true: "watchdog", false: "deadline"}[watch], func(t *testing.T) {
			t.Parallel()
			sent := make(chan int, 1)
			// The late flush's error, read by the client before it
			// closes the stream: a client gone first (the test over)
			// would fail the flush, and the handler's t.Errorf would run
			// after the test (it did once).
			late := make(chan error, 1)
			srv := h2Server(t, watch, timeout, func(w http.ResponseWriter, r *http.Request) {
				s := New(w, r, "text/event-stream", timeout)
				s.Start()
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				n := 0
				for start := time.Now(); time.Since(start) < 2*timeout; n++ {
					<-tick.C
					s.Buf.WriteString("data: steady\n\n")
					if err := s.Flush(); err != nil {
						t.Errorf("a steady stream, after %s: %v", time.Since(start).Round(time.Millisecond), err)
						return
					}
				}
				sent <- n
				// Quiet for longer than the timeout. (The wait is for
				// time itself to pass.)
				<-time.After(2 * timeout)
				s.Buf.WriteString("data: late\n\n")
				late <- s.Flush()
			})
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var steady int
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				switch sc.Text() {
				case "data: steady":
					steady++
				case "data: late":
					if n := <-sent; steady != n {
						t.Errorf("%d steady events before the late one, want the %d sent", steady, n)
					}
					if err := <-late; err != nil {
						t.Errorf("a stream quiet for %s: %v", 2*timeout, err)
					}
					return
				}
			}
			t.Fatalf("the stream ended after %d steady events, before the late one: %v", steady, sc.Err())
		})
	}
}

// TestWatchdogStoppedWithTheHandler: a Watchdog whose timer fires while
// its handler returns never touches the response afterwards (over HTTP/2
// that panics, killing the server): many short responses, each watched
// with a timeout far shorter than its writes take.
func TestWatchdogStoppedWithTheHandler(t *testing.T) {
	t.Parallel()
	srv := h2Server(t, true, time.Microsecond, func(w http.ResponseWriter, r *http.Request) {
		s := New(w, r, "text/event-stream", time.Microsecond)
		s.Start()
		for range 3 {
			s.Buf.WriteString("data: x\n\n")
			if s.Flush() != nil {
				return
			}
		}
	})
	client := srv.Client()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				resp, err := client.Get(srv.URL)
				if err != nil {
					continue // reset by its watchdog, as expected
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

// blockingCut is a response whose SetWriteDeadline, the Watchdog's cut,
// waits for release.
type blockingCut struct {
	http.ResponseWriter
	entered, release chan struct{}
	returned         atomic.Bool
}

func (w *blockingCut) SetWriteDeadline(time.Time) error {
	close(w.entered) // a second cut panics
	<-w.release
	w.returned.Store(true)
	return nil
}

// TestWatchdogStopWaitsForACut: Stop returns only once a cut in progress
// has, so that the response is not touched after its handler returned.
func TestWatchdogStopWaitsForACut(t *testing.T) {
	t.Parallel()
	w := &blockingCut{ResponseWriter: httptest.NewRecorder(), entered: make(chan struct{}), release: make(chan struct{})}
	d := NewWatchdog(w, time.Millisecond)
	d.Begin() // a write that does not return
	select {
	case <-w.entered:
	case <-time.After(time.Minute):
		t.Fatal("a write in progress for the timeout was not cut")
	}
	stopped := make(chan bool)
	go func() {
		d.Stop()
		stopped <- w.returned.Load()
	}()
	select {
	case <-stopped:
		t.Fatal("Stop returned during the cut")
	case <-time.After(50 * time.Millisecond): // time for Stop to return, wrongly
	}
	close(w.release)
	if !<-stopped {
		t.Fatal("Stop returned before the cut did")
	}
}

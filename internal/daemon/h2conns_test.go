package daemon_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestAnonymousHTTP2StreamsCannotHoldEveryConnection: a client without
// credentials opens 400 HTTP/2 connections to a daemon of 400 open files,
// each granting the server no flow-control window and asking GET
// /api/info: the 401 cannot be sent, so each stream, and its connection
// with it, stays busy until write_timeout. A busy connection was never
// closed to make room, so these took every place and the super user's
// connection was closed at once. A connection that never carried an
// authenticated request is closed to make room, busy or not, as an idle
// one is: the address keeps its share (5 here) of the 400, and the super
// user is served.
func TestAnonymousHTTP2StreamsCannotHoldEveryConnection(t *testing.T) {
	t.Parallel()
	bin, err := dt.SluiceBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert := dt.WriteCertificate(t, t.TempDir(), 1)
	p := dt.StartProc(t, "/bin/sh", []string{"-c", `ulimit -n 400 && exec "$0" "$@"`, bin, "serve", "--listen", "127.0.0.1:0"},
		[]string{"SLUICE_DATABASE_URL=" + pgtest.NewDatabase(t), "SLUICE_ADMIN_PASSWORD=" + dt.AdminPassword,
			"SLUICE_TLS_CERT_FILE=" + cert.CertFile, "SLUICE_TLS_KEY_FILE=" + cert.KeyFile, "SLUICE_WRITE_TIMEOUT=10m"}, nil)

	var conns []net.Conn
	for range 400 {
		if c := stallAnonymousStream(t, p.Addr, cert); c != nil {
			conns = append(conns, c)
		}
	}
	var mu sync.Mutex
	held := 0
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			if stillOpen(c) {
				mu.Lock()
				held++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("of 400 anonymous HTTP/2 connections with a stalled 401, %d were served, %d still held", len(conns), held)
	if held > 5 {
		t.Errorf("one address holds %d anonymous connections, more than its 5", held)
	}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: cert.Pool}, ForceAttemptHTTP2: true, DisableKeepAlives: true}}
	req, _ := http.NewRequest("GET", "https://"+p.Addr+"/api/info", nil)
	req.SetBasicAuth("admin", dt.AdminPassword)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("the super user after one anonymous client stalled 400 HTTP/2 answers: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the super user's GET /api/info: %s", resp.Status)
	}
}

// stallAnonymousStream opens an HTTP/2 connection to addr that grants no
// window for the server's answers and asks GET /api/info on it without
// credentials, and returns it once the server answered its headers (the
// 401's body then waits for a window that never comes); nil when the
// connection was closed first. The connection is closed when the test
// ends.
func stallAnonymousStream(t *testing.T, addr string, cert dt.Certificate) net.Conn {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{RootCAs: cert.Pool, NextProtos: []string{"h2"}})
	if err != nil {
		return nil
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		return nil
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		return nil
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", addr}, {":path", "/api/info"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		return nil
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return nil
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					return nil
				}
			}
		case *http2.HeadersFrame:
			if f.StreamID == 1 {
				_ = conn.SetDeadline(time.Time{})
				return conn
			}
		case *http2.GoAwayFrame:
			return nil
		}
	}
}

// stillOpen reports whether the server holds c: reading it ends in a
// timeout (2 s), not in its end.
func stillOpen(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 1024)
	for {
		_, err := c.Read(buf)
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// TestAnonymousHTTP2ConnectionHoldsFewRequests: a client without
// credentials opens one HTTP/2 connection granting the server no
// flow-control window and asks GET /api/info on 100 streams at once. Each
// 401 waits, with its handler's goroutine and buffers (about 18 KB),
// until write_timeout: Go's 250 streams a connection held 4.4 MB of a
// client that never authenticated. At most 16 requests of such a
// connection are in flight; the others are reset unanswered at once, and
// their goroutines are gone.
func TestAnonymousHTTP2ConnectionHoldsFewRequests(t *testing.T) {
	t.Parallel()
	bin, err := dt.SluiceBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert := dt.WriteCertificate(t, t.TempDir(), 1)
	metricsAddr := freeAddr(t)
	p := dt.StartProc(t, bin, []string{"serve", "--listen", "127.0.0.1:0"},
		[]string{"SLUICE_DATABASE_URL=" + pgtest.NewDatabase(t), "SLUICE_ADMIN_PASSWORD=" + dt.AdminPassword,
			"SLUICE_TLS_CERT_FILE=" + cert.CertFile, "SLUICE_TLS_KEY_FILE=" + cert.KeyFile, "SLUICE_WRITE_TIMEOUT=10m",
			"SLUICE_METRICS_LISTEN=" + metricsAddr}, nil)
	before := scrape(t, metricsAddr)

	const streams = 100
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", p.Addr, &tls.Config{RootCAs: cert.Pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	for i := range streams {
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", p.Addr}, {":path", "/api/info"}} {
			if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
				t.Fatal(err)
			}
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Every stream is answered (its headers; its body waits for a
	// window) or reset.
	answered, reset := map[uint32]bool{}, map[uint32]bool{}
	for len(answered)+len(reset) < streams {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d streams answered and %d reset: %v", len(answered), len(reset), err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.HeadersFrame:
			answered[f.StreamID] = true
		case *http2.RSTStreamFrame:
			reset[f.StreamID] = true
		case *http2.GoAwayFrame:
			t.Fatalf("the server went away: %v", f.ErrCode)
		}
	}
	if len(answered) > 16 {
		t.Errorf("%d anonymous requests of one connection in flight, more than 16", len(answered))
	}
	// Besides the 16 requests: the connection's own (its reader, its
	// serve loop), and the handlers of reset streams as they return.
	var after string
	var goroutines float64
	eventually.Nil(t, 10*time.Second, "the goroutines of one anonymous HTTP/2 connection", func() error {
		after = scrape(t, metricsAddr)
		if goroutines = dt.MetricValue(after, "go_goroutines") - dt.MetricValue(before, "go_goroutines"); goroutines > 16+10 {
			return fmt.Errorf("one anonymous HTTP/2 connection holds %.0f goroutines", goroutines)
		}
		return nil
	})
	heap := dt.MetricValue(after, "go_memstats_heap_inuse_bytes") + dt.MetricValue(after, "go_memstats_stack_inuse_bytes") -
		dt.MetricValue(before, "go_memstats_heap_inuse_bytes") - dt.MetricValue(before, "go_memstats_stack_inuse_bytes")
	t.Logf("of %d anonymous streams granted no window, %d answered and held, %d reset; %+.0f goroutines, %+.0f KB of heap and stacks",
		streams, len(answered), len(reset), goroutines, heap/1000)
	if n := dt.MetricValue(after, "sluice_http_anonymous_requests_reset_total"); int(n) != len(reset) {
		t.Errorf("sluice_http_anonymous_requests_reset_total is %.0f, want %d", n, len(reset))
	}
}

// freeAddr returns a loopback address of a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape returns the metrics served at addr.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

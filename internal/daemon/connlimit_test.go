package daemon_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestAnonymousIdleConnectionsCannotTakeEveryDescriptor: a client without
// credentials sends one public request per connection (GET /api/ok) and
// keeps each connection idle, 400 of them, against a daemon of 400 open
// files. Unbounded, they took every descriptor and the super user could
// no longer connect. Bounded at accept, the address keeps a few (a tenth
// of the waiting connections the process holds: 5 here), its oldest
// closed as it opens more; the super user's requests, a health probe and a
// new stream go through; a stream opened before, busy, is not closed to
// make room and still delivers; and the daemon says it closed
// connections at their bounds, in its log and its metrics.
func TestAnonymousIdleConnectionsCannotTakeEveryDescriptor(t *testing.T) {
	t.Parallel()
	bin, err := dt.SluiceBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	warned := make(chan struct{})
	var once sync.Once
	p := dt.StartProc(t, "/bin/sh", []string{"-c", `ulimit -n 400 && exec "$0" "$@"`, bin, "serve", "--listen", "127.0.0.1:0"},
		[]string{"SLUICE_DATABASE_URL=" + pgtest.NewDatabase(t), "SLUICE_ADMIN_PASSWORD=" + dt.AdminPassword},
		func(line string) {
			if strings.Contains(line, "connections at their bounds") {
				once.Do(func() { close(warned) })
			}
		})
	d := dt.Remote("http://" + p.Addr)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/db/admin/conns", `{"schema":"type Note { text: String }"}`)
	before := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/conns/Note"})
	before.Next()

	// One anonymous client: 400 connections, one GET /api/ok each, then idle.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 400 {
		c, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("GET /api/ok HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: no answer (the server has no descriptor left?): %v", i, err)
		}
		resp.Body.Close()
	}

	// The connections closed to make room were closed before the next one
	// was served: each of those reads its end at once; those still held
	// read nothing until the deadline.
	var mu sync.Mutex
	held := 0
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err := c.Read(make([]byte, 1))
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				mu.Lock()
				held++
				mu.Unlock()
			} else if err != io.EOF && !errors.Is(err, net.ErrClosed) && !strings.Contains(fmtErr(err), "reset") {
				t.Errorf("an anonymous connection read %v", err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d of 400 anonymous connections still held", held)
	if held > 5 {
		t.Errorf("one address holds %d idle anonymous connections, more than its 5", held)
	}

	// The super user, on a new connection.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/api/info", "/healthz", "/readyz"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", d.URL+path, nil)
		if path == "/api/info" {
			req.SetBasicAuth("admin", dt.AdminPassword)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s after one anonymous client opened 400 connections: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
	}
	// The stream opened before delivers, and a new one opens.
	after := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/conns/Note"})
	after.Next()
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/conns", `{"@type":"Note","@id":"n1","text":"still here"}`)
	for _, s := range []*dt.Stream{before, after} {
		if f := s.Event(); !strings.Contains(f.String(), "still here") {
			t.Errorf("stream frame: %s", f)
		}
	}
	select {
	case <-warned:
	case <-time.After(10 * time.Second):
		t.Error("the daemon did not log that it closed connections at their bounds")
	}
	// Its metrics count them too.
	m := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
	if n := dt.MetricValue(m, "sluice_http_connections_evicted_total"); n < 400-5-10 {
		t.Errorf("sluice_http_connections_evicted_total = %v after one address's 400 idle connections", n)
	}
	if n := dt.MetricValue(m, "sluice_http_connections"); n < 3 {
		t.Errorf("sluice_http_connections = %v with two streams and a request open", n)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

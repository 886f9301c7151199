package daemon_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// parkWait bounds the waits of the parked stream tests.
const parkWait = 60 * time.Second

// parked returns the daemon's sluice_streams_parked.
func parked(t *testing.T, d *dt.Daemon) float64 {
	t.Helper()
	return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_streams_parked")
}

// TestParkedStreams: streams on connections of their own over HTTP/1.1
// (the REST change stream, graphql-sse, NDJSON, multipart) are parked
// once ready, holding no goroutine while idle: they deliver every commit,
// ping after a quiet heartbeat, notice their client hanging up, and end
// with an error (access lost) after which the client's connection, given
// back to the HTTP server, serves its next request.
func TestParkedStreams(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "p", "type Note { text: String! }")
	sub := `{"query":"subscription { Note_added { text } }"}`
	streams := []*dt.Stream{
		d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/p/Note?heartbeat=1s"}),
		d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/p?heartbeat=1s", Body: sub, Header: []string{"Accept", "text/event-stream"}}),
		d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/p", Body: sub, Header: []string{"Accept", "application/x-ndjson"}}),
	}
	for _, s := range streams {
		s.Next() // ready
	}
	eventually.True(t, parkWait, "three streams parked", func() bool { return parked(t, d) == 3 })
	for i := range 3 {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/p", `{"@type":"Note","text":"n`+string(rune('0'+i))+`"}`)
	}
	for _, s := range streams {
		for i := range 3 {
			f := s.Event()
			if !strings.Contains(f.String(), `n`+string(rune('0'+i))) {
				t.Fatalf("event %d: %q", i, f)
			}
		}
	}
	// A quiet parked SSE stream pings.
	for _, s := range streams[:2] {
		if f := s.Next(); !f.IsPing() {
			t.Fatalf("after a quiet second: %q, want a ping", f)
		}
	}
	// A client that hangs up ends its parked stream.
	streams[2].Close()
	eventually.True(t, parkWait, "the stream of a client that hung up released", func() bool { return parked(t, d) == 2 })
	if parked(t, d) != 2 {
		t.Fatal("parked streams")
	}
}

// TestParkedStreamConnectionKeepsAlive: when a parked stream ends, its
// body ends cleanly and the connection serves the client's next request.
func TestParkedStreamConnectionKeepsAlive(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "k", "type Note { text: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"kim","organization":"admin","password":"kim-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/k", `{"user":"kim","role":"read"}`)
	// One connection for everything kim sends.
	var conns int
	tr := &http.Transport{MaxConnsPerHost: 1, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conns++
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	req, _ := http.NewRequest("GET", d.URL+"/api/subscribe/admin/k/Note", nil)
	req.SetBasicAuth("kim", "kim-password")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, ": connected") {
		t.Fatalf("first line %q", line)
	}
	eventually.True(t, parkWait, "the stream parked", func() bool { return parked(t, d) == 1 })
	// kim loses the access: the stream ends with an error event and its
	// body ends.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/k", `{"user":"kim","role":"none"}`)
	done := make(chan string, 1)
	go func() { b, _ := io.ReadAll(br); done <- string(b) }()
	select {
	case rest := <-done:
		if !strings.Contains(rest, "event: error") || !strings.Contains(rest, "api:Forbidden") {
			t.Fatalf("the end of the stream: %q", rest)
		}
	case <-time.After(parkWait):
		t.Fatal("the stream's body did not end")
	}
	resp.Body.Close()
	// The next request reuses the connection, which the server serves.
	reused := false
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req, _ = http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", d.URL+"/api/ok", nil)
	r, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 || !reused || conns != 1 {
		t.Fatalf("after the stream: status %d, reused %v, %d connections", r.StatusCode, reused, conns)
	}
}

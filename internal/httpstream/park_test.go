package httpstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// parkedServer serves one parked response per request on a listener
// that takes connections back; each response's Writer is handed to the
// test through writers.
func parkedServer(t *testing.T) (addr string, writers chan *Writer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl := NewListener(ln)
	writers = make(chan *Writer, 1)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/ok" {
				_, _ = io.WriteString(w, "ok")
				return
			}
			s := New(w, r, "text/event-stream", time.Minute)
			s.Start()
			s.Buf.WriteString(": connected\n\n")
			if err := s.Flush(); err != nil {
				t.Error(err)
				return
			}
			if _, err := s.Park(); err != nil {
				t.Errorf("park: %v", err)
				return
			}
			writers <- s // the handler returns: the connection is the Writer's
		}),
		BaseContext: func(net.Listener) context.Context { return WithListener(context.Background(), hl) },
	}
	go srv.Serve(hl) //nolint:errcheck // Close ends it
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), writers
}

// A parked response writes its frames as chunks of the body net/http
// began, a socket that does not take a chunk whole keeps the rest
// (Blocked) and sends it first once unparked, and Close ends the body and
// gives the connection back: the client's next request is served on it.
func TestParkedResponse(t *testing.T) {
	if !parkSupported {
		t.Skip("responses are parked on Linux only")
	}
	addr, writers := parkedServer(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("response %v %v", resp, err)
	}
	s := <-writers
	// The client reads nothing: write until the socket refuses a chunk.
	frame := []byte("data: " + strings.Repeat("x", 4000) + "\n\n")
	var want strings.Builder
	want.WriteString(": connected\n\n")
	for i := 0; !s.Blocked(); i++ {
		if i > 100000 {
			t.Fatal("the socket took everything")
		}
		s.Buf.WriteString(fmt.Sprintf("id: %d\n", i))
		want.WriteString(fmt.Sprintf("id: %d\n", i))
		if err := s.WriteShared(frame); err != nil {
			t.Fatal(err)
		}
		want.Write(frame)
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// The rest goes once unparked, while the client reads.
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	if err := s.Unpark(); err != nil {
		t.Fatal(err)
	}
	s.Buf.WriteString("event: complete\ndata:\n\n")
	want.WriteString("event: complete\ndata:\n\n")
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	select {
	case b := <-got:
		if b != want.String() {
			t.Fatalf("the body differs from what was written: %d bytes, want %d", len(b), want.Len())
		}
	case <-time.After(time.Minute):
		t.Fatal("the body did not end")
	}
	// The connection went back to the server.
	fmt.Fprintf(conn, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the next request on the connection: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("the next request on the connection: %d %q", resp.StatusCode, b)
	}
}

// A response over HTTP/1.0 is not parked: its body is not chunked.
func TestParkNeedsHTTP11(t *testing.T) {
	r, _ := http.NewRequest("GET", "/", nil)
	r.ProtoMajor, r.ProtoMinor = 1, 0
	s := New(nil, r, "text/event-stream", 0)
	s.started = true
	if s.Parkable() {
		t.Fatal("an HTTP/1.0 response is parkable")
	}
}

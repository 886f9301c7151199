package httpstream

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestCloseAfterTimedOutBlockingWrite: a blocking (unparked) chunk write
// that times out part-way leaves the body with a truncated chunk; Close
// then closes the connection. It wrote the last chunk after the truncated
// one and gave the connection back as a clean keep-alive one: a client
// that resumed reading hung in a broken body instead of reconnecting.
func TestCloseAfterTimedOutBlockingWrite(t *testing.T) {
	srv, cli := net.Pipe()
	defer cli.Close()
	gaveBack := make(chan net.Conn, 1)
	s := &Writer{timeout: 50 * time.Millisecond,
		park: &parked{conn: srv, blocking: true, back: func(c net.Conn, _ []byte) { gaveBack <- c }}}
	// The client reads 100 bytes, then stops until the write failed.
	failed := make(chan struct{})
	got := make(chan []byte, 1)
	go func() {
		var all bytes.Buffer
		_, _ = io.CopyN(&all, cli, 100)
		<-failed
		b := make([]byte, 64)
		n, _ := io.ReadAtLeast(cli, b, 5) // resumes: reads what Close sends
		all.Write(b[:n])
		got <- all.Bytes()
	}()
	s.Buf.Write(bytes.Repeat([]byte("x"), 1000))
	err := s.Flush()
	if err == nil {
		t.Fatal("want the write to time out")
	}
	close(failed)
	s.Close()
	select {
	case <-gaveBack:
		b := <-got
		t.Fatalf("after a write that failed mid-chunk (%v), Close wrote the last chunk and gave the connection back as keep-alive; client saw %q...%q (%d bytes of a 1000-byte chunk)", err, b[:8], b[len(b)-7:], len(b))
	default:
	}
}

package httpstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Parking. A stream that is idle most of the time need not hold what
// net/http keeps for a connection while a handler runs: a goroutine (with
// its stack), a background reader, and about 10 KiB of buffers. Park takes
// the connection from net/http once the response's headers and readiness
// frame are sent; from then on the Writer writes the chunks of the body
// net/http began itself (HTTP/1.1 chunked transfer coding), straight to
// the socket, without blocking: whoever serves the stream then needs no
// goroutine while it waits (internal/stream parks it). A write the socket
// cannot take whole (a slow reader) keeps what is left (Blocked), and the
// stream continues on a goroutine of its own, writing with the per-write
// deadline again (Unpark). Close ends the body and gives the connection
// back to the server (Listener), which serves the client's next request
// on it as if it had just connected: a stream's connection stays
// keep-alive. TLS and HTTP/2 responses are not parked.

// ErrNotParkable is Park's error for a response it cannot take: not
// HTTP/1.1, over TLS, or a writer that cannot be hijacked.
var ErrNotParkable = errors.New("the response cannot be parked")

// parked is the state of a parked response's connection.
type parked struct {
	conn net.Conn
	// fd is the connection's socket, written without the runtime's poller
	// while parked (it is non-blocking; nobody else writes or closes it).
	fd int
	// leftover is what the client sent after its request, read by net/http
	// before the connection was taken (a pipelined request): it is read
	// again when the connection goes back to the server.
	leftover []byte
	// segs are frames handed on (WriteShared) that the next chunk sends
	// before Buf.
	segs [][]byte
	// pending is what the socket did not take of the last chunk; blocking
	// is set once the stream writes on a goroutine (Unpark).
	pending  []byte
	blocking bool
	// broken is set once a write failed: the body may end mid-chunk, and
	// the connection is closed rather than given back.
	broken bool
	back   func(conn net.Conn, leftover []byte)
}

// listenerKey is the context key of the function that gives a parked
// connection back to its server (WithListener).
type listenerKey struct{}

// WithListener returns ctx carrying l, so that a response of a request
// with ctx (the server's BaseContext) gives its connection back to l when
// its parked stream ends, rather than closing it.
func WithListener(ctx context.Context, l *Listener) context.Context {
	return context.WithValue(ctx, listenerKey{}, l)
}

// Parkable reports whether Park may take the response's connection.
func (s *Writer) Parkable() bool { return s.parkable && s.started && s.park == nil }

// Park takes the response's connection from net/http (see above): the
// status, headers and everything flushed so far have been sent. It
// returns the connection, to watch for the client hanging up; the
// connection is the Writer's (Close closes it, or gives it back). It
// fails with ErrNotParkable for a response that cannot be parked, and
// with the hijack's error (the response is then unusable).
func (s *Writer) Park() (syscall.RawConn, error) {
	if !s.Parkable() || s.Buf.Len() > 0 || s.spilled {
		return nil, ErrNotParkable
	}
	conn, rw, err := http.NewResponseController(s.out).Hijack()
	if errors.Is(err, http.ErrNotSupported) {
		return nil, ErrNotParkable
	}
	if err != nil {
		return nil, err
	}
	tcp, ok := conn.(syscall.Conn)
	if !ok {
		// Taken from net/http already: not ErrNotParkable, whose
		// response is still usable.
		_ = conn.Close()
		return nil, errors.New("httpstream: the connection has no socket to park")
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	fd := -1
	if err := raw.Control(func(f uintptr) { fd = int(f) }); err != nil {
		_ = conn.Close()
		return nil, err
	}
	p := &parked{conn: conn, fd: fd, leftover: buffered(rw.Reader), back: s.back}
	// Nothing of net/http's is kept: the response, its buffers, the
	// request.
	s.w, s.out, s.rc, s.back, s.park = nil, nil, nil, nil, p
	return raw, nil
}

// buffered returns a copy of what r holds unread (nil: nothing, as
// usual).
func buffered(r *bufio.Reader) []byte {
	n := r.Buffered()
	if n == 0 {
		return nil
	}
	b, _ := r.Peek(n)
	return append([]byte(nil), b...)
}

// Blocked reports whether the socket of a parked response did not take
// all of the last chunk: the stream must continue on a goroutine
// (Unpark) before it writes more.
func (s *Writer) Blocked() bool { return s.park != nil && len(s.park.pending) > 0 }

// Unpark makes a parked response's writes blocking, each bounded by the
// write timeout, as before Park: the stream writes on a goroutine of its
// own from now on. What the socket did not take is sent first.
func (s *Writer) Unpark() error {
	p := s.park
	if p == nil || p.blocking {
		return nil
	}
	p.blocking = true
	return s.send(nil)
}

// Close ends a parked response: it sends the last chunk of the body and
// gives the connection back to its server, or closes it when the response
// did not end cleanly (a write failed) or has no server to go back to.
// It does nothing for a response that was not parked.
func (s *Writer) Close() {
	p := s.park
	if p == nil {
		return
	}
	s.park = nil
	s.Buf = bytes.Buffer{}
	clean := false
	if len(p.pending) == 0 && !p.broken {
		// Parked, whoever closes must not wait on the client: a last
		// chunk the socket does not take at once closes the connection.
		if p.blocking {
			clean = p.writeBlocking(s, lastChunk) == nil
		} else {
			n, err := p.writeNow(lastChunk)
			clean = err == nil && n == len(lastChunk)
		}
	}
	if clean && p.back != nil {
		_ = p.conn.SetDeadline(time.Time{})
		p.back(p.conn, p.leftover)
		return
	}
	_ = p.conn.Close()
}

// lastChunk ends a chunked body (no trailers).
var lastChunk = []byte("0\r\n\r\n")

// flushParked sends what is buffered as one chunk of the body.
func (s *Writer) flushParked() error {
	return s.send(s.Buf.Bytes())
}

// chunks are the buffers a chunk is assembled in before its one write
// (frames are a few hundred bytes: copying them costs less than a write
// of each, and a parked stream keeps no buffer of its own while idle).
var chunks = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// send writes the segments handed on and tail as one chunk, then resets
// the buffers. Parked, it writes what the socket takes now and keeps the
// rest (Blocked); unparked, it waits up to the write timeout.
func (s *Writer) send(tail []byte) error {
	p := s.park
	size := len(tail)
	for _, seg := range p.segs {
		size += len(seg)
	}
	if size == 0 && len(p.pending) == 0 {
		return nil
	}
	bp := chunks.Get().(*[]byte)
	buf := append((*bp)[:0], p.pending...)
	if size > 0 {
		buf = strconv.AppendInt(buf, int64(size), 16)
		buf = append(buf, "\r\n"...)
		for _, seg := range p.segs {
			buf = append(buf, seg...)
		}
		buf = append(buf, tail...)
		buf = append(buf, "\r\n"...)
		s.wrote = time.Now()
	}
	clear(p.segs)
	p.segs = p.segs[:0]
	var err error
	if p.blocking {
		p.pending = nil
		err = p.writeBlocking(s, buf)
	} else {
		var n int
		n, err = p.writeNow(buf)
		p.pending = nil
		if n < len(buf) {
			p.pending = append([]byte(nil), buf[n:]...)
		}
	}
	if cap(buf) <= keepSize {
		*bp = buf
		chunks.Put(bp)
	}
	if s.Buf.Cap() > keepSize {
		s.Buf = bytes.Buffer{}
	} else {
		s.Buf.Reset()
	}
	return err
}

// writeBlocking writes b whole, each WritePiece of it waiting up to the
// write timeout. A write that fails leaves the connection broken.
func (p *parked) writeBlocking(s *Writer, b []byte) error {
	for len(b) > 0 {
		piece := b[:min(len(b), WritePiece)]
		now := time.Now()
		s.wrote = now
		if err := p.conn.SetWriteDeadline(now.Add(s.timeout)); err != nil {
			p.broken = true
			return err
		}
		if _, err := p.conn.Write(piece); err != nil {
			p.broken = true
			return err
		}
		b = b[len(piece):]
	}
	return nil
}

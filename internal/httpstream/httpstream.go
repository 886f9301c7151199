// Package httpstream writes long-lived HTTP responses (server-sent events,
// NDJSON): the streaming headers, and buffered frames sent with a per-write
// deadline (over HTTP/2, a Watchdog), since the server has no write
// timeout (a stream is not cut, and a vanished peer is noticed at the next
// write). The REST change stream and the graphql-sse transport both write
// through it.
package httpstream

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"time"
)

// Writer buffers the frames of one response and sends them on Flush. It is
// not safe for concurrent use.
type Writer struct {
	// Buf holds the frames not yet sent.
	Buf bytes.Buffer

	w           http.ResponseWriter
	out         http.ResponseWriter // where frames go (see Start)
	rc          *http.ResponseController
	contentType string
	timeout     time.Duration
	// keepAlive is set for an HTTP/1.1 request (Connection: keep-alive),
	// parkable for one without TLS (see Park); h2 for HTTP/2, where a
	// deadline that passes resets the stream even while nothing is being
	// written (an idle stream waiting for its next event).
	keepAlive, parkable, h2 bool
	started                 bool
	// dog watches the writes of an HTTP/2 response in place of a deadline
	// (Watchdog), when the writers around the response have one (the
	// REST middleware's). Without one, over HTTP/2 the deadline is moved
	// before writes (at most every quarter timeout) and cleared once each
	// flush returns.
	dog *Watchdog
	// back gives a parked connection back to its server (WithListener);
	// park is set once the connection is parked (park.go).
	back        func(conn net.Conn, leftover []byte)
	park        *parked
	deadlineSet time.Time // when the write deadline was last moved
	// wrote is when frames were last handed to the response (a
	// heartbeat is only due after a quiet spell; see Idle).
	wrote time.Time
	// spilled is set when frames were handed to the response since the
	// last flush.
	spilled bool
}

// New returns a Writer of the response w to r with the given
// Content-Type; each write must finish within timeout (a minute when 0).
// It keeps nothing of r.
func New(w http.ResponseWriter, r *http.Request, contentType string, timeout time.Duration) *Writer {
	if timeout <= 0 {
		timeout = time.Minute
	}
	s := &Writer{w: w, out: w, rc: http.NewResponseController(w), contentType: contentType, timeout: timeout,
		keepAlive: r.ProtoMajor == 1 && r.ProtoMinor >= 1, h2: r.ProtoMajor == 2, parkable: parkSupported && r.ProtoMajor == 1 && r.ProtoMinor == 1 && r.TLS == nil}
	if l, ok := r.Context().Value(listenerKey{}).(*Listener); ok {
		s.back = l.give
	}
	if s.h2 {
		s.dog = findWatchdog(w)
	}
	return s
}

// findWatchdog returns the Watchdog of the first writer around the
// response that has one, or nil.
func findWatchdog(w http.ResponseWriter) *Watchdog {
	for {
		if h, ok := w.(interface{ Watchdog() *Watchdog }); ok {
			if d := h.Watchdog(); d != nil {
				return d
			}
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

// Start writes the status and headers, once. Connection: keep-alive is an
// HTTP/1.1 header (forbidden in HTTP/2). The body is never compressed and
// X-Accel-Buffering: no keeps nginx-style proxies from buffering it.
func (s *Writer) Start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", s.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	if s.keepAlive {
		h.Set("Connection", "keep-alive")
	}
	s.w.WriteHeader(http.StatusOK)
	// The wrappers around the response (the REST middleware's status
	// recorder) have seen the status; frames go to the innermost writer,
	// which saves a call through each wrapper on every write and flush of
	// a stream's whole life.
	for {
		u, ok := s.out.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		s.out = u.Unwrap()
	}
	s.rc = http.NewResponseController(s.out)
}

// spillSize is the buffered size at which Spill hands the frames to the
// response (itself buffered): a long batch of frames then reuses a buffer
// of a few frames instead of growing one per stream, which cost memory per
// stream under overload (docs/benchmarks.md, "Measured choices in the code").
const spillSize = 1 << 10

// keepSize is the largest buffer kept between flushes; one that grew
// beyond (a single large frame) is released.
const keepSize = 64 << 10

// Flush writes the buffered frames and flushes them; with nothing
// buffered or spilled it does nothing. An error means the client is gone.
func (s *Writer) Flush() error {
	if s.park != nil {
		return s.flushParked()
	}
	if s.Buf.Len() == 0 && !s.spilled {
		return nil
	}
	if err := s.write(); err != nil {
		return err
	}
	s.spilled = false
	if s.dog != nil {
		outer := s.dog.Begin()
		err := s.rc.Flush()
		s.dog.End(outer)
		if err != nil {
			return err
		}
	} else {
		// The flush sends what the response still buffers: bounded too,
		// with at least three quarters of the timeout (a write just
		// before may have used most of its own).
		if err := s.extendDeadline(time.Now()); err != nil {
			return err
		}
		if err := s.rc.Flush(); err != nil {
			return err
		}
	}
	if s.h2 && s.dog == nil {
		s.deadlineSet = time.Time{}
		return s.rc.SetWriteDeadline(time.Time{})
	}
	return nil
}

// Spill writes the buffered frames to the response, without flushing it,
// once they reach a few KiB. Call it between the frames of a batch.
func (s *Writer) Spill() error {
	if s.Buf.Len() < spillSize {
		return nil
	}
	if s.park != nil {
		return s.flushParked()
	}
	s.spilled = true
	return s.write()
}

// WriteShared hands frames that many streams send alike (built once, not
// copied into each stream's Buf) to the response, after any buffered
// ones; Flush sends them. p is not modified or kept.
func (s *Writer) WriteShared(p []byte) error {
	if pk := s.park; pk != nil {
		// Sent with the next chunk, as it is: frames handed on are not
		// modified.
		if s.Buf.Len() > 0 {
			pk.segs = append(pk.segs, bytes.Clone(s.Buf.Bytes()))
			s.Buf.Reset()
		}
		pk.segs = append(pk.segs, p)
		return nil
	}
	if err := s.write(); err != nil {
		return err
	}
	s.spilled = true
	return s.writeOut(p)
}

// Idle returns how long ago frames were last handed to the response
// (since the stream started, before any). A stream needs a keep-alive
// only after a quiet spell: one that just wrote an event is alive, and a
// ping per stream per interval costs about what an event does (10,000
// streams, a 12 s heartbeat: 833 pings a second).
func (s *Writer) Idle() time.Duration { return time.Since(s.wrote) }

// PingDue handles a heartbeat timer t that fired, for a stream that has
// been idle for idle and wants a keep-alive every interval: it reports
// whether a ping is due (nothing written for an interval) and rearms t,
// for the rest of the quiet spell or for a whole interval after the ping.
func PingDue(t *time.Timer, idle, interval time.Duration) bool {
	if idle < interval {
		t.Reset(interval - idle)
		return false
	}
	t.Reset(interval)
	return true
}

// moveDeadline moves the write deadline, at most every quarter timeout
// (not at all under a Watchdog), and notes the time of the write it
// precedes (Idle).
func (s *Writer) moveDeadline() error {
	now := time.Now()
	s.wrote = now
	return s.extendDeadline(now)
}

// extendDeadline moves the write deadline to timeout from now, if it was
// last moved more than a quarter timeout ago (not at all under a
// Watchdog).
func (s *Writer) extendDeadline(now time.Time) error {
	if s.dog == nil && now.Sub(s.deadlineSet) > s.timeout/4 {
		// Not every writer supports deadlines (httptest); the write
		// still works.
		if err := s.rc.SetWriteDeadline(now.Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		s.deadlineSet = now
	}
	return nil
}

// WritePiece is the most of a write given one bound (a deadline, or the
// watchdog's): a large frame (a GraphQL result of several MB), or a large
// answer (rest's statusWriter), goes in pieces, so that the bound
// measures a slow client's progress rather than the time the whole takes.
const WritePiece = 64 << 10

// writeOut hands p to the response in pieces of at most WritePiece, each
// bounded: by the deadline, moved before it, or, under a Watchdog, on its
// own.
func (s *Writer) writeOut(p []byte) error {
	for len(p) > 0 {
		piece := p[:min(len(p), WritePiece)]
		if err := s.moveDeadline(); err != nil {
			return err
		}
		var err error
		if s.dog != nil {
			outer := s.dog.Begin()
			_, err = s.out.Write(piece)
			s.dog.End(outer)
		} else {
			_, err = s.out.Write(piece)
		}
		if err != nil {
			return err
		}
		p = p[len(piece):]
	}
	return nil
}

// write hands the buffered frames to the response (writeOut: the
// deadline is moved at most every quarter timeout, as moving it on every
// flush cost about as much CPU as the write itself, and a piece still
// gets at least three quarters of the timeout).
func (s *Writer) write() error {
	if s.Buf.Len() == 0 {
		return nil
	}
	err := s.writeOut(s.Buf.Bytes())
	if s.Buf.Cap() > keepSize {
		s.Buf = bytes.Buffer{}
	} else {
		s.Buf.Reset()
	}
	return err
}

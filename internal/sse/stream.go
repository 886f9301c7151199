package sse

import (
	"bytes"
	"errors"
	"net/http"
	"time"
)

// framing is how a stream frames the graphql-sse messages.
type framing int

const (
	framingSSE    framing = iota + 1 // text/event-stream
	framingNDJSON                    // application/x-ndjson
)

// The response media types of the streaming transport.
const (
	mediaSSE    = "text/event-stream"
	mediaNDJSON = "application/x-ndjson"
)

// stream writes the frames of one response. Frames are buffered and sent
// by flush, each write bounded by a deadline (the server has no write
// timeout, so a long-lived stream is not cut; a vanished peer is noticed
// at the next write). It is not safe for concurrent use.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	framing framing
	timeout time.Duration
	started bool
	buf     bytes.Buffer
	// deadlineSet is when the write deadline was last moved.
	deadlineSet time.Time
}

func newStream(w http.ResponseWriter, f framing, timeout time.Duration) *stream {
	if timeout <= 0 {
		timeout = time.Minute
	}
	return &stream{w: w, rc: http.NewResponseController(w), framing: f, timeout: timeout}
}

// start writes the status and headers. Connection: keep-alive is an
// HTTP/1.1 header (forbidden in HTTP/2). The body is never compressed:
// a compressing proxy or middleware would buffer frames.
func (s *stream) start(r *http.Request) {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	if s.framing == framingNDJSON {
		h.Set("Content-Type", mediaNDJSON+"; charset=utf-8")
	} else {
		h.Set("Content-Type", mediaSSE+"; charset=utf-8")
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	if r.ProtoMajor == 1 && r.ProtoMinor >= 1 {
		h.Set("Connection", "keep-alive")
	}
	s.w.WriteHeader(http.StatusOK)
}

// connected buffers the readiness frame: the comment `: connected` (and,
// when named, the `connected` event the source document sends) for SSE,
// the line `null` for NDJSON.
func (s *stream) connected(named bool) {
	if s.framing == framingNDJSON {
		s.buf.WriteString("null\n")
		return
	}
	s.buf.WriteString(": connected\n\n")
	if named {
		s.buf.WriteString("event: connected\ndata: null\n\n")
	}
}

// next buffers a next message carrying result (one line of JSON); id, when
// not empty, is its SSE event id.
func (s *stream) next(id string, result []byte) {
	if s.framing == framingNDJSON {
		s.buf.Write(result)
		s.buf.WriteByte('\n')
		return
	}
	s.buf.WriteString("event: next\n")
	if id != "" {
		s.buf.WriteString("id: ")
		s.buf.WriteString(id)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteString("data: ")
	s.buf.Write(result)
	s.buf.WriteString("\n\n")
}

// complete buffers the complete message: the last one of a stream.
func (s *stream) complete() {
	if s.framing == framingNDJSON {
		s.buf.WriteByte('\n')
		return
	}
	s.buf.WriteString("event: complete\ndata:\n\n")
}

// ping buffers a keep-alive: the comment `: ping` for SSE. NDJSON has no
// comments and an empty line means complete, so its keep-alive is a
// `null` line, the same "no result" value as its first line.
func (s *stream) ping() {
	if s.framing == framingNDJSON {
		s.buf.WriteString("null\n")
		return
	}
	s.buf.WriteString(": ping\n\n")
}

// flush writes the buffered frames with a deadline and flushes them. An
// error means the client is gone.
func (s *stream) flush() error {
	if s.buf.Len() == 0 {
		return nil
	}
	// The deadline is moved at most every quarter timeout: moving it on
	// every flush cost about as much CPU as the write itself, and a write
	// still gets at least three quarters of the timeout.
	if now := time.Now(); now.Sub(s.deadlineSet) > s.timeout/4 {
		// Not every writer supports deadlines (httptest); the write
		// still works.
		if err := s.rc.SetWriteDeadline(now.Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		s.deadlineSet = now
	}
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err == nil {
		err = s.rc.Flush()
	}
	return err
}

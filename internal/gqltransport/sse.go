package gqltransport

import (
	"net/http"
	"time"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/protocol"
)

// eventFramer writes the graphql-sse frames of one response through an
// httpstream.Writer (buffered frames, per-write deadline). It is not safe
// for concurrent use.
type eventFramer struct {
	*httpstream.Writer
	w       http.ResponseWriter
	framing protocol.Kind // SSE or NDJSON
}

func newStream(w http.ResponseWriter, r *http.Request, f protocol.Kind, timeout time.Duration) *eventFramer {
	ct := protocol.MediaSSE + "; charset=utf-8"
	if f == protocol.NDJSON {
		ct = protocol.MediaNDJSON + "; charset=utf-8"
	}
	return &eventFramer{Writer: httpstream.New(w, r, ct, timeout), w: w, framing: f}
}

// start writes the status and headers, once. The response is the
// Writer's from then on: the framer keeps no reference to it (a parked
// stream holds nothing of net/http's).
func (s *eventFramer) start() {
	s.Start()
	s.w = nil
}

// HTTP returns the response's writer, which the stream server may park.
func (s *eventFramer) HTTP() *httpstream.Writer { return s.Writer }

// connected buffers the readiness frame: the comment `: connected` (and,
// when named, the `connected` event the source document sends) for SSE,
// the line `null` for NDJSON.
func (s *eventFramer) connected(named bool) {
	if s.framing == protocol.NDJSON {
		s.Buf.WriteString("null\n")
		return
	}
	s.Buf.WriteString(": connected\n\n")
	if named {
		s.Buf.WriteString("event: connected\ndata: null\n\n")
	}
}

// next buffers a next message carrying result (one line of JSON); id, when
// not empty, is its position: the SSE event id, or for NDJSON, which has
// no event ids, extensions.lastEventId in the result (as multipart and
// graphql-ws carry it), so that an NDJSON client can resume too.
func (s *eventFramer) next(id string, result []byte) {
	if s.framing == protocol.NDJSON {
		s.Buf.Write(withPosition(s.Buf.AvailableBuffer(), result, id))
		s.Buf.WriteByte('\n')
		return
	}
	s.Buf.Write(appendNextSSE(s.Buf.AvailableBuffer(), id, result))
}

// appendNextSSE appends the SSE frame of a next message to b.
func appendNextSSE(b []byte, id string, result []byte) []byte {
	b = append(b, "event: next\n"...)
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, result...)
	return append(b, "\n\n"...)
}

// complete buffers the complete message: the last one of a stream.
func (s *eventFramer) complete() {
	if s.framing == protocol.NDJSON {
		s.Buf.WriteByte('\n')
		return
	}
	s.Buf.WriteString("event: complete\ndata:\n\n")
}

// current buffers an SSE event of only an id (see framer.current).
func (s *eventFramer) current(id string) {
	if s.framing == protocol.SSE && id != "" {
		s.Buf.WriteString("id: " + id + "\n\n")
	}
}

// ping buffers a keep-alive: the comment `: ping` for SSE. NDJSON has no
// comments and an empty line means complete, so its keep-alive is a
// `null` line, the same "no result" value as its first line.
func (s *eventFramer) ping() {
	if s.framing == protocol.NDJSON {
		s.Buf.WriteString("null\n")
		return
	}
	s.Buf.WriteString(": ping\n\n")
}

// flush sends the buffered frames. An error means the client is gone.
func (s *eventFramer) flush() error { return s.Flush() }

// The rest of the framer interface (framing.go).

func (s *eventFramer) label() string              { return transportLabel(s.framing) }
func (s *eventFramer) spill() error               { return s.Spill() }
func (s *eventFramer) shared() bool               { return s.framing == protocol.SSE }
func (s *eventFramer) writeShared(p []byte) error { return s.WriteShared(p) }
func (s *eventFramer) refuse(err error)           { writeHTTPError(s.w, err) }
func (s *eventFramer) failed(errs gqlerror.List)  { s.next("", errorResult(errs)); s.complete() }
func (s *eventFramer) invalid(errs gqlerror.List) {
	s.start()
	s.failed(errs)
}

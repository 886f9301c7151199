package gqltransport

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/protocol"
)

// Apollo's multipart HTTP protocol for subscriptions: a request whose
// Accept names multipart/mixed (Apollo Client's HttpLink sends
// multipart/mixed;boundary=graphql;subscriptionSpec=1.0 for every
// subscription) gets a multipart/mixed response whose parts are JSON:
//
//   - {} once the subscription is registered, then every heartbeat (a
//     keep-alive every client skips);
//   - {"payload":<ExecutionResult>} per event, the result carrying its
//     position as extensions.lastEventId, which resumes the subscription
//     when sent back as extensions.lastEventId;
//   - {"payload":null,"errors":[…]} when the subscription ends with an
//     error (Apollo's transport-level error), then the closing boundary.
//
// Each part is followed at once by the next boundary, so a client's
// parser hands a part on when it arrives, not when the next one does.

// multipartContentType is the response's Content-Type.
const multipartContentType = `multipart/mixed; boundary="graphql"; subscriptionSpec="1.0"`

const (
	multipartBoundary = "\r\n--graphql"
	multipartHeader   = "\r\ncontent-type: application/json; charset=utf-8\r\n\r\n"
	multipartEnd      = "--\r\n"
)

// multipartStream writes one multipart subscription response.
type multipartStream struct {
	*httpstream.Writer
	w      http.ResponseWriter
	opened bool // the first boundary was written
}

func newMultipartStream(w http.ResponseWriter, r *http.Request, timeout time.Duration) *multipartStream {
	return &multipartStream{Writer: httpstream.New(w, r, multipartContentType, timeout), w: w}
}

// part buffers one part whose JSON body is the concatenation of body.
func (m *multipartStream) part(body ...[]byte) {
	if !m.opened {
		m.opened = true
		m.Buf.WriteString(multipartBoundary)
	}
	m.Buf.WriteString(multipartHeader)
	for _, b := range body {
		m.Buf.Write(b)
	}
	m.Buf.WriteString(multipartBoundary)
}

var (
	multipartHeartbeat = []byte("{}")
	payloadOpen        = []byte(`{"payload":`)
	closeBrace         = []byte("}")
)

func (m *multipartStream) label() string            { return transportLabel(protocol.Multipart) }
func (m *multipartStream) start()                   { m.Start(); m.w = nil }
func (m *multipartStream) connected(bool)           { m.part(multipartHeartbeat) }
func (m *multipartStream) ping()                    { m.part(multipartHeartbeat) }
func (m *multipartStream) current(string)           {}
func (m *multipartStream) spill() error             { return m.Spill() }
func (m *multipartStream) flush() error             { return m.Flush() }
func (m *multipartStream) shared() bool             { return false }
func (m *multipartStream) writeShared([]byte) error { panic("sse: multipart frames are not shared") }
func (m *multipartStream) refuse(err error)         { writeHTTPError(m.w, err) }

// HTTP returns the response's writer, which the stream server may park.
func (m *multipartStream) HTTP() *httpstream.Writer { return m.Writer }

func (m *multipartStream) next(id string, result []byte) {
	m.part(payloadOpen, withPosition(nil, result, id), closeBrace)
}

func (m *multipartStream) complete() {
	if !m.opened {
		m.opened = true
		m.Buf.WriteString(multipartBoundary)
	}
	m.Buf.WriteString(multipartEnd)
}

// failed sends Apollo's transport-level error: no payload, the errors.
func (m *multipartStream) failed(errs gqlerror.List) {
	b, _ := json.Marshal(errs)
	m.part([]byte(`{"payload":null,"errors":`), b, closeBrace)
	m.complete()
}

// invalid answers an operation that does not validate with its errors as
// the payload, the way a query's errors reach the client.
func (m *multipartStream) invalid(errs gqlerror.List) {
	m.start()
	m.part(payloadOpen, errorResult(errs), closeBrace)
	m.complete()
}

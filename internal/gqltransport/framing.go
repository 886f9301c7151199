package gqltransport

import (
	"bytes"
	"net/http"
	"time"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice/internal/protocol"
)

// framer writes the messages of one operation in its transport's framing.
// A session (session.go) serves every transport through it: an HTTP
// response of its own (SSE, NDJSON: *eventFramer; Apollo's multipart:
// *multipartStream), or one operation of a connection that carries many
// (graphql-ws, graphql-sse single connection mode: *muxOp). Messages are
// buffered until flush. It is not safe for concurrent use.
type framer interface {
	// label names the transport in metrics and subscription listings.
	label() string
	// start sends the response status and headers, once (a no-op for
	// an operation of a shared connection).
	start()
	// connected buffers the readiness frame, written once the
	// subscription is registered.
	connected(named bool)
	// next buffers a result; id, when not empty, is its position.
	next(id string, result []byte)
	// complete buffers the end of the operation.
	complete()
	// failed buffers what ends the operation with errs.
	failed(errs gqlerror.List)
	// invalid answers an operation that does not validate.
	invalid(errs gqlerror.List)
	// refuse answers an operation that may not start (a stream cap, access
	// lost since the request was authorized).
	refuse(err error)
	// current buffers the message that a resumed live query's result is
	// unchanged since its client's position and stands at position id:
	// an SSE event of only an id (EventSource and graphql-sse clients take
	// the id and dispatch nothing); nothing in the other framings, whose
	// clients would take any message for a result.
	current(id string)
	// ping buffers a keep-alive.
	ping()
	// Idle returns how long ago something was last written (see
	// httpstream.Writer.Idle).
	Idle() time.Duration
	// spill hands what is buffered on when it grew large, between the
	// frames of a batch; flush sends it. An error means the client left.
	spill() error
	flush() error
	// shared reports whether the SSE frames a share builds once for all
	// its members are this framer's frames; writeShared then writes them
	// as they are.
	shared() bool
	writeShared(p []byte) error
}

// newFramer returns the framer of an HTTP streaming response of event
// stream protocol f (protocol.SSE, NDJSON or Multipart).
func newFramer(w http.ResponseWriter, r *http.Request, f protocol.Kind, timeout time.Duration) framer {
	if f == protocol.Multipart {
		return newMultipartStream(w, r, timeout)
	}
	return newStream(w, r, f, timeout)
}

// withPosition returns the ExecutionResult result with its position as
// extensions.lastEventId, for the transports that have no event id of
// their own (graphql-ws, single connection mode, multipart): a client
// resumes by sending it back as extensions.lastEventId. result is a JSON
// object without extensions (graph.SubscriptionEvent.Data); it is not
// modified.
func withPosition(dst []byte, result []byte, id string) []byte {
	if id == "" || len(result) < 2 || result[len(result)-1] != '}' || hasLastEventID(result, id) {
		return append(dst, result...)
	}
	dst = append(dst, result[:len(result)-1]...)
	if len(result) > 2 {
		dst = append(dst, ',')
	}
	dst = append(dst, `"extensions":{"lastEventId":"`...)
	dst = append(dst, id...) // positions are [a-z0-9-]
	return append(dst, `"}}`...)
}

// hasLastEventID reports whether result ends with its position as
// extensions.lastEventId already (a live query's result, live.go).
func hasLastEventID(result []byte, id string) bool {
	n := len(id) + len(`"lastEventId":""}}`)
	if len(result) < n {
		return false
	}
	tail := result[len(result)-n:]
	return bytes.HasPrefix(tail, []byte(`"lastEventId":"`)) && string(tail[len(`"lastEventId":"`):len(tail)-3]) == id
}

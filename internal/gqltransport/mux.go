package gqltransport

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/stream"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// The connections that carry many operations (a graphql-ws socket,
// graphqlws.go; a single connection mode event stream, sse_single.go) share
// this machinery: each operation's stream is opened as a stream of its
// own is (session.go), through a muxOp framer that appends
// its messages to the connection's muxOut, and one writer goroutine per
// connection sends them.

// muxOutLimit is how many bytes of messages a connection holds for its
// writer. An operation that finds more waits at its next flush, so a slow
// client holds at most about twice this here (what is being written and
// what waits); its subscriptions then fall behind on their own and read
// the log from their positions, as SSE streams do: nothing is lost and
// the hub never waits.
const muxOutLimit = 64 << 10

// maxOperationIDBytes bounds an operation id of a connection (graphql-ws's
// subscribe id, single connection mode's extensions.operationId): the
// operation keeps it, JSON-encoded, for its whole life and repeats it in
// every message, so an id as large as a message (1 MiB, and six times
// that JSON-encoded) multiplied what each subscription holds and sends.
// Clients use counters or UUIDs.
const maxOperationIDBytes = 128

// muxOut is the outgoing messages of one connection. Its methods are safe
// for concurrent use.
type muxOut struct {
	mu   sync.Mutex
	buf  []byte
	ends []int         // where each message in buf ends
	room chan struct{} // closed when the writer takes buf
	wake chan struct{} // has a value when buf has messages for the writer
	done <-chan struct{}
	// finite has a value while a query or mutation of the connection
	// runs (see take).
	finite chan struct{}
}

func newMuxOut(done <-chan struct{}) *muxOut {
	return &muxOut{room: make(chan struct{}), wake: make(chan struct{}, 1), done: done, finite: make(chan struct{}, 1)}
}

// turn waits until no other query or mutation of the connection runs and
// at most muxOutLimit bytes wait for the writer; the caller then runs
// one, adds its result and calls release. A connection reads on while its
// operations run, and add never waits: without turns, a client that
// sends queries and reads nothing would have the result of each one
// queued, or held by its goroutine, however many it sent. With them it
// holds at most muxOutLimit, one result and what the writer writes. It
// fails once the connection is gone or stop is closed.
func (o *muxOut) turn(stop <-chan struct{}) (release func(), err error) {
	select {
	case o.finite <- struct{}{}:
	case <-o.done:
		return nil, errConnectionGone
	case <-stop:
		return nil, context.Canceled
	}
	if err := o.wait(stop); err != nil {
		<-o.finite
		return nil, err
	}
	return func() { <-o.finite }, nil
}

// add appends one message, the concatenation of parts. It never waits.
func (o *muxOut) add(parts ...[]byte) { o.addUnless(nil, parts...) }

// addUnless appends one message, the concatenation of parts, unless
// stopped is closed (a nil stopped never is). It is judged under the lock
// that orders the messages: a message of an operation that a client
// stopped (graphql-ws complete, single connection mode's DELETE) is
// either queued before the stop or dropped, never after a message that
// followed the stop, such as the answer to the client's next operation.
// It never waits.
func (o *muxOut) addUnless(stopped <-chan struct{}, parts ...[]byte) {
	o.mu.Lock()
	select {
	case <-stopped:
		o.mu.Unlock()
		return
	default:
	}
	for _, p := range parts {
		o.buf = append(o.buf, p...)
	}
	o.ends = append(o.ends, len(o.buf))
	o.mu.Unlock()
}

// flush wakes the writer, then waits while more than muxOutLimit bytes
// wait for it. It fails once the connection is gone or stop is closed
// (nil: never).
func (o *muxOut) flush(stop <-chan struct{}) error {
	o.notify()
	return o.wait(stop)
}

// notify wakes the writer. It never waits.
func (o *muxOut) notify() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// wait waits while more than muxOutLimit bytes wait for the writer. It
// fails once the connection is gone or stop is closed (nil: never).
func (o *muxOut) wait(stop <-chan struct{}) error {
	for {
		o.mu.Lock()
		n, room := len(o.buf), o.room
		o.mu.Unlock()
		select {
		case <-o.done:
			return errConnectionGone
		case <-stop:
			return context.Canceled
		default:
		}
		if n <= muxOutLimit {
			return nil
		}
		// What waits may have been added without a flush after it (a
		// stream that stopped amid a batch, its client gone or done with
		// it): whoever waits for room wakes the writer, or it would wait
		// for the next flush of another operation, if any.
		o.notify()
		select {
		case <-room:
		case <-o.done:
			return errConnectionGone
		case <-stop:
			return context.Canceled
		}
	}
}

// waiting reports whether messages wait for the writer.
func (o *muxOut) waiting() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ends) > 0
}

// take hands the writer what waits (nil when nothing does) and makes
// room; spare is a buffer the writer no longer needs, reused.
func (o *muxOut) take(spare []byte) ([]byte, []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.ends) == 0 {
		return nil, nil
	}
	buf, ends := o.buf, o.ends
	o.buf, o.ends = reusable(spare)[:0], nil
	close(o.room)
	o.room = make(chan struct{})
	return buf, ends
}

// muxKeepBytes is the largest buffer a connection keeps between writes,
// for the next messages: a connection idle for hours after one large
// result kept that result's buffers (two of up to 256 KiB, 383 KiB a
// socket after two results of 194 KB), where an HTTP stream lets go of
// what it grew (httpstream).
const muxKeepBytes = 16 << 10

// reusable returns buf to keep for the next messages, nil when a large
// message grew it past muxKeepBytes: let it go.
func reusable(buf []byte) []byte {
	if cap(buf) > muxKeepBytes {
		return nil
	}
	return buf
}

type connectionGone struct{}

func (connectionGone) Error() string { return "the connection is closed" }

var errConnectionGone error = connectionGone{}

// The encodings of the two multiplexing protocols.
type muxProtocol int

const (
	protoWS     muxProtocol = iota + 1 // graphql-transport-ws messages
	protoSingle                        // graphql-sse single connection mode events
)

// muxOp frames the messages of one operation of a connection. accept,
// when set, is called once the operation is accepted (start): single
// connection mode answers its POST then. reject, when set, answers an
// operation that does not validate or may not start with an HTTP error
// instead (single connection mode's POST); else it becomes an error
// message on the connection.
type muxOp struct {
	out   *muxOut
	proto muxProtocol
	id    []byte // the operation id, JSON-encoded
	// stopped is closed once the operation is stopped (its context's
	// Done): from then on nothing more of it is sent. The protocols say
	// so (graphql-transport-ws: no further event of an operation the
	// client completed), and the client may have given its id to a new
	// operation already: a resumed subscription completed amid its
	// backlog went on sending it, thousands of events after the answer
	// to the client's next operation. Nil: never.
	stopped <-chan struct{}
	logger  *slog.Logger
	accept  func()
	reject  func(err error, errs gqlerror.List)
}

func (m *muxOp) label() string {
	if m.proto == protoWS {
		return "graphql-ws"
	}
	return "graphql-sse-single"
}

// Idle is never asked of an operation: its connection keeps itself alive.
func (m *muxOp) Idle() time.Duration { return 0 }

func (m *muxOp) start() {
	if m.accept != nil {
		m.accept()
		m.accept, m.reject = nil, nil
	}
}

func (m *muxOp) connected(bool) { m.start() }

// The message pieces.
var (
	wsIDOpen        = []byte(`{"id":`)
	wsNext          = []byte(`,"type":"next","payload":`)
	wsComplete      = []byte(`,"type":"complete"}`)
	wsError         = []byte(`,"type":"error","payload":`)
	singleNextOpen  = []byte("event: next\ndata: {\"id\":")
	singlePayload   = []byte(`,"payload":`)
	singleNextClose = []byte("}\n\n")
	singleComplete  = []byte("event: complete\ndata: {\"id\":")
)

func (m *muxOp) next(id string, result []byte) {
	payload := withPosition(nil, result, id)
	if m.proto == protoWS {
		m.out.addUnless(m.stopped, wsIDOpen, m.id, wsNext, payload, closeBrace)
		return
	}
	m.out.addUnless(m.stopped, singleNextOpen, m.id, singlePayload, payload, singleNextClose)
}

func (m *muxOp) complete() {
	if m.proto == protoWS {
		m.out.addUnless(m.stopped, wsIDOpen, m.id, wsComplete)
		return
	}
	m.out.addUnless(m.stopped, singleComplete, m.id, singleNextClose)
}

// failed ends the operation with errs: graphql-ws's error message (which
// ends an operation: no complete follows), single connection mode's next
// with {"errors":…} and complete, as in distinct connections mode.
func (m *muxOp) failed(errs gqlerror.List) {
	if m.proto == protoWS {
		b, _ := json.Marshal(errs)
		m.out.addUnless(m.stopped, wsIDOpen, m.id, wsError, b, closeBrace)
		return
	}
	m.next("", errorResult(errs))
	m.complete()
}

func (m *muxOp) invalid(errs gqlerror.List) {
	if m.reject != nil {
		// Single connection mode: validation errors answer the POST as the
		// GraphQL-over-HTTP spec says (the protocol asks for that).
		m.reject(nil, errs)
		m.accept, m.reject = nil, nil
		return
	}
	m.failed(errs)
}

func (m *muxOp) refuse(err error) {
	if m.reject != nil {
		m.reject(err, nil)
		m.accept, m.reject = nil, nil
		return
	}
	m.failed(gqlerror.List{gqlError(m.logger, err)})
	_ = m.flush() // the caller writes nothing more
}

// ping is a no-op: the connection keeps itself alive, not each operation.
func (m *muxOp) ping()          {}
func (m *muxOp) current(string) {}
func (m *muxOp) spill() error   { return nil }

// flush fails as soon as the operation is stopped: a subscription the
// client completed while it waited for room (the client reads nothing)
// waited until the client read, or write_timeout cut the connection,
// holding its places among the streams and under the connection's cap.
func (m *muxOp) flush() error { return m.out.flush(m.stopped) }

func (m *muxOp) shared() bool             { return false }
func (m *muxOp) writeShared([]byte) error { panic("sse: multiplexed frames are not shared") }

// muxEntry is a running operation in its connection's operations by id.
// The client may reuse an id once it completed (or DELETEd) it, while the
// operation it named still ends: the operation removes or changes the
// entry under its id only while it is this entry, its own.
type muxEntry struct {
	stop func() // ends the operation: cancels it, stops its stream
	// served is set once the connection serves the operation's stream
	// (a subscription, a live query): when the connection loses its
	// place among the streams, the operations not served, queries and
	// mutations waiting their turn or running, are stopped rather than
	// run, and the streams end with their own errors. Guarded by the
	// connection's mu.
	served bool
	// stream is the operation's stream once its connection serves it; a
	// single connection mode stream whose reservation lost its place
	// among the streams ends it with that error (Stream.Revoke).
	stream *stream.Stream
	// released is set when the operation's place under its connection's
	// cap was given back as the client stopped it (graphql-ws complete),
	// so that its end does not give it back again. Guarded by the
	// connection's mu.
	released bool
}

// muxRequest is one operation of a connection, dispatched by the
// connection to the transport of its database's current schema and the
// caller's role (graphqlws.go).
type muxRequest struct {
	params *graphql.RawParams
	op     *muxOp // the operation's framer
	// registered is called once the operation is under way: a
	// subscription registered (or refused), a query or mutation given
	// its turn (muxOut.turn). The connection reads its next message (a
	// graphql-ws socket) or the body of its next operation (single
	// connection mode) only then: so a mutation sent after a
	// subscription on one socket is delivered to it, and a client that
	// sends queries and reads nothing has one of them waiting, decoded,
	// besides the one running, where each message read and decoded
	// ahead held its variables (up to twenty times their size) until
	// its turn. Nil: nothing waits for it.
	registered func()
	// rejudge, when set, judges the operation again once its turn has
	// come, with the access in force then: an operation waits its turn
	// for as long as the client does not read, and the access it was
	// authorized with may have been taken away or narrowed meanwhile. It
	// returns the error the operation is refused with then; role is the
	// role it was prepared for.
	rejudge func(role sluice.Role) error
	// conn is the connection's state in the stream server; done is called
	// once the operation's stream is over (the connection's bookkeeping).
	conn *stream.Conn
	done func()
	// serve is called with the operation's stream once it is served by
	// the connection (to Stop it when the client completes it).
	serve func(*stream.Stream)
}

// operate runs one operation of a connection in ctx (carrying its
// graph.Request): it validates it, then runs a query or mutation to its
// end, or registers a subscription and hands its stream to the
// connection.
func (t *transport) operate(ctx context.Context, mr *muxRequest, exec graphql.GraphExecutor) {
	defer mr.registered()
	// extensions.lastEventId is the only resume position: the
	// connection's URL and headers are not the operation's.
	from, err := streamparam.Position(mr.params.Extensions)
	if err != nil {
		mr.op.refuse(err)
		return
	}
	req := &request{params: mr.params, from: from}
	op := t.prepare(ctx, mr.op, req, exec)
	if op == nil {
		return
	}
	t.execute(ctx, mr.op, req, op, exec, mr)
}

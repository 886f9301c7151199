package gqltransport

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/protocol"
	"github.com/sluice-dev/sluice/internal/stream"
)

// transportLabel names the framings in metrics and subscription listings.
func transportLabel(f protocol.Kind) string {
	switch f {
	case protocol.NDJSON:
		return "graphql-ndjson"
	case protocol.Multipart:
		return "graphql-multipart"
	}
	return "graphql-sse"
}

// newEvaluator returns the evaluator of a subscription: per piece for
// per-document fields, per gathered commit for _ChangeSet (pieces.go).
func (t *transport) newEvaluator(gs *graph.Subscription) *evaluator {
	return newEvaluator(gs, t.opts.MaxChangeSetBytes)
}

// subscribe opens the stream of a subscription operation with the stream
// server, which registers it (joining the share of identical subscribers
// when it starts from now, with a change feed subscription of its own
// when it resumes) and writes the readiness frame. An operation of a
// connection (mr) is then served by the connection and nil returned;
// otherwise the stream is returned for the caller to serve, nil when the
// request is over (answered, or the client left).
func (t *transport) subscribe(ctx context.Context, st framer, req *request, op *graphql.OperationContext, mr *muxRequest) *stream.Stream {
	varBytes, err := checkStreamVariables(req.params.Variables)
	if err != nil {
		st.refuse(err)
		return nil
	}
	if t.es.IsLive(op) {
		return t.subscribeLive(ctx, st, req, op, varBytes, mr)
	}
	greq := graph.RequestFrom(ctx)
	sink := &frameSink{f: st, named: req.named}
	gs, err := t.es.NewSubscription(op, greq)
	if err != nil {
		sink.fail(ctx, t.opts.Logger, err)
		return nil
	}
	if t.opts.Streams == nil {
		sink.fail(ctx, t.opts.Logger, sluice.Errorf(sluice.CodeUnavailable, "the change feed is not running"))
		return nil
	}
	spec := t.spec(ctx, st, req, greq, gs.Classes(), gs.Version(), varBytes, mr)
	// A detached member evaluates with its share's subscription (the same
	// schema, role, operation and variables; Events keeps no state between
	// calls): the stream keeps no operation of its own, about a KiB, for
	// its whole life.
	spec.Detached = func(shared stream.Evaluator) stream.Evaluator {
		return t.newEvaluator(shared.(*evaluator).current())
	}
	key, shares := keyOf(t.es, req)
	if req.from == nil && shares {
		spec.Share = &stream.ShareOptions{Key: key, Classes: gs.Classes(), ClassesVersion: gs.Version(),
			New:   func() stream.Evaluator { return t.newEvaluator(gs) },
			Frame: frameNext,
		}
	} else {
		// A resume (or variables that share with no one) has a
		// subscription of its own; an expired position is an error on
		// the stream, never a silent gap: the client re-reads the current
		// state.
		spec.From, spec.Evaluator = req.from, t.newEvaluator(gs)
	}
	return t.open(ctx, spec, sink, mr)
}

// maxStreamVariablesBytes bounds the variables of a subscription or live
// query, as canonical JSON (encodeVariables): it keeps them, decoded, for
// its whole life, where a query or mutation, answered once, lets them go.
// Without it one user's streams (max_streams_per_user, 1,000) held up to
// a body's variables each (8 MiB, tens of MB decoded). It takes a filter
// of the most ids a filter has (filter.MaxIDs, 1,000) of the longest ids
// (a 63-byte class name and a 255-byte key: 322 KB as JSON), and room
// for other variables besides.
const maxStreamVariablesBytes = 384 << 10

// checkStreamVariables returns a CodeInvalid error naming the bound when
// the variables of a subscription or live query are larger than
// maxStreamVariablesBytes, before the operation starts; otherwise what
// the stream is charged for keeping them (variablesBytes), 0 for none.
func checkStreamVariables(vars map[string]any) (int64, error) {
	var n byteCount
	if err := encodeVariables(&n, vars); err != nil {
		return 0, sluice.Errorf(sluice.CodeInvalid, "the variables cannot be encoded as JSON")
	}
	if n > 0 {
		n-- // the newline that ends the encoding
	}
	if n > maxStreamVariablesBytes {
		return 0, sluice.Errorf(sluice.CodeInvalid, "the variables are %d bytes as JSON, more than %d (the limit of a subscription or live query, which keeps them while it runs): send large values in a query or mutation, or split them over several subscriptions", n, maxStreamVariablesBytes)
	}
	return variablesBytes(int64(n), vars), nil
}

// What a JSON value holds decoded (by encoding/json, numbers as
// json.Number, into map[string]any and []any), measured with
// runtime.MemStats over about 100,000 values of each shape (Go 1.26;
// TestStreamVariablesMemory): null, a boolean or "" in an array 19 bytes
// (an interface in the array's slice); a short string or number 35; []
// 43; {} 64, 22 times its 3 bytes of JSON, and up to 16 more in an
// array, whose slice, grown by appending, may hold up to as many slots
// again spare. An object with members holds more, a map of groups of eight
// slots, whose table doubles past seven eighths full: {"a":1} 364 bytes,
// 45 times its 8 bytes of JSON; 438 with eight members, 779 with nine,
// 1,430 with fifteen, 5,709 with 57 (just past a doubling: about 90
// bytes a member besides its text). The estimate is above each:
// valueBytes a value (an empty map's 48 bytes, its slot and a spare
// one), objectBytes more an object with members (a map's first group)
// and memberBytes more each member (its share of a larger map's slots):
// 10% or more above what every shape measured holds.
const (
	valueBytes  = 80
	objectBytes = 256
	memberBytes = 32
)

// variablesBytes returns what a stream is charged for keeping vars, whose
// canonical JSON is jsonBytes long: jsonBytes, valueBytes per JSON value,
// and objectBytes per object with members and memberBytes per member, at
// least what they hold decoded. 0 for no variables (a stream of none is
// charged nothing).
func variablesBytes(jsonBytes int64, vars map[string]any) int64 {
	if len(vars) == 0 {
		return 0
	}
	return jsonBytes + decodedBytes(vars)
}

// decodedBytes returns the estimate, beyond its JSON text, of what the
// decoded value v holds, its elements and members included.
func decodedBytes(v any) int64 {
	n := int64(valueBytes)
	switch v := v.(type) {
	case map[string]any:
		if len(v) > 0 {
			n += objectBytes + memberBytes*int64(len(v))
		}
		for _, e := range v {
			n += decodedBytes(e)
		}
	case []any:
		for _, e := range v {
			n += decodedBytes(e)
		}
	}
	return n
}

// byteCount is an io.Writer that counts what is written to it.
type byteCount int64

func (c *byteCount) Write(p []byte) (int, error) {
	*c += byteCount(len(p))
	return len(p), nil
}

// spec returns the stream spec every GraphQL stream of the request has;
// classes are those of its operation as prepared for schema version
// version: a commit made under a later version passes the class filter,
// since the operation, revised to it, may need more classes. varBytes is
// what the stream is charged for its variables (checkStreamVariables).
func (t *transport) spec(ctx context.Context, st framer, req *request, greq *graph.Request, classes []string, version int, varBytes int64, mr *muxRequest) stream.Spec {
	spec := stream.Spec{Label: st.label(), Database: greq.DB, Grant: engine.Grant(ctx, greq.User, greq.DB, t.es.Role()), VariablesBytes: varBytes,
		Heartbeat: req.heartbeat, Logger: t.opts.Logger, Classes: classes, ClassesVersion: version}
	if mr != nil {
		spec.Conn, spec.Done = mr.conn, mr.done
	}
	return spec
}

// open opens a stream with the stream server; one of a connection is served at
// once, by the connection.
func (t *transport) open(ctx context.Context, spec stream.Spec, sink *frameSink, mr *muxRequest) *stream.Stream {
	s := t.opts.Streams.Open(ctx, spec, sink)
	if s == nil || mr == nil {
		return s
	}
	mr.serve(s)
	s.Serve()
	return nil
}

// frameSink is a framer as the stream server writes to it (stream.Sink).
type frameSink struct {
	f framer
	// named: the request asked for the named connected event.
	named bool
	// owed, when set, buffers what a resumed live query's client is owed
	// after the readiness frame.
	owed func(framer)
}

func (k *frameSink) Shared() bool                    { return k.f.shared() }
func (k *frameSink) WriteFrames(frames []byte) error { return k.f.writeShared(frames) }
func (k *frameSink) WriteEvent(ev sluice.Event)      { k.f.next(ev.ID, ev.Data) }
func (k *frameSink) Spill() error                    { return k.f.spill() }
func (k *frameSink) Flush() error                    { return k.f.flush() }
func (k *frameSink) Ping()                           { k.f.ping() }
func (k *frameSink) Idle() time.Duration             { return k.f.Idle() }

// HTTP returns the framer's response when it has one of its own (SSE,
// NDJSON, multipart), which the stream server may park; nil for an operation of
// a connection.
func (k *frameSink) HTTP() *httpstream.Writer {
	if h, ok := k.f.(interface{ HTTP() *httpstream.Writer }); ok {
		return h.HTTP()
	}
	return nil
}

// Refuse answers a stream refused before it started (a stream cap, a
// budget, access lost since the request was authorized): an HTTP error,
// 429 or 503 with Retry-After, or a graphql-ws error message.
func (k *frameSink) Refuse(err error) { k.f.refuse(err) }

// Fail ends a stream that could not start with an error next and
// complete.
func (k *frameSink) Fail(err error) {
	k.f.start()
	var re *graph.ResultError
	if errors.As(err, &re) {
		k.f.failed(re.Errors)
		return
	}
	k.f.failed(gqlerror.List{gqlError(nil, err)})
}

// fail answers, before any stream was opened, an operation that cannot
// have one (logged to logger), unless the client already left.
func (k *frameSink) fail(ctx context.Context, logger *slog.Logger, err error) {
	if ctx.Err() != nil {
		return
	}
	k.f.start()
	var re *graph.ResultError
	if errors.As(err, &re) {
		k.f.failed(re.Errors)
	} else {
		k.f.failed(gqlerror.List{gqlError(logger, err)})
	}
	_ = k.f.flush()
}

// Ready buffers the response's start, the readiness frame and what a
// resumed live query's client is owed.
func (k *frameSink) Ready(uint64) {
	k.f.start()
	k.f.connected(k.named)
	if k.owed != nil {
		k.owed(k.f)
		k.owed = nil
	}
}

// End writes complete, preceded by an error next unless the subscription
// ended normally (the server shutting down, the client completing it).
// The stream server logged why.
func (k *frameSink) End(err error) {
	var re *graph.ResultError
	if errors.As(err, &re) {
		// A live query's result had errors: they end it as they would
		// answer the query (with their paths and extensions).
		k.f.failed(re.Errors)
		return
	}
	if err != nil && !errors.Is(err, stream.ErrShutdown) && !errors.Is(err, stream.ErrClosed) {
		k.f.failed(gqlerror.List{gqlError(nil, err)})
		return
	}
	k.f.complete()
}

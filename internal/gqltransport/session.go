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
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/engine"
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

// session is one GraphQL subscription being served: its operation, and
// the stream (internal/stream) that serves it through its framer.
type session struct {
	t *transport
	// ctx is the request's or the connection operation's context, which
	// ends when the client leaves.
	ctx context.Context
	st  framer
	db  *sluice.Database
	// str serves the session once it is registered.
	str *stream.Stream
}

// newEvaluator returns the evaluator of a subscription: per piece for
// per-document fields, per gathered commit for _ChangeSet (pieces.go).
func (t *transport) newEvaluator(gs *graph.Subscription) *evaluator {
	return newEvaluator(gs, t.opts.MaxChangeSetBytes)
}

// subscribe starts serving a subscription operation: it registers
// (joining the share of identical subscribers when it starts from now,
// with a change feed subscription of its own when it resumes) and writes
// the readiness frame. It returns the session to serve, or nil when the
// request is over (an error was answered, or the client left).
func (t *transport) subscribe(ctx context.Context, st framer, req *request, op *graphql.OperationContext) *session {
	if t.es.IsLive(op) {
		return t.subscribeLive(ctx, st, req, op)
	}
	greq := graph.RequestFrom(ctx)
	s := &session{t: t, ctx: ctx, st: st}
	gs, err := t.es.NewSubscription(op, greq)
	if err != nil {
		s.fail(err)
		return nil
	}
	if t.opts.Hub == nil {
		s.fail(sluice.Errorf(sluice.CodeUnavailable, "the change feed is not running"))
		return nil
	}
	s.db = greq.DB
	s.str = stream.New(ctx, frameSink{st}, stream.Options{Hub: t.opts.Hub, Metrics: t.opts.Metrics, Logger: t.opts.Logger,
		Label: st.label(), Database: greq.DB, Classes: gs.Classes(), Heartbeat: req.heartbeat,
		// A detached member evaluates with its share's subscription (the
		// same schema, role, operation and variables; Events keeps no
		// state between calls): the stream keeps no operation of its own,
		// about a KiB, for its whole life.
		Detached: func(shared changefeed.Evaluator) changefeed.Evaluator {
			return t.newEvaluator(shared.(*evaluator).current())
		}})
	// The guard comes first: an access change from now on ends the
	// stream before any later commit reaches it (changefeed/access.go).
	if err := s.str.Guard(engine.Grant(ctx, greq.User, greq.DB, t.es.Role())); err != nil {
		// Refused before any stream starts (a stream cap, or access lost
		// since the request was authorized): an HTTP error, 429 or 503
		// with Retry-After.
		st.refuse(err)
		return nil
	}
	joined := false
	if req.from == nil {
		if key, ok := keyOf(t.es, req); ok {
			var feed *changefeed.Feed
			if mo, ok := st.(*muxOp); ok {
				feed = &mo.out.feed // the connection's
			}
			err = s.str.Join(changefeed.ShareOptions{Key: key, Classes: gs.Classes(), Feed: feed,
				New:   func() changefeed.Evaluator { return t.newEvaluator(gs) },
				Frame: frameNext,
			})
			joined = true
		}
	}
	if !joined {
		err = s.str.Subscribe(req.from, t.newEvaluator(gs))
	}
	if err != nil {
		s.str.Release()
		// An expired position is an error on the stream, never a silent
		// gap: the client re-reads the current state.
		s.fail(err)
		return nil
	}
	if !s.ready(req) {
		s.str.Release()
		return nil
	}
	return s
}

// serve serves the session until it ends, and releases it.
func (s *session) serve() { s.str.Serve() }

// logger returns the session's logger, built when something is logged.
func (s *session) logger() *slog.Logger {
	l := s.t.opts.Logger.With("transport", s.st.label())
	if s.db != nil {
		l = l.With("database", s.db.Path())
	}
	return l
}

// ready writes the readiness frame, once the subscription is registered:
// a commit that starts after the client reads it is delivered.
func (s *session) ready(req *request) bool {
	if s.t.opts.Logger.Enabled(s.ctx, slog.LevelDebug) {
		s.logger().Debug("graphql subscription opened", "sub", s.str.SubscriptionID(), "shared", s.str.Member() != nil)
	}
	s.st.start()
	s.st.connected(req.named)
	return s.str.Ready()
}

// fail ends a stream that could not be registered with an error next and
// complete. When the client already left (its request context ended), there
// is no one to tell.
func (s *session) fail(err error) {
	if s.ctx.Err() != nil {
		return
	}
	s.st.start()
	var re *graph.ResultError
	if errors.As(err, &re) {
		s.st.failed(re.Errors)
		_ = s.st.flush()
		return
	}
	s.st.failed(gqlerror.List{gqlError(s.logger(), err)})
	_ = s.st.flush()
}

// frameSink is a framer as the stream engine writes to it.
type frameSink struct{ f framer }

func (k frameSink) Shared() bool                    { return k.f.shared() }
func (k frameSink) WriteFrames(frames []byte) error { return k.f.writeShared(frames) }
func (k frameSink) WriteEvent(ev sluice.Event)      { k.f.next(ev.ID, ev.Data) }
func (k frameSink) Spill() error                    { return k.f.spill() }
func (k frameSink) Flush() error                    { return k.f.flush() }
func (k frameSink) Ping()                           { k.f.ping() }
func (k frameSink) Idle() time.Duration             { return k.f.Idle() }

// End writes complete, preceded by an error next unless the subscription
// ended normally (the server shutting down, the client completing it).
// The engine logged why.
func (k frameSink) End(err error) {
	var re *graph.ResultError
	if errors.As(err, &re) {
		// A live query's result had errors: they end it as they would
		// answer the query (with their paths and extensions).
		k.f.failed(re.Errors)
		return
	}
	if err != nil && !errors.Is(err, changefeed.ErrShutdown) && !errors.Is(err, changefeed.ErrClosed) {
		k.f.failed(gqlerror.List{gqlError(slog.New(slog.DiscardHandler), err)})
		return
	}
	k.f.complete()
}

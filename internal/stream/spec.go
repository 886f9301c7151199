package stream

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/httpstream"
)

// Spec describes a stream to the stream server: what it delivers, to whom, and
// how its transport wants it served.
type Spec struct {
	// Label names the transport in metrics and listings.
	Label    string
	Database *sluice.Database
	// Grant is the access the stream is delivered with, guarded from
	// admission to release.
	Grant *sluice.Grant
	// VariablesBytes is what the stream keeps of its variables for its
	// life (a GraphQL stream's, estimated by its transport; 0: none),
	// charged to its user's and the process's budgets for them with its
	// guard, from admission to release (changefeed.Hub.Guard).
	VariablesBytes int64
	// Heartbeat is the keep-alive interval; 0: none (a connection that
	// keeps itself alive).
	Heartbeat time.Duration
	// Logger logs the stream's end, with Attrs and the stream's own
	// attributes (added only when something is logged); nil: nothing is
	// logged.
	Logger *slog.Logger
	Attrs  []any
	// Classes limits what a subscription of its own reads, and
	// ClassesVersion is the schema version they were computed for (see
	// changefeed.Options); nil: every class.
	Classes        []string
	ClassesVersion int

	// Share, when set, is the share of identical subscribers the stream
	// joins (from now, or, for a share of results, from its newest
	// result); otherwise the stream has a subscription of its own from
	// From (nil: from now), evaluated by Evaluator.
	Share     *ShareOptions
	From      *sluice.Position
	Evaluator Evaluator
	// Detached returns the evaluator of a member that fell out of its
	// share's history and continues on a subscription of its own, given
	// its share's (which it must not use: the share's goroutine does).
	// Kept for the stream's whole life, it should hold nothing of the
	// stream's own.
	Detached func(shared Evaluator) Evaluator

	// Admit, when set, is asked first, before anything is read for the
	// stream (a budget): it returns what the stream holds, released once
	// when it ends, or the error refusing it.
	Admit func() (release func(), err error)
	// Prepare, when set, runs once the stream is guarded and before it
	// joins its share: a resumed live query reads what its client is
	// owed (which the sink's Ready writes after the readiness frame) and
	// returns which of its share's entries to write (nil: all).
	Prepare func(ctx context.Context) (keep func(*Entry) bool, err error)

	// Conn, when set, is the connection that carries the stream among
	// others (graphql-ws, single connection mode): its shares of one
	// database are evaluated by one feed, and its members are served by
	// the connection's pump rather than a goroutine each. Done is called
	// once the stream is over and released.
	Conn *Conn
	Done func()
}

// Sink is a transport's end of one stream: it frames and writes. A Sink
// is used by one goroutine at a time (the stream's, or whoever serves it).
type Sink interface {
	// Refuse answers a stream that may not start (a stream cap, a budget,
	// access lost since the request was authorized), before anything was
	// written: an HTTP error, say.
	Refuse(err error)
	// Fail buffers what answers a stream that could not start once
	// admitted (a resume from an expired position, an error preparing
	// it); the server flushes. The client must learn why: a resume that
	// cannot be honoured is never a silent gap.
	Fail(err error)
	// Ready buffers the start of the response and the readiness frame
	// (and what a resumed stream is owed first); the server flushes it
	// once the stream is registered. sub is the id of the hub
	// subscription serving it (its share's), for the frame that names it.
	Ready(sub uint64)
	// Shared reports whether the frames a share builds once for all its
	// members (Entry.Frames) are this sink's frames, written with
	// WriteFrames; otherwise each event goes through WriteEvent.
	Shared() bool
	// WriteFrames writes prepared frames; an error means the client left.
	WriteFrames(frames []byte) error
	// WriteEvent buffers one event.
	WriteEvent(ev sluice.Event)
	// Spill hands what is buffered on when it grew large, between the
	// events of a batch; Flush sends it. An error means the client left.
	Spill() error
	Flush() error
	// Ping buffers a keep-alive (a no-op where the connection keeps
	// itself alive).
	Ping()
	// Idle returns how long ago something was last written.
	Idle() time.Duration
	// End buffers the stream's last frames after it ended with err: a
	// normal end for nil, ErrShutdown and ErrClosed, an error otherwise.
	// The server flushes.
	End(err error)
}

// HTTPSink is a Sink that writes a response of its own: the server may
// park its stream while it is idle (httpstream.Writer.Park), holding no
// goroutine and none of net/http's buffers for it.
type HTTPSink interface {
	Sink
	HTTP() *httpstream.Writer
}

// ErrShutdown ends every stream when the server shuts down; ErrClosed a
// stream ended by its own client. Sinks end the stream normally for both.
var (
	ErrShutdown = changefeed.ErrShutdown
	ErrClosed   = changefeed.ErrClosed
)

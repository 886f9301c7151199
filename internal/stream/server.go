package stream

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/inflight"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// Server serves every stream of a process, whatever its transport, from
// the change feed's hub: it owns a stream's life from admission to
// release (Open, Serve), the shares of identical subscribers, and the
// parked streams. It is safe for concurrent use.
type Server struct {
	hub     *changefeed.Hub
	metrics *metrics.Stream // nil: none
	logger  *slog.Logger
	now     func() time.Time // Options.Now
	shares  *shareSet
	// parker serves the parked streams; nil when streams are not parked.
	parker *parker
	// wg counts the goroutines that serve streams off a request's
	// goroutine (a stream continued from a parked one, a connection's
	// stream of its own): Close waits for them.
	wg sync.WaitGroup
	// images bounds the change images the evaluations of every stream
	// hold at once (Options.ImageBytes; nil: no bound).
	images *imageBudget
	// output bounds the output streams hold formed and not yet written
	// (Options.OutputBytes, OutputBytesPerUser; nil: no bound).
	output *outputBudget
}

// Options configure a Server. Zero values take the defaults.
type Options struct {
	Logger  *slog.Logger
	Metrics *metrics.Stream
	// NoPark serves every stream on a goroutine of its own: no
	// connection is taken from net/http (see Spec and park.go).
	NoPark bool
	// Workers is how many goroutines write to the parked streams
	// (default GOMAXPROCS).
	Workers int
	// Now is the clock the delivery latency is measured by, the one the
	// change feed reads the log by (changefeed.HubOptions.Now,
	// TailerOptions.Now; default time.Now).
	Now func() time.Time
	// ImageBytes bounds the bytes of change images that the evaluations
	// of pieces by every stream hold at once (default DefaultImageBytes;
	// see imageBudget).
	ImageBytes int64
	// OutputBytes and OutputBytesPerUser bound the output the streams of
	// the process, and those of one user, hold formed and not yet written
	// to their clients (see outputBudget; 0: no bound).
	OutputBytes, OutputBytesPerUser int64
}

// New returns the Server of hub.
func New(hub *changefeed.Hub, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ImageBytes <= 0 {
		o.ImageBytes = DefaultImageBytes
	}
	e := &Server{hub: hub, metrics: o.Metrics, logger: o.Logger, now: o.Now, images: newImageBudget(o.ImageBytes)}
	var waiting prometheus.Gauge
	if o.Metrics != nil {
		waiting = o.Metrics.OutputWaiting
	}
	e.output = newOutputBudget(o.OutputBytes, o.OutputBytesPerUser, waiting)
	e.shares = newShareSet(e)
	if !o.NoPark {
		p, err := newParker(e, o.Workers)
		if err != nil {
			// Streams still work, each on a goroutine of its own.
			o.Logger.Warn("streams are not parked: each holds a goroutine", "err", err)
		}
		e.parker = p
	}
	return e
}

// Close waits, until ctx ends, for the streams served off a request's
// goroutine (parked ones among them) to end. Past ctx, it ends the
// parked streams left and closes the connections of those that were
// parked and now wait on a client that does not read (each write may
// wait write_timeout), logs a warning naming how many, and waits for
// them, which end at once. Call it once the hub is closed: every stream
// ends then, and writes its end. The streams of a connection that
// carries many end with their connection; those on a request's goroutine
// are the HTTP server's to cut.
func (e *Server) Close(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		// The parker first: a parked stream that continues on a
		// goroutine joins wg before it leaves the parker (unpark).
		if e.parker != nil {
			e.parker.wait()
		}
		e.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		if e.parker != nil {
			// Nothing to name when every stream ended in time (the
			// deadline may have run out waiting for others: the
			// GraphQL WebSockets closed before).
			if parked, writing := e.parker.abort(); parked+writing > 0 {
				e.logger.Warn("shutdown_timeout ran out: ending the parked streams left, and closing the connections of the streams writing to clients that do not read",
					"parked", parked, "writing", writing)
			}
		}
		<-done
	}
	if e.parker != nil {
		e.parker.stop()
	}
}

// Reserve counts a stream that is not open yet (a single connection mode
// reservation) toward the stream caps and guards it against access
// changes as Open does: end is called once when an access change takes
// grant away (from the goroutine applying it: it must not block). It
// fails as Open refuses a stream. Call release when the reservation ends.
func (e *Server) Reserve(ctx context.Context, grant *sluice.Grant, end func(error)) (release func(), err error) {
	g, err := e.hub.Guard(ctx, grant, 0, end) // a reservation keeps no variables
	if err != nil {
		return nil, err
	}
	return g.Release, nil
}

// SyncAccess applies every access change up to version v to the open
// streams of this process (see changefeed.Hub.SyncAccess): what a stream
// reads itself in a snapshot of access version v (a live query's result)
// may be handed on only once it returned nil.
func (e *Server) SyncAccess(ctx context.Context, v int64) error {
	if v <= 0 {
		return nil // a snapshot that read nothing
	}
	return e.hub.SyncAccess(ctx, v)
}

// Scan reads the log of database d after position from up to the end of
// commit upTo, in pieces, and calls fn with each until it returns false
// (see changefeed.Hub.Scan).
func (e *Server) Scan(ctx context.Context, d *sluice.Database, from sluice.Position, upTo int64, fn func(*sluice.Commit) bool) error {
	return e.hub.Scan(ctx, d, from, upTo, fn)
}

// Serve opens a stream (Open) and serves it (Stream.Serve): the one call
// a transport makes, with what it needs, a spec and a sink. It returns
// the stream when it is served without this goroutine (an operation of a
// connection, Spec.Conn, which Stop ends), nil when it ended or never
// started.
func (e *Server) Serve(ctx context.Context, spec Spec, sink Sink) *Stream {
	s := e.Open(ctx, spec, sink)
	if s == nil {
		return nil
	}
	if s.Serve() {
		return s
	}
	return nil
}

// Open admits a stream and registers it, in the one order every stream
// follows:
//
//  1. admission: Spec.Admit (a budget), then the guard, which enforces
//     the stream caps, charges Spec.VariablesBytes to the budgets of the
//     streams' variables until the stream is released, and from now on ends the stream at an access change
//     before any later commit reaches it (a refusal: Sink.Refuse);
//  2. Spec.Prepare (what a resumed stream is owed), then registration: a
//     share joined (Spec.Share) or a subscription of its own from
//     Spec.From (a failure: Sink.Fail, such as an expired position);
//  3. readiness: the sink's readiness frame (Sink.Ready) is flushed only
//     now, so any commit that starts after the client read it is
//     delivered, and the heartbeat starts.
//
// Whatever fails releases what was registered. Open returns the stream
// to serve, or nil when it is over (answered, or the client left).
func (e *Server) Open(ctx context.Context, spec Spec, sink Sink) *Stream {
	// beat is made here, before anything may kick the stream (a retry by
	// the output budget comes from another goroutine), heartbeat or not.
	s := &Stream{e: e, spec: spec, ctx: ctx, sink: sink, beat: make(chan struct{}, 1)}
	if hs, ok := sink.(HTTPSink); ok {
		s.http = hs.HTTP()
	}
	if spec.Admit != nil {
		release, err := spec.Admit()
		if err != nil {
			s.logRefusal(err)
			sink.Refuse(err)
			return nil
		}
		s.release = release
	}
	g, err := e.hub.Guard(ctx, spec.Grant, spec.VariablesBytes, s.ender.End)
	if err != nil {
		s.Release()
		s.logRefusal(err)
		sink.Refuse(err)
		return nil
	}
	s.guard = g
	// Counted among its user's streams from now on, the request that
	// opened it leaves its user's requests in flight.
	inflight.Handover(ctx)
	if spec.Prepare != nil {
		keep, err := spec.Prepare(ctx)
		if err != nil {
			s.Release()
			s.fail(err)
			return nil
		}
		s.keep = keep
	}
	if spec.Share != nil {
		err = s.join(*spec.Share)
	} else {
		err = s.subscribe(spec.From, spec.Evaluator)
	}
	if err != nil {
		s.Release()
		s.fail(err)
		return nil
	}
	if spec.Logger != nil && spec.Logger.Enabled(ctx, slog.LevelDebug) {
		s.logger().Debug("stream opened", "shared", s.m != nil)
	}
	sink.Ready(s.SubscriptionID())
	if sink.Flush() != nil {
		s.Release()
		return nil
	}
	if spec.Heartbeat > 0 {
		s.hb = time.AfterFunc(spec.Heartbeat, s.wake)
	}
	return s
}

// SubscriptionInfo describes one open hub subscription (a share's, or a
// stream's own).
type SubscriptionInfo = changefeed.SubscriptionInfo

// Subscriptions lists the open hub subscriptions of the process.
func (e *Server) Subscriptions() []SubscriptionInfo { return e.hub.Subscriptions() }

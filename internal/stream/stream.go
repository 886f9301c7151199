// Package stream is the one engine that serves every stream of events to a
// client, whatever its protocol: the REST change stream, GraphQL
// subscriptions over SSE (both graphql-sse modes), NDJSON, Apollo
// multipart and graphql-ws. A transport is a thin Sink (write frames, an
// event, a ping, the end); the engine holds what every stream must get
// right the same way:
//
//   - readiness: the subscription is registered (a share joined, or a
//     subscription of its own catching up from the log) before the
//     readiness frame is written, so a commit that starts after the
//     client read it is delivered;
//   - the guard: an access change ends the stream before any later commit
//     reaches it (changefeed's Guard and Ender), and nothing more is
//     written then, not even what was queued;
//   - the member loop: take a share's prepared entries, write them, flush
//     once; a member that fell out of its share's history continues on a
//     subscription of its own from where it was (lossless);
//   - a subscription of its own (a resume): evaluate each piece, batch up
//     to MaxBatch queued pieces per flush, spilling as the buffer grows;
//     what was queued before the end is still owed, in order;
//   - heartbeats after a quiet spell only (a timer function, not a timer
//     channel in the loop), and the client leaving (its context);
//   - the delivered counter and the commit-to-delivery latency.
//
// A stream on a connection of its own runs Serve on its request's
// goroutine. The streams of a multiplexed connection (graphql-ws, single
// connection mode) that share their events are served by one Pump per
// connection instead of a goroutine each (pump.go).
package stream

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// Sink is a transport's end of one stream: it frames and writes. A Sink
// is used by one goroutine at a time (the stream's, or its pump's).
type Sink interface {
	// Shared reports whether the frames a share builds once for all its
	// members (changefeed.Entry.Frames) are this sink's frames, written
	// with WriteFrames; otherwise each event goes through WriteEvent.
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
	// End buffers the stream's last frames after its subscription ended
	// with err: a normal end for nil, changefeed.ErrShutdown and
	// changefeed.ErrClosed, an error otherwise. The engine flushes.
	End(err error)
}

// MaxBatch bounds the pieces a subscription of its own writes before one
// flush.
const MaxBatch = 64

// metricsEvery is how often a stream adds what it delivered to the
// delivered counter while it writes (the rest at its next heartbeat, and
// when it ends): a shared counter added to by every stream on every write
// costs a few percent of the CPU of a large fan-out.
const metricsEvery = time.Second

// Options describe a stream.
type Options struct {
	Hub     *changefeed.Hub
	Metrics *metrics.Stream // nil: none
	Logger  *slog.Logger
	// Label names the transport in metrics and listings.
	Label    string
	Database *sluice.Database
	// Classes limits what a subscription of its own reads (see
	// changefeed.Options.Classes); nil: every class.
	Classes []string
	// Heartbeat is the keep-alive interval; 0: none (a connection that
	// keeps itself alive).
	Heartbeat time.Duration
	// Detached returns the evaluator of a member that continues on a
	// subscription of its own, given its share's (which it must not use:
	// the share's goroutine does). Kept by a stream for its whole life,
	// it should hold nothing of the stream's own.
	Detached func(shared changefeed.Evaluator) changefeed.Evaluator
	// OnRelease, when set, is called once, when the stream is released
	// (what it holds of a budget).
	OnRelease func()
}

// Stream is one stream being served. Make it with New, register it
// (Guard, then Join or Subscribe), write the readiness frame (Ready),
// then Serve it or hand it to a Pump. Release undoes the registration of
// a stream that does not get to be served.
type Stream struct {
	o    Options
	ctx  context.Context
	sink Sink

	guard *changefeed.Guard
	// ender ends whatever serves the stream when the guard says so.
	ender changefeed.Ender
	// Exactly one of m (a share's member) and sub (a subscription of its
	// own) is set once registered.
	m   *changefeed.Member
	sub *changefeed.Subscription
	ev  changefeed.Evaluator // sub's
	buf []changefeed.Entry
	// keep, when set, says which of its share's entries a member writes
	// (see Filter).
	keep func(*changefeed.Entry) bool

	// beat receives a value when a heartbeat may be due or, for a member,
	// when its share has something new (see wait): a timer function and
	// the share send it, rather than the loop selecting on a timer's
	// channel, because every wait on a timer channel adds the timer to the
	// runtime's heap and removes it again (about 2% of a stream's CPU),
	// and thousands of members waiting on their share's one channel
	// contend for its lock on every commit. beatDue tells a heartbeat
	// from a notification.
	beat    chan struct{}
	beatDue atomic.Bool
	hb      *time.Timer

	deliveredCounter prometheus.Counter
	latency          prometheus.Observer
	// unreported events were delivered since the counter was last added
	// to, at reported.
	unreported int
	reported   time.Time
}

// New returns a stream for the client whose context is ctx, writing to
// sink.
func New(ctx context.Context, sink Sink, o Options) *Stream {
	return &Stream{o: o, ctx: ctx, sink: sink}
}

// Guard registers the stream's access grant: an access change from now on
// ends the stream before any later commit reaches it. It fails like
// Hub.Guard (a stream cap: refuse the stream with the error).
func (s *Stream) Guard(grant *sluice.Grant) error {
	g, err := s.o.Hub.Guard(s.ctx, grant, s.ender.End)
	if err != nil {
		return err
	}
	s.guard = g
	return nil
}

// Join makes the stream a member of the share o describes (its
// Transport and Database are the stream's).
func (s *Stream) Join(o changefeed.ShareOptions) error {
	o.Transport, o.Database = s.o.Label, s.o.Database
	m, err := s.o.Hub.Join(s.ctx, o)
	if err != nil {
		return err
	}
	if err := s.ender.Serve(m); err != nil {
		m.Leave()
		return err
	}
	s.m = m
	return nil
}

// Subscribe gives the stream a subscription of its own from position from
// (nil: from now), evaluated by ev. It fails like Hub.Subscribe (a Gone
// error for a position older than history).
func (s *Stream) Subscribe(from *sluice.Position, ev changefeed.Evaluator) error {
	sub, err := s.o.Hub.Subscribe(s.ctx, s.o.Database, from, changefeed.Options{Classes: s.o.Classes, Transport: s.o.Label})
	if err != nil {
		return err
	}
	if err := s.ender.Serve(sub); err != nil {
		sub.Close()
		return err
	}
	s.sub, s.ev = sub, ev
	return nil
}

// SubscriptionID returns the id of the hub subscription serving the
// stream (its share's for a member), for logs and listings.
func (s *Stream) SubscriptionID() uint64 {
	if s.sub != nil {
		return s.sub.ID()
	}
	if s.m != nil {
		return s.m.SubscriptionID()
	}
	return 0
}

// Filter makes a member write only the entries of its share that keep
// returns true for (a resumed live query skips the results its client
// has). Call it before Ready.
func (s *Stream) Filter(keep func(*changefeed.Entry) bool) { s.keep = keep }

// Member returns the share member serving the stream, nil for a
// subscription of its own.
func (s *Stream) Member() *changefeed.Member { return s.m }

// Ready flushes the readiness frame the caller buffered, once the stream
// is registered, and starts its heartbeat. It reports false when the
// client is gone (then Release the stream).
func (s *Stream) Ready() bool {
	if s.sink.Flush() != nil {
		return false
	}
	if s.o.Heartbeat > 0 {
		s.beat = make(chan struct{}, 1)
		s.hb = time.AfterFunc(s.o.Heartbeat, s.wake)
	}
	return true
}

// Release undoes the registration of a stream that is not served (or
// whose Serve returned): it leaves the share, closes the subscription,
// releases the guard, stops the heartbeat and counts what is left.
func (s *Stream) Release() {
	if s.o.OnRelease != nil {
		s.o.OnRelease()
		s.o.OnRelease = nil
	}
	s.reportDelivered()
	if s.hb != nil {
		s.hb.Stop()
	}
	if s.m != nil {
		s.m.Notify(nil)
		s.m.Leave()
	}
	if s.sub != nil {
		s.sub.Close()
	}
	if s.guard != nil {
		s.guard.Release()
	}
}

// wake makes a heartbeat pending.
func (s *Stream) wake() {
	s.beatDue.Store(true)
	s.kick()
}

// kick makes a receive on beat pending, unless one is. It never blocks.
func (s *Stream) kick() {
	select {
	case s.beat <- struct{}{}:
	default:
	}
}

// Serve writes the stream's events until the client leaves, a write fails
// or the subscription ends (then the sink's End), and releases it.
func (s *Stream) Serve() {
	defer s.Release()
	if s.m != nil {
		if !s.serveMember() {
			return
		}
	}
	s.serveOwn()
}

// serveMember serves a share member until it ends; it reports true when
// the member was detached and the stream continues on a subscription of
// its own (s.sub set).
func (s *Stream) serveMember() bool {
	if s.beat == nil {
		s.beat = make(chan struct{}, 1)
	}
	// Notified on beat from now on: what was published before, the first
	// take takes.
	s.m.Notify(s.kick)
	gone := s.ctx.Done()
	for {
		switch s.step() {
		case stepEnded:
			return false
		case stepDetached:
			return s.detach()
		}
		select {
		case <-s.beat:
			if s.beatDue.Swap(false) && !s.heartbeat() {
				return false
			}
		case <-gone:
			return false
		}
	}
}

// stepResult says what a member does after a step.
type stepResult int

const (
	stepWait     stepResult = iota // wait for a notification
	stepEnded                      // over: the end is written, or the client left
	stepDetached                   // continue on a subscription of its own
)

// step takes and writes what the member may take now.
func (s *Stream) step() stepResult {
	m := s.m
	for {
		var wake <-chan struct{}
		var state changefeed.TakeState
		s.buf, wake, state = m.Take(s.buf[:0])
		if len(s.buf) > 0 {
			err := s.writeEntries(s.buf)
			clear(s.buf) // do not hold frames while waiting
			if err != nil {
				return stepEnded
			}
			if wake == nil {
				continue // more to take
			}
		}
		switch state {
		case changefeed.TakeDetached:
			return stepDetached
		case changefeed.TakeEnded:
			s.end(m.Err())
			return stepEnded
		case changefeed.TakeRevoked:
			s.end(s.ender.Err())
			return stepEnded
		}
		return stepWait
	}
}

// detach continues member m, which fell out of its share's history, on a
// subscription of its own from where it was. It reports false when that
// failed (the end is written).
func (s *Stream) detach() bool {
	m := s.m
	m.Notify(nil)
	from := m.From()
	sub, err := s.o.Hub.Subscribe(s.ctx, s.o.Database, &from, changefeed.Options{Classes: s.o.Classes, Transport: s.o.Label})
	m.Left() // its own subscription holds its commits now (Release leaves the share)
	if err != nil {
		s.end(err)
		return false
	}
	s.sub = sub
	if err := s.ender.Serve(sub); err != nil {
		s.end(err)
		return false
	}
	s.ev = s.o.Detached(m.Evaluator())
	return true
}

// serveOwn serves the stream's own subscription.
func (s *Stream) serveOwn() {
	sub := s.sub
	gone := s.ctx.Done()
	for {
		select {
		case c := <-sub.Commits():
			if !s.writeCommits(c) {
				return
			}
		case <-sub.Done():
			// What was queued before the end is still owed, in order,
			// unless the stream lost its access: then nothing more.
			for drained := changefeed.IsRevoked(sub.Err()); !drained; {
				select {
				case c := <-sub.Commits():
					if !s.writeCommits(c) {
						return
					}
				default:
					drained = true
				}
			}
			s.end(sub.Err())
			return
		case <-s.beat:
			// Only heartbeats arrive here once a detached member's share
			// stopped notifying it; a late notification is harmless.
			if s.beatDue.Swap(false) && !s.heartbeat() {
				return
			}
		case <-gone:
			return
		}
	}
}

// writeEntries writes a share's entries, then flushes once. An error means
// the client left.
func (s *Stream) writeEntries(es []changefeed.Entry) error {
	n := 0
	shared := s.sink.Shared()
	for i := range es {
		e := &es[i]
		if s.keep != nil && !s.keep(e) {
			s.m.Untake() // its client does not have it: no delta from it
			continue
		}
		n += len(e.Events)
		if shared {
			if err := s.sink.WriteFrames(e.Frames); err != nil {
				return err
			}
			continue
		}
		for _, ev := range e.Events {
			s.sink.WriteEvent(ev)
		}
		if err := s.sink.Spill(); err != nil {
			return err
		}
	}
	if err := s.sink.Flush(); err != nil {
		return err
	}
	s.delivered(n)
	for i := range es {
		e := &es[i]
		// A member observes a commit's latency only for the entries it
		// took last of all members: one observation per commit for the
		// whole fan-out, its slowest write.
		if e.Last {
			s.observeLatency(e.Time)
		}
	}
	return nil
}

// writeCommits writes the events of piece c and of up to MaxBatch-1
// further pieces already queued, then flushes once. It reports false when
// the stream is over (the end is written, or the client left).
func (s *Stream) writeCommits(c *sluice.Commit) bool {
	n := 0
	var first time.Time
	for i := 0; ; i++ {
		evs, _, err := s.ev.Events(s.ctx, c)
		if err != nil {
			if s.ctx.Err() == nil {
				s.end(err)
			}
			return false
		}
		for _, ev := range evs {
			s.sink.WriteEvent(ev)
		}
		if len(evs) > 0 && n == 0 {
			first = c.Time
		}
		n += len(evs)
		// What is buffered goes to the connection as it grows, so a
		// burst of large pieces is not held whole before one flush.
		if s.sink.Spill() != nil {
			return false
		}
		if i == MaxBatch-1 {
			break
		}
		select {
		case c = <-s.sub.Commits():
			continue
		default:
		}
		break
	}
	if n == 0 {
		return true
	}
	if s.sink.Flush() != nil {
		return false
	}
	s.delivered(n)
	s.observeLatency(first)
	return true
}

// heartbeat handles a beat: it reports false when the stream ends (the
// ping could not be written), and otherwise pings, unless the stream
// wrote something within the interval, and schedules the next beat.
// Heartbeats are keep-alives only: access changes end streams through
// their guard.
func (s *Stream) heartbeat() bool {
	if s.hb == nil {
		return true
	}
	s.reportDelivered()
	if !httpstream.PingDue(s.hb, s.sink.Idle(), s.o.Heartbeat) {
		return true // it wrote meanwhile: alive without a ping
	}
	s.sink.Ping()
	return s.sink.Flush() == nil
}

// end writes the stream's end after its subscription ended with err,
// unless the client already left (there is no one to tell).
func (s *Stream) end(err error) {
	if s.ctx.Err() != nil {
		return
	}
	if err != nil && !errors.Is(err, changefeed.ErrShutdown) && !errors.Is(err, changefeed.ErrClosed) {
		// Logged as every transport logs an error (sluice.Show), with the
		// stream's attributes only when its level is enabled.
		sh := sluice.Show(err)
		if s.o.Logger != nil && s.o.Logger.Enabled(context.Background(), sh.Level) {
			sh.Log(context.Background(), s.logger(), "stream ended", err)
		}
	}
	s.sink.End(err)
	_ = s.sink.Flush()
}

// logger returns the stream's logger, built when something is logged: a
// logger with attributes costs about half a KiB per stream.
func (s *Stream) logger() *slog.Logger {
	l := s.o.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	l = l.With("transport", s.o.Label)
	if s.o.Database != nil {
		l = l.With("database", s.o.Database.Path())
	}
	if id := s.SubscriptionID(); id != 0 {
		l = l.With("sub", id)
	}
	return l
}

// delivered counts n events written.
func (s *Stream) delivered(n int) {
	if s.o.Metrics == nil || n == 0 {
		return
	}
	s.series()
	s.unreported += n
	// A stream with a heartbeat counts the rest at its next beat (see
	// heartbeat), within an interval of its last write; one without (an
	// operation of a multiplexed connection) counts every write.
	if now := time.Now(); s.hb == nil || now.Sub(s.reported) >= metricsEvery {
		s.reportDelivered()
		s.reported = now
	}
}

// observeLatency observes the delivery latency of a commit made at t, just
// written.
func (s *Stream) observeLatency(t time.Time) {
	if s.o.Metrics == nil || t.IsZero() {
		return
	}
	s.series()
	s.latency.Observe(time.Since(t).Seconds())
}

// series looks up the stream's labelled series, once per stream rather
// than per write.
func (s *Stream) series() {
	if s.deliveredCounter == nil {
		m := s.o.Metrics
		s.deliveredCounter = m.Delivered.WithLabelValues(s.o.Label, strconv.FormatInt(s.o.Database.ID, 10))
		s.latency = m.Latency.WithLabelValues(s.o.Label)
	}
}

// reportDelivered adds what was delivered and not yet counted to the
// delivered counter.
func (s *Stream) reportDelivered() {
	if s.unreported > 0 {
		s.deliveredCounter.Add(float64(s.unreported))
		s.unreported = 0
	}
}

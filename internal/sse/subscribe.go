package sse

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/httpstream"
)

// transportLabel names the framings in metrics and subscription listings.
func transportLabel(f framing) string {
	switch f {
	case framingNDJSON:
		return "graphql-ndjson"
	case framingMultipart:
		return "graphql-multipart"
	}
	return "graphql-sse"
}

// session is one subscription stream being served.
type session struct {
	t *transport
	// r is the request until the stream started (ready); ctx is its
	// context, which ends when the client leaves.
	r   *http.Request
	ctx context.Context
	st  framer
	gs  *graph.Subscription
	// asm gathers the pieces of large commits for a subscription of the
	// session's own (see pieces.go); made when one starts (a share
	// member's share evaluates for it).
	asm   *assembler
	db    *sluice.Database
	label string
	// beat receives a value when a heartbeat is due: a timer function
	// sends it, rather than the loops selecting on a ticker's channel,
	// because every wait on a timer channel adds the timer to the
	// runtime's heap and removes it again (about 2% of a stream's CPU).
	// The loops see the client leave on the request context's Done
	// channel (which the request's cancelation allocates anyway), not
	// through a context.AfterFunc (about 0.5 KB a stream).
	//
	// A share member's loop also receives its share's notifications on
	// beat (kick), so that it waits on channels of its own: thousands of
	// members waiting on the share's one channel contend for its lock
	// on every commit. beatDue tells a heartbeat from a notification.
	beat      chan struct{}
	beatDue   atomic.Bool
	heartbeat time.Duration
	hb        *time.Timer
	// subID is the change feed subscription serving the stream (the
	// group's for a member), for logs.
	subID   uint64
	grouped bool
	// Exactly one of m (a group member) and sub (a subscription of its
	// own) is set once the session is registered.
	m   *changefeed.Member
	sub *changefeed.Subscription
	// guard ends the stream when an access change takes its grant away;
	// ender ends whatever serves the stream at that time.
	guard *changefeed.Guard
	ender changefeed.Ender

	deliveredCounter prometheus.Counter
	latency          prometheus.Observer
	// unreported events were delivered since the counter was last added
	// to, at reported (see delivered).
	unreported int
	reported   time.Time
}

// subscribe starts serving a subscription operation: it registers
// (joining the group of identical subscribers when it starts from now,
// with a change feed subscription of its own when it resumes) and writes
// the readiness frame. It returns the session to serve, or nil when the
// request is over (an error was answered, or the client left).
func (t *transport) subscribe(r *http.Request, st framer, req *request, op *graphql.OperationContext) *session {
	ctx := r.Context()
	greq := graph.RequestFrom(ctx)
	s := &session{t: t, r: r, ctx: r.Context(), st: st, label: st.label()}
	gs, err := t.es.NewSubscription(op, greq)
	if err != nil {
		s.fail(err)
		return nil
	}
	if t.opts.Hub == nil {
		s.fail(sluice.Errorf(sluice.CodeUnavailable, "the change feed is not running"))
		return nil
	}
	s.gs, s.db = gs, greq.DB
	// The guard comes first: an access change from now on ends the
	// stream before any later commit reaches it (changefeed/access.go).
	guard, err := t.opts.Hub.Guard(ctx, engine.Grant(ctx, greq.User, greq.DB, t.es.Role()), s.ender.End)
	if err != nil {
		// Refused before any stream starts (a stream cap, or access lost
		// since the request was authorized): an HTTP error, 429 or 503
		// with Retry-After.
		st.refuse(err)
		return nil
	}
	s.guard = guard
	if req.from == nil {
		if key, ok := keyOf(t.es, req); ok {
			var feed *changefeed.Feed
			if mo, ok := st.(*muxOp); ok {
				feed = &mo.out.feed // the connection's
			}
			m, err := t.join(ctx, key, gs, greq.DB, s.label, feed)
			if err != nil {
				guard.Release()
				s.fail(err)
				return nil
			}
			// The share's change feed subscription id ties the stream to
			// /api/admin/subscriptions and the hub's logs.
			s.subID, s.grouped = m.SubscriptionID(), true
			// A member evaluates commits only once detached, then with the
			// share's subscription (the same schema, role, operation and
			// variables; Events keeps no state between calls): its own
			// operation and subscription, about a KiB, are not kept for
			// the life of the stream.
			s.gs = m.Evaluator().(*evaluator).gs
			if err := s.ender.Serve(m); err != nil {
				m.Leave()
				guard.Release()
				s.fail(err)
				return nil
			}
			if !s.ready(req) {
				m.Leave()
				guard.Release()
				return nil
			}
			s.m = m
			return s
		}
	}
	sub, err := t.opts.Hub.Subscribe(ctx, greq.DB, req.from, changefeed.Options{Classes: gs.Classes(), Transport: s.label})
	if err != nil {
		guard.Release()
		// An expired position is an error on the stream, never a silent
		// gap: the client re-reads the current state.
		s.fail(err)
		return nil
	}
	s.subID = sub.ID()
	if err := s.ender.Serve(sub); err != nil {
		sub.Close()
		guard.Release()
		s.fail(err)
		return nil
	}
	if !s.ready(req) {
		sub.Close()
		guard.Release()
		return nil
	}
	s.sub = sub
	return s
}

// serve writes one next per event until the client leaves (nothing more
// is written) or the subscription ends (an error next unless the server
// is shutting down, then complete), then releases the subscription.
func (s *session) serve() {
	defer s.guard.Release()
	if s.m != nil {
		defer s.m.Leave()
		s.member(s.m)
		return
	}
	defer s.sub.Close()
	s.own(s.sub)
}

// logger returns the session's logger. It is built when something is
// logged rather than kept: a logger with attributes costs about half a
// KiB per stream.
func (s *session) logger() *slog.Logger {
	l := s.t.opts.Logger.With("transport", s.label)
	if s.db != nil {
		l = l.With("database", s.db.Path())
	}
	if s.subID != 0 {
		l = l.With("sub", s.subID, "grouped", s.grouped)
	}
	return l
}

// ready writes the readiness frame, once the subscription is registered:
// a commit that starts after the client reads it is delivered.
func (s *session) ready(req *request) bool {
	if s.t.opts.Logger.Enabled(s.ctx, slog.LevelDebug) {
		s.logger().Debug("graphql subscription opened")
	}
	s.st.start(s.r)
	s.r = nil // started: the request (a copy of it per layer) may go
	s.st.connected(req.named)
	if s.st.flush() != nil {
		return false
	}
	s.heartbeat = req.heartbeat
	if req.heartbeat > 0 { // 0: the connection it shares keeps itself alive
		s.beat = make(chan struct{}, 1)
		s.hb = time.AfterFunc(req.heartbeat, s.wake)
	}
	return true
}

// wake makes a heartbeat pending.
func (s *session) wake() {
	s.beatDue.Store(true)
	s.kick()
}

// kick makes a receive on beat pending, unless one is. It never blocks.
func (s *session) kick() {
	select {
	case s.beat <- struct{}{}:
	default:
	}
}

// fail ends the stream with an error next and complete. When the client
// already left (its request context ended, which also cancels whatever was
// evaluating for it), there is no one to tell.
func (s *session) fail(err error) {
	if s.ctx.Err() != nil {
		return
	}
	s.st.start(s.r)
	s.st.failed(gqlerror.List{gqlError(s.logger(), err)})
	_ = s.st.flush()
}

// finish ends the stream after the subscription ended with err: complete,
// preceded by an error next unless the server is shutting down.
func (s *session) finish(err error) {
	if s.ctx.Err() != nil {
		return
	}
	if err != nil && !errors.Is(err, changefeed.ErrShutdown) && !errors.Is(err, changefeed.ErrClosed) {
		s.logger().Info("graphql subscription ended", "err", err)
		s.st.failed(gqlerror.List{gqlError(s.logger(), err)})
	} else {
		s.st.complete()
	}
	_ = s.st.flush()
}

// member serves a group member until it ends; a member detached for
// falling behind continues on a change feed subscription of its own.
func (s *session) member(m *changefeed.Member) {
	defer s.wrapUp()
	if s.beat == nil {
		s.beat = make(chan struct{}, 1)
	}
	// Notified on beat from now on: what was published before, the first
	// Take takes.
	m.Notify(s.kick)
	gone := s.ctx.Done()
	var buf []changefeed.Entry
	for {
		var wake <-chan struct{}
		var state changefeed.TakeState
		buf, wake, state = m.Take(buf[:0])
		if len(buf) > 0 {
			err := s.writeEntries(buf)
			clear(buf) // do not hold payloads while waiting
			if err != nil {
				m.Notify(nil)
				return
			}
			if wake == nil {
				continue // more to take
			}
		}
		switch state {
		case changefeed.TakeDetached:
			m.Notify(nil)
			s.detach(m)
			return
		case changefeed.TakeEnded:
			m.Notify(nil)
			s.finish(m.Err())
			return
		case changefeed.TakeRevoked:
			m.Notify(nil)
			s.finish(s.ender.Err())
			return
		}
		select {
		case <-s.beat:
			if s.beatDue.Swap(false) && !s.heartbeatDue() {
				m.Notify(nil)
				return
			}
		case <-gone:
			m.Notify(nil)
			return
		}
	}
}

// detach serves member m, which fell out of its share's history, with a
// subscription of its own from where it was, until it ends.
func (s *session) detach(m *changefeed.Member) {
	from := m.From()
	sub, err := s.t.opts.Hub.Subscribe(s.ctx, s.db, &from, changefeed.Options{Classes: s.gs.Classes(), Transport: s.label})
	m.Left() // its own subscription holds its commits now
	if err != nil {
		s.finish(err)
		return
	}
	defer sub.Close()
	if err := s.ender.Serve(sub); err != nil {
		s.finish(err)
		return
	}
	s.own(sub)
}

// writeEntries writes the events of es, then flushes once.
func (s *session) writeEntries(es []changefeed.Entry) error {
	n := 0
	for _, e := range es {
		n += len(e.Events)
		if s.st.shared() {
			if err := s.st.writeShared(e.Frames); err != nil {
				return err
			}
			continue
		}
		for _, ev := range e.Events {
			s.st.next(ev.ID, ev.Data)
		}
		if err := s.st.spill(); err != nil {
			return err
		}
	}
	if err := s.st.flush(); err != nil {
		return err
	}
	s.delivered(n)
	for _, e := range es {
		if e.Last {
			s.observeLatency(e.Time)
		}
	}
	return nil
}

// metricsEvery is how often a stream adds what it delivered to the
// delivered counter while it writes (the rest at its next heartbeat, and
// when it ends): a shared counter added to by every stream on every write
// costs a few percent of the CPU of a large fan-out.
const metricsEvery = time.Second

// delivered counts n events written.
func (s *session) delivered(n int) {
	if s.t.opts.Metrics == nil || n == 0 {
		return
	}
	s.series()
	s.unreported += n
	// A stream with a heartbeat counts the rest at its next beat (see
	// heartbeatDue), within an interval of its last write; one without
	// (an operation of a multiplexed connection) counts every write.
	if now := time.Now(); s.hb == nil || now.Sub(s.reported) >= metricsEvery {
		s.reportDelivered()
		s.reported = now
	}
}

// observeLatency observes the delivery latency of a commit made at t, just
// written. A member of a share observes it only for the entries it took
// last of all members (Entry.Last): one observation per commit for the
// whole fan-out, its slowest write.
func (s *session) observeLatency(t time.Time) {
	if s.t.opts.Metrics == nil || t.IsZero() {
		return
	}
	s.series()
	s.latency.Observe(time.Since(t).Seconds())
}

// series looks up the session's labelled series, once per session rather
// than per write.
func (s *session) series() {
	if s.deliveredCounter == nil {
		m := s.t.opts.Metrics
		s.deliveredCounter = m.Delivered.WithLabelValues(s.label, strconv.FormatInt(s.db.ID, 10))
		s.latency = m.Latency.WithLabelValues(s.label)
	}
}

// reportDelivered adds what was delivered and not yet counted to the
// delivered counter.
func (s *session) reportDelivered() {
	if s.unreported > 0 {
		s.deliveredCounter.Add(float64(s.unreported))
		s.unreported = 0
	}
}

// own serves a subscriber with its own change feed subscription,
// evaluating each commit itself.
func (s *session) own(sub *changefeed.Subscription) {
	defer s.wrapUp()
	gone := s.ctx.Done()
	for {
		select {
		case c := <-sub.Commits():
			if err := s.commits(sub, c); err != nil {
				if !errors.As(err, new(clientGone)) {
					s.fail(err)
				}
				return
			}
		case <-sub.Done():
			// What was queued before the end is still owed, in order,
			// unless the stream lost its access: then nothing more.
			for drained := changefeed.IsRevoked(sub.Err()); !drained; {
				select {
				case c := <-sub.Commits():
					if err := s.commits(sub, c); err != nil {
						if !errors.As(err, new(clientGone)) {
							s.fail(err)
						}
						return
					}
				default:
					drained = true
				}
			}
			s.finish(sub.Err())
			return
		case <-s.beat:
			// Only heartbeats arrive here once a detached member's share
			// stopped notifying it; a late notification is harmless.
			if s.beatDue.Swap(false) && !s.heartbeatDue() {
				return
			}
		case <-gone:
			return
		}
	}
}

// heartbeatDue handles a beat: it reports false when the stream ends (the
// ping could not be written), and otherwise pings, unless the stream
// wrote something within the interval, and schedules the next beat.
// Heartbeats are keep-alives only: access changes end streams through
// their guard.
func (s *session) heartbeatDue() bool {
	if s.hb == nil {
		return true
	}
	s.reportDelivered()
	if !httpstream.PingDue(s.hb, s.st.Idle(), s.heartbeat) {
		return true // it wrote meanwhile: alive without a ping
	}
	s.st.ping()
	return s.st.flush() == nil
}

// wrapUp stops the heartbeat and counts what is left to count: the
// session is over.
func (s *session) wrapUp() {
	s.reportDelivered()
	if s.hb != nil {
		s.hb.Stop()
	}
}

// clientGone is a failed write: the client left, nothing more is written.
type clientGone struct{ err error }

func (e clientGone) Error() string { return "write to stream client: " + e.err.Error() }

// commits writes the events of c and of up to 63 further commits already
// queued, then flushes once.
func (s *session) commits(sub *changefeed.Subscription, c *sluice.Commit) error {
	ctx := s.ctx
	n := 0
	var first time.Time
	for i := 0; ; i++ {
		if s.asm == nil { // a subscription of its own evaluates itself
			s.asm = &assembler{max: s.t.opts.MaxChangeSetBytes}
		}
		evs, _, err := s.asm.events(ctx, s.gs, c)
		if err != nil {
			if ctx.Err() != nil {
				return clientGone{err}
			}
			return err
		}
		for _, ev := range evs {
			s.st.next(ev.ID, ev.Data)
		}
		if len(evs) > 0 && n == 0 {
			first = c.Time
		}
		n += len(evs)
		// What is buffered goes to the connection as it grows, so a
		// burst of large pieces is not held whole before one flush.
		if err := s.st.spill(); err != nil {
			return clientGone{err}
		}
		if i == 63 {
			break
		}
		select {
		case c = <-sub.Commits():
			continue
		default:
		}
		break
	}
	if n == 0 {
		return nil
	}
	if err := s.st.flush(); err != nil {
		return clientGone{err}
	}
	s.delivered(n)
	s.observeLatency(first)
	return nil
}

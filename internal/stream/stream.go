package stream

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/httpstream"
)

// MaxBatch bounds the pieces a subscription of its own writes before one
// flush.
const MaxBatch = 64

// metricsEvery is how often a stream adds what it delivered to the
// delivered counter while it writes (the rest at its next heartbeat, and
// when it ends): a shared counter added to by every stream on every write
// costs a few percent of the CPU of a large fan-out.
const metricsEvery = time.Second

// Stream is one stream: made by Server.Open, registered and ready, then
// served (Serve) until it ends and is released. Its fields are used by
// whoever serves it, one at a time.
type Stream struct {
	e    *Server
	spec Spec
	// ctx ends when the client leaves: its request's or operation's, or,
	// once parked, one of its own that the hang-up watch cancels.
	ctx  context.Context
	sink Sink
	// http is the sink's response when it has one of its own (HTTPSink).
	http *httpstream.Writer

	// release gives back what Spec.Admit took; nil: nothing.
	release func()
	guard   *changefeed.Guard
	// ender ends whatever serves the stream when the guard says so.
	ender Ender
	// Exactly one of m (a share's member) and sub (a subscription of its
	// own) is set once registered.
	m   *member
	sub *changefeed.Subscription
	ev  Evaluator // sub's
	// buf holds what the stream's own goroutine takes at once; a runner's
	// worker lends its own (no idle stream keeps one).
	buf []Entry
	// keep, when set, says which of its share's entries a member writes
	// (Spec.Prepare).
	keep func(*Entry) bool
	// outHeld is what the stream holds of the output budget: the large
	// pieces it formed or took and its client's connection has not
	// taken yet (output.go). room is takeOutput, made once, that a
	// member's take asks before it takes a large entry.
	outHeld int64
	room    func(int64) bool
	// outWaiting is set while the output budget retries the stream (its
	// last take did not fit).
	outWaiting bool

	// beat receives a value when a heartbeat may be due or, for a member,
	// when its share has something new (see kick): a timer function and
	// the share send it, rather than the loop selecting on a timer's
	// channel, because every wait on a timer channel adds the timer to the
	// runtime's heap and removes it again (about 2% of a stream's CPU),
	// and thousands of members waiting on their share's one channel
	// contend for its lock on every commit. beatDue tells a heartbeat
	// from a notification.
	beat    chan struct{}
	beatDue atomic.Bool
	hb      *time.Timer

	// The stream's life off a request's goroutine (park.go, pump.go):
	// parked is the parker serving it while parked; pump the pump of its
	// connection (atomic: Stop reads it on the connection's reading
	// goroutine while the pump lets the stream go); state the parker's or
	// the pump's scheduling of it.
	parked atomic.Pointer[parker]
	pump   atomic.Pointer[Pump]
	state  atomic.Int32
	// cancel ends ctx once parked; raw is the connection taken from
	// net/http then, watch its hang-up watch.
	cancel context.CancelFunc
	raw    syscall.RawConn
	watch  *watch
	// released is set once Release ran.
	released bool

	deliveredCounter prometheus.Counter
	latency          prometheus.Observer
	// unreported events were delivered since the counter was last added
	// to, at reported.
	unreported int
	reported   time.Time
}

// join makes the stream a member of the share o describes.
func (s *Stream) join(o ShareOptions) error {
	o.database, o.transport = s.spec.Database, s.spec.Label
	if c := s.spec.Conn; c != nil {
		o.conn = &c.feed
	}
	m, err := s.e.shares.join(s.ctx, o)
	if err != nil {
		return err
	}
	if err := s.ender.Serve(m); err != nil {
		m.leave()
		return err
	}
	s.m = m
	return nil
}

// subscribe gives the stream a subscription of its own from position
// from (nil: from now), evaluated by ev. It fails like the hub's
// Subscribe (a Gone error for a position older than history).
func (s *Stream) subscribe(from *sluice.Position, ev Evaluator) error {
	sub, err := s.e.hub.Subscribe(s.ctx, s.spec.Database, from, s.subscriptionOptions())
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

// subscriptionOptions are those of a subscription of the stream's own:
// its catch-ups read the log as its user's (changefeed.Options.User).
func (s *Stream) subscriptionOptions() changefeed.Options {
	o := changefeed.Options{Classes: s.spec.Classes, ClassesVersion: s.spec.ClassesVersion, Transport: s.spec.Label}
	if s.spec.Grant != nil {
		o.User = s.spec.Grant.User
	}
	return o
}

// SubscriptionID returns the id of the hub subscription serving the
// stream (its share's for a member), for logs and listings.
func (s *Stream) SubscriptionID() uint64 {
	if s.sub != nil {
		return s.sub.ID()
	}
	if s.m != nil {
		return s.m.subscriptionID()
	}
	return 0
}

// Serve serves the stream until it ends, then releases it: on this
// goroutine; or, reporting true at once, by its connection (Spec.Conn:
// its pump, or a goroutine of the connection's), or parked (an HTTP/1.1
// response without TLS that shares its events: no goroutine while it
// waits, see park.go).
func (s *Stream) Serve() (handedOver bool) {
	if c := s.spec.Conn; c != nil {
		c.serve(s)
		return true
	}
	if s.m != nil && s.http != nil && s.e.parker != nil && s.e.parker.park(s) {
		return true
	}
	s.serve()
	return false
}

// Stop ends a stream served by its connection whose client ended it: its
// context, which the caller cancelled first, is noticed by whoever serves
// it.
func (s *Stream) Stop() {
	// A pump read just before it let s go marks it in vain: a stream
	// that left its runner is not served again.
	if p := s.pump.Load(); p != nil {
		p.Mark(s)
	}
}

// Revoke ends a stream of a connection as its own guard would, with err
// (a *changefeed.Revoked, or the error that ended the connection's own
// guard): it writes err as its end and nothing after it. A connection
// calls it when its own place among the streams is taken away, for
// operations whose own credentials still hold (another JWT, another
// token), since the connection carrying them ends. Only the first error
// that ends a stream counts, its guard's or this one.
func (s *Stream) Revoke(err error) { s.ender.End(err) }

// serve serves the stream on this goroutine until it ends, and releases
// it.
func (s *Stream) serve() {
	defer s.finish()
	if s.m != nil {
		if !s.serveMember() {
			return
		}
	}
	s.serveOwn()
}

// finish releases the stream and tells its transport (Spec.Done).
func (s *Stream) finish() {
	s.Release()
	if s.spec.Done != nil {
		s.spec.Done()
	}
}

// Release undoes the registration of the stream: it leaves the share,
// closes the subscription, releases the guard and what Admit took, stops
// the heartbeat and counts what is left. Only its first call does.
func (s *Stream) Release() {
	if s.released {
		return
	}
	s.released = true
	if s.release != nil {
		s.release()
	}
	if s.outWaiting {
		s.e.output.forget(s)
	}
	s.giveOutput()
	s.reportDelivered()
	if s.hb != nil {
		s.hb.Stop()
	}
	if s.m != nil {
		s.m.setNotify(nil)
		s.m.leave()
	}
	if s.sub != nil {
		s.sub.Close()
	}
	if s.guard != nil {
		s.guard.Release()
	}
}

// cut ends a stream that was parked, from any goroutine: its context
// ends, and its connection is shut down, so that a write blocked on a
// client that does not read fails at once.
func (s *Stream) cut() {
	s.cancel()
	shutdown(s.raw)
}

// wake makes a heartbeat pending.
func (s *Stream) wake() {
	s.beatDue.Store(true)
	s.kick()
}

// kick makes whoever serves the stream look at it: its parker, or its
// loop (a receive on beat pending, unless one is). It never blocks.
func (s *Stream) kick() {
	if p := s.parked.Load(); p != nil {
		p.mark(s)
		return
	}
	select {
	case s.beat <- struct{}{}:
	default:
	}
}

// serveMember serves a share member until it ends; it reports true when
// the member was detached and the stream continues on a subscription of
// its own (s.sub set).
func (s *Stream) serveMember() bool {
	// Notified on beat from now on: what was published before, the first
	// take takes.
	s.m.setNotify(s.kick)
	gone := s.ctx.Done()
	for {
		switch s.step(&s.buf) {
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

// step takes and writes what the member may take now, taking into buf.
func (s *Stream) step(buf *[]Entry) stepResult {
	m := s.m
	if s.room == nil && s.e.output != nil {
		s.room = s.takeOutput
	}
	for {
		var wake <-chan struct{}
		var state takeState
		*buf, wake, state = m.takeWithin((*buf)[:0], s.room)
		if len(*buf) > 0 {
			err := s.writeEntries(*buf)
			clear(*buf) // do not hold frames while waiting
			if !s.blocked() {
				// Its client's connection took them. A parked stream
				// whose socket did not holds them until its goroutine
				// sent the rest (parker.unparked).
				s.giveOutput()
			}
			if err != nil {
				return stepEnded
			}
			if wake == nil && !s.blocked() {
				continue // more to take
			}
		}
		switch state {
		case takeDetached:
			return stepDetached
		case takeEnded:
			s.end(m.endErr())
			return stepEnded
		case takeRevoked:
			s.end(s.ender.Err())
			return stepEnded
		}
		return stepWait
	}
}

// blocked reports whether the stream is parked and its socket did not
// take all of its last write: it takes nothing more while parked (what
// it took and could not write is its own, not its share's), and
// continues on a goroutine of its own, whose writes wait for the client.
func (s *Stream) blocked() bool { return s.http != nil && s.http.Blocked() }

// detach continues member m, which fell out of its share's history, on a
// subscription of its own from where it was. It reports false when that
// failed (the end is written).
func (s *Stream) detach() bool {
	m := s.m
	m.setNotify(nil)
	from := m.resumeFrom()
	sub, err := s.e.hub.Subscribe(s.ctx, s.spec.Database, &from, s.subscriptionOptions())
	m.left() // its own subscription holds its commits now (Release leaves the share)
	if err != nil {
		s.end(err)
		return false
	}
	s.sub = sub
	if err := s.ender.Serve(sub); err != nil {
		s.end(err)
		return false
	}
	s.ev = s.spec.Detached(m.evaluator())
	return true
}

// serveOwn serves the stream's own subscription.
func (s *Stream) serveOwn() {
	sub := s.sub
	gone := s.ctx.Done()
	for {
		select {
		case c := <-sub.Commits():
			// Done may have been ready too (select picks either): a
			// stream whose access ended is sent nothing more.
			if s.revoked() {
				s.end(s.ender.Err())
				return
			}
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
func (s *Stream) writeEntries(es []Entry) error {
	n := 0
	shared := s.sink.Shared()
	for i := range es {
		e := &es[i]
		if s.keep != nil && !s.keep(e) {
			s.m.untake() // its client does not have it: no delta from it
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
		if i > 0 && s.revoked() {
			// Its access ended while it wrote queued pieces: not one more
			// (what it wrote went to the connection before the end).
			s.end(s.ender.Err())
			return false
		}
		if s.ctx.Err() != nil {
			// The client left, or completed the operation (a stream of a
			// connection): the pieces queued are evaluated for no one.
			return false
		}
		// The piece's change images stand for what it will form: it is
		// formed only once the output budget has room for them.
		images := imageBytes(c)
		if images >= smallOutputBytes && !s.waitOutput(images) {
			return false
		}
		release, err := s.e.images.take(s.ctx, c)
		if err != nil {
			return false // the client left
		}
		if s.revoked() {
			// Its access ended while the piece waited for the image
			// budget: it is dropped, as a queued one is.
			release()
			s.end(s.ender.Err())
			return false
		}
		evs, _, err := s.ev.Events(s.ctx, c)
		release()
		if err != nil {
			if s.ctx.Err() == nil {
				s.end(err)
			}
			return false
		}
		if classes, v, ok := revisedClasses(s.ev, c, s.sub.ClassesVersion()); ok {
			s.sub.SetClasses(classes, v)
		}
		if s.e.output != nil {
			s.growOutput(formedBytes(evs))
		}
		for _, ev := range evs {
			s.sink.WriteEvent(ev)
		}
		if len(evs) > 0 && n == 0 {
			first = c.MadeLocal()
		}
		n += len(evs)
		// What is buffered goes to the connection as it grows, so a
		// burst of large pieces is not held whole before one flush:
		// a large piece's events are with the connection once spilled.
		if s.sink.Spill() != nil {
			return false
		}
		s.giveOutput()
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

// waitOutput waits, on the stream's own goroutine, until the output
// budget has room for a piece of n bytes and charges them (takeOutput),
// holding nothing formed meanwhile. It reports false when the stream is
// over: its client left, its access ended (the end is written), or the
// server shuts down (the end is written: the client resumes from the
// last event it got, before this piece).
func (s *Stream) waitOutput(n int64) bool {
	done := s.sub.Done()
	for waited := false; !s.takeOutput(n); waited = true {
		// What the batch wrote before this piece goes to its client
		// now, rather than after the wait.
		if !waited && s.sink.Flush() != nil {
			return false
		}
		select {
		case <-s.beat:
			// Retried (output.go), or a heartbeat due.
			if s.beatDue.Swap(false) && !s.heartbeat() {
				return false
			}
		case <-done:
			// Unless its access ended or the server shuts down, what was
			// queued before the end is still owed: it waits on.
			done = nil
			if err := s.sub.Err(); errors.Is(err, ErrShutdown) {
				s.end(err)
				return false
			}
		case <-s.ctx.Done():
			return false
		}
		if s.revoked() {
			s.end(s.ender.Err())
			return false
		}
	}
	return true
}

// revoked reports whether the stream's guard ended it because it lost
// its access: from then on it is sent nothing more, not even pieces its
// subscription had queued.
func (s *Stream) revoked() bool { return changefeed.IsRevoked(s.ender.Err()) }

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
	if !httpstream.PingDue(s.hb, s.sink.Idle(), s.spec.Heartbeat) {
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
	if err != nil && !errors.Is(err, ErrShutdown) && !errors.Is(err, ErrClosed) {
		s.logEnd("stream ended", err)
	}
	s.sink.End(err)
	_ = s.sink.Flush()
}

// fail answers a stream that could not start once admitted (Sink.Fail),
// unless the client already left.
func (s *Stream) fail(err error) {
	if s.ctx.Err() != nil {
		return
	}
	s.logEnd("stream not started", err)
	s.sink.Fail(err)
	_ = s.sink.Flush()
}

// logEnd logs err, which ends the stream, as every transport logs an
// error (sluice.Show), with the stream's attributes only when its level
// is enabled.
func (s *Stream) logEnd(msg string, err error) {
	sh := sluice.Show(err)
	if l := s.spec.Logger; l != nil && l.Enabled(context.Background(), sh.Level) {
		sh.Log(context.Background(), s.logger(), msg, err)
	}
}

// logRefusal logs err, which refuses the stream.
func (s *Stream) logRefusal(err error) { s.logEnd("stream refused", err) }

// logger returns the stream's logger, built when something is logged: a
// logger with attributes costs about half a KiB per stream.
func (s *Stream) logger() *slog.Logger {
	l := s.spec.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	l = l.With(s.spec.Attrs...).With("transport", s.spec.Label)
	if s.spec.Database != nil {
		l = l.With("database", s.spec.Database.Path())
	}
	if id := s.SubscriptionID(); id != 0 {
		l = l.With("sub", id)
	}
	return l
}

// delivered counts n events written.
func (s *Stream) delivered(n int) {
	if s.e.metrics == nil || n == 0 {
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

// observeLatency observes the delivery latency of a commit made at t by
// this process's clock (sluice.Commit.MadeLocal: its age by Postgres'
// clock when read, then by this process's monotonic clock, never the one
// against the other), just written.
func (s *Stream) observeLatency(t time.Time) {
	if s.e.metrics == nil || t.IsZero() {
		return
	}
	s.series()
	s.latency.Observe(s.e.now().Sub(t).Seconds())
}

// series looks up the stream's labelled series, once per stream rather
// than per write.
func (s *Stream) series() {
	if s.deliveredCounter == nil {
		m := s.e.metrics
		s.deliveredCounter = m.Delivered.WithLabelValues(s.spec.Label, strconv.FormatInt(s.spec.Database.ID, 10))
		s.latency = m.Latency.WithLabelValues(s.spec.Label)
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

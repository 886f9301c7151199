package stream

import (
	"context"
	"errors"
	"sync"

	"github.com/sluice-dev/sluice/internal/httpstream"
)

// Parking. An idle stream on a connection of its own costs, on a
// goroutine, its stack and the buffers and background reader net/http
// keeps for a connection while its handler runs: about 20 KiB, most of
// what a stream costs. A parked stream costs none of them: once ready, a
// stream of an HTTP/1.1 response without TLS that shares its events (a
// share member) has its connection taken from net/http
// (httpstream.Writer.Park), and the parker serves it with a few workers
// for all the parked streams of the process:
//
//   - its share, its heartbeat timer and its guard (access ended, server
//     shutting down) mark it (Stream.kick), and a worker takes and writes
//     what it may, without blocking;
//   - one epoll instance watches every parked connection for the client
//     hanging up (hangups), instead of a goroutine blocked in a read
//     each;
//   - a stream whose socket does not take a write whole (a slow reader),
//     or that fell out of its share's history (detached: it reads the log
//     on its own), continues on a goroutine of its own, as it would have
//     without parking; the hang-up watch still ends it.
//
// When a parked stream ends, its last chunk is written and the
// connection goes back to the HTTP server (httpstream.Listener), so the
// client's connection stays keep-alive.

// parker serves the parked streams of an engine.
type parker struct {
	e    *Server
	r    runner
	hang *hangups

	mu     sync.Mutex
	cond   sync.Cond // broadcast when n drops to 0
	n      int       // parked streams
	closed bool      // abort: no stream is parked any more
	// all holds the parked streams, for abort.
	all map[*Stream]struct{}
	// off holds the streams that left the parker for goroutines of their
	// own: their connections are not net/http's any more, so abort cuts
	// them (and, once aborted, those that leave later).
	off     map[*Stream]struct{}
	aborted bool
}

// newParker starts a parker with n workers; an error when connections
// cannot be watched on this platform.
func newParker(e *Server, n int) (*parker, error) {
	h, err := newHangups()
	if err != nil {
		return nil, err
	}
	p := &parker{e: e, hang: h, all: map[*Stream]struct{}{}, off: map[*Stream]struct{}{}}
	p.cond.L = &p.mu
	p.r.start(n, p.serve)
	return p, nil
}

// park takes s's connection from net/http and serves s from now on,
// reporting false when it cannot (the stream is then served as before,
// on its goroutine).
func (p *parker) park(s *Stream) bool {
	p.mu.Lock()
	if p.closed || !s.http.Parkable() {
		p.mu.Unlock()
		return false
	}
	p.n++
	p.all[s] = struct{}{}
	p.mu.Unlock()
	if m := p.e.metrics; m != nil {
		m.Parked.Inc()
	}
	raw, err := s.http.Park()
	if err != nil {
		p.left(s)
		if errors.Is(err, httpstream.ErrNotParkable) {
			return false
		}
		// Taken half-way: the response is unusable.
		s.finish()
		return true
	}
	// The request's context ends when its handler returns: a context of
	// the stream's own from now on, which the hang-up watch ends.
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.raw = raw
	s.watch = p.hang.newWatch(raw, func() { s.cancel(); p.mark(s) })
	if err := s.watch.arm(); err != nil {
		// Not watched, it would never notice its client leaving: on a
		// goroutine, which would not either (no request goroutine reads
		// the connection any more), but whose writes fail.
		s.watch = nil
		p.goOff(s, false) // counted before it leaves: see Server.Close
		p.left(s)
		return true
	}
	s.parked.Store(p)
	s.m.setNotify(s.kick)
	p.mark(s) // what the share published before, and a missed hang-up
	return true
}

// mark makes parked stream s due to be served.
func (p *parker) mark(s *Stream) { p.r.mark(s) }

// serve does what parked stream s may do now; false once it left the
// parker.
func (p *parker) serve(s *Stream, buf *[]Entry) bool {
	if s.ctx.Err() != nil {
		p.end(s) // the client hung up (or the parker aborted)
		return false
	}
	if s.beatDue.Swap(false) && !s.heartbeat() {
		p.end(s)
		return false
	}
	switch s.step(buf) {
	case stepEnded:
		if s.http.Blocked() {
			// Its last frames, its end among them, wait for a slow
			// client: sent on a goroutine, as a slow reader's stream
			// goes on, rather than dropped with the connection (its
			// client saw a body cut short, not its stream's end).
			s.parked.Store(nil)
			p.goOff(s, true)
			p.left(s)
			return false
		}
		p.end(s)
		return false
	case stepDetached:
		p.unpark(s)
		return false
	}
	if s.http.Blocked() {
		// A slow reader: the rest waits for it on a goroutine.
		p.unpark(s)
		return false
	}
	return true
}

// end releases parked stream s and ends its response (the connection goes
// back to the server).
func (p *parker) end(s *Stream) {
	s.parked.Store(nil)
	s.watch.stop()
	s.cancel()
	s.finish()
	s.http.Close()
	p.left(s)
}

// unpark continues parked stream s on a goroutine of its own: it fell out
// of its share's history, or its socket is full.
func (p *parker) unpark(s *Stream) {
	s.parked.Store(nil)
	if m := p.e.metrics; m != nil {
		m.Unparked.Inc()
	}
	// Counted on the server's wait group before it leaves the parker:
	// Server.Close, which waits for the parker and then for the group,
	// never misses it.
	p.goOff(s, false)
	p.left(s)
}

// goOff serves s, which leaves the parker, on a goroutine of its own
// (counted on the server's wait group) until it ends; a stream that
// ended only sends there what its socket did not take. abort cuts its
// connection (at once, when it ran before).
func (p *parker) goOff(s *Stream, ended bool) {
	p.mu.Lock()
	p.off[s] = struct{}{}
	if p.aborted {
		s.cut()
	}
	p.mu.Unlock()
	p.e.wg.Go(func() { p.unparked(s, ended) })
}

// unparked serves a stream that was parked on this goroutine until it
// ends (its writes blocking again, each bounded by the write timeout),
// or, ended, sends what its socket did not take.
func (p *parker) unparked(s *Stream, ended bool) {
	defer func() {
		if s.watch != nil {
			s.watch.stop()
		}
		s.cancel()
		// Before the connection goes back to the HTTP server: one that
		// serves another request is not abort's to cut.
		p.mu.Lock()
		delete(p.off, s)
		p.mu.Unlock()
		s.http.Close()
	}()
	if err := s.http.Unpark(); err != nil || ended {
		s.finish()
		return
	}
	// What its socket did not take is sent: the output it held is
	// given back.
	s.giveOutput()
	s.serve()
}

// left counts s out of the parked streams.
func (p *parker) left(s *Stream) {
	if m := p.e.metrics; m != nil {
		m.Parked.Dec()
	}
	p.mu.Lock()
	delete(p.all, s)
	if p.n--; p.n == 0 {
		p.cond.Broadcast()
	}
	p.mu.Unlock()
}

// wait returns once no stream is parked, and closes the parker: a stream
// that is ready only now (its handler between its readiness frame and
// Serve when the hub closed) is not parked any more but served on its
// goroutine, which writes its end, instead of being parked with workers
// that stop once Close returns (its client would get nothing, and its
// connection would hold up the server's shutdown).
func (p *parker) wait() {
	p.mu.Lock()
	for p.n > 0 {
		p.cond.Wait()
	}
	p.closed = true
	p.mu.Unlock()
}

// abort ends every parked stream at once (the shutdown timeout ran out):
// their contexts end, and their workers release them. It cuts the
// streams that left the parker, now and as they leave: their writes,
// blocked on clients that do not read, fail. It returns how many streams
// were parked and how many it cut.
func (p *parker) abort() (parked, cut int) {
	p.mu.Lock()
	p.closed = true
	p.aborted = true
	streams := make([]*Stream, 0, len(p.all))
	for s := range p.all {
		streams = append(streams, s)
	}
	for s := range p.off {
		s.cut()
	}
	cut = len(p.off)
	p.mu.Unlock()
	for _, s := range streams {
		s.cancel()
		p.mark(s)
	}
	return len(streams), cut
}

// stop stops the workers and the hang-up watch; no stream is parked.
func (p *parker) stop() {
	p.r.stop()
	p.hang.close()
}

package sse

import (
	"sync"

	"github.com/sluice-dev/sluice/internal/changefeed"
)

// A multiplexed connection (a graphql-ws socket, a single connection mode
// stream) may carry thousands of subscriptions. Those that share their
// events (hub share members, the common case) are served by one pump per
// connection rather than a goroutine each: the share notifies the pump
// when a member may take something (changefeed.Member.Notify), and the
// pump takes and writes for each ready member in turn. A member detached
// for falling behind, and a subscription of its own (a resume), still get
// a goroutine: they wait on the log.

// pump serves the member sessions of one connection.
type pump struct {
	mu    sync.Mutex
	ready map[*session]struct{}
	// stops holds, per session, what its end undoes: its finish (the
	// connection's bookkeeping).
	stops map[*session]func()
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}
	buf   []changefeed.Entry
}

func newPump() *pump {
	p := &pump{ready: map[*session]struct{}{}, stops: map[*session]func(){},
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// add serves member session s (s.m set, ready written) until it ends;
// finish is called then (from the pump, or from the goroutine a detached
// member continues on). The pump does not watch s's context, which would
// cost a context.AfterFunc per subscription: whoever cancels it marks s
// (mark), or every session when the connection ends (markAll).
func (p *pump) add(s *session, finish func()) {
	p.mu.Lock()
	p.stops[s] = finish
	p.mu.Unlock()
	s.m.Notify(func() { p.mark(s) })
	p.mark(s) // what the share published before Notify
}

// mark makes s ready to be served. It never blocks.
func (p *pump) mark(s *session) {
	p.mu.Lock()
	p.ready[s] = struct{}{}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// markAll marks every session: the connection ended.
func (p *pump) markAll() {
	p.mu.Lock()
	for s := range p.stops {
		p.ready[s] = struct{}{}
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// close stops the pump once its connection's sessions have ended.
func (p *pump) close() {
	close(p.quit)
	<-p.done
}

func (p *pump) run() {
	defer close(p.done)
	for {
		select {
		case <-p.wake:
		case <-p.quit:
			return
		}
		for {
			p.mu.Lock()
			var s *session
			for s = range p.ready {
				break
			}
			if s != nil {
				delete(p.ready, s)
			}
			p.mu.Unlock()
			if s == nil {
				break
			}
			p.serve(s)
		}
	}
}

// serve takes and writes what s may take now, and ends it when it must.
func (p *pump) serve(s *session) {
	p.mu.Lock()
	stop := p.stops[s]
	p.mu.Unlock()
	if stop == nil {
		return // ended before
	}
	end := func() {
		p.mu.Lock()
		delete(p.stops, s)
		delete(p.ready, s)
		p.mu.Unlock()
		s.m.Notify(nil)
		s.m.Leave()
		s.guard.Release()
		s.wrapUp()
		stop()
	}
	if s.ctx.Err() != nil {
		end() // the client completed it, or the connection ended
		return
	}
	m := s.m
	for {
		var wake <-chan struct{}
		var state changefeed.TakeState
		p.buf, wake, state = m.Take(p.buf[:0])
		if len(p.buf) > 0 {
			err := s.writeEntries(p.buf)
			clear(p.buf) // do not hold payloads while waiting
			if err != nil {
				end()
				return
			}
			if wake == nil {
				continue // more to take
			}
		}
		switch state {
		case changefeed.TakeDetached:
			// It reads the log on its own now: a goroutine of its own.
			p.mu.Lock()
			delete(p.stops, s)
			delete(p.ready, s)
			p.mu.Unlock()
			m.Notify(nil)
			go func() {
				defer stop()
				defer s.guard.Release()
				defer m.Leave()
				s.detach(m)
			}()
			return
		case changefeed.TakeEnded:
			s.finish(m.Err())
			end()
			return
		case changefeed.TakeRevoked:
			s.finish(s.ender.Err())
			end()
			return
		}
		return // until the share notifies again
	}
}

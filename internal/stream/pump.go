package stream

import "sync"

// A multiplexed connection (a graphql-ws socket, a single connection mode
// stream) may carry thousands of streams. Those that share their events
// (share members, the common case) are served by one pump per connection
// rather than a goroutine each: the share notifies the pump when a member
// may take something (changefeed.Member.Notify), and the pump takes and
// writes for each ready stream in turn. A member detached for falling
// behind, and a stream with a subscription of its own (a resume), get a
// goroutine: they wait on the log.

// Pump serves the member streams of one connection. Its methods are safe
// for concurrent use.
type Pump struct {
	mu    sync.Mutex
	ready map[*Stream]struct{}
	// stops holds, per stream, what its end undoes: the connection's
	// bookkeeping.
	stops map[*Stream]func()
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

// NewPump starts a pump; Close stops it.
func NewPump() *Pump {
	p := &Pump{ready: map[*Stream]struct{}{}, stops: map[*Stream]func(){},
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// Add serves member stream s (joined, readiness written) until it ends;
// finish is called then (from the pump, or from the goroutine a detached
// member continues on). The pump does not watch s's context, which would
// cost a context.AfterFunc per stream: whoever cancels it marks s (Mark),
// or every stream when the connection ends (MarkAll).
func (p *Pump) Add(s *Stream, finish func()) {
	p.mu.Lock()
	p.stops[s] = finish
	p.mu.Unlock()
	s.m.Notify(func() { p.Mark(s) })
	p.Mark(s) // what the share published before Notify
}

// Mark makes s ready to be served. It never blocks.
func (p *Pump) Mark(s *Stream) {
	p.mu.Lock()
	p.ready[s] = struct{}{}
	p.mu.Unlock()
	p.kick()
}

// MarkAll marks every stream: the connection ended.
func (p *Pump) MarkAll() {
	p.mu.Lock()
	for s := range p.stops {
		p.ready[s] = struct{}{}
	}
	p.mu.Unlock()
	p.kick()
}

func (p *Pump) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Close stops the pump once its connection's streams have ended.
func (p *Pump) Close() {
	close(p.quit)
	<-p.done
}

func (p *Pump) run() {
	defer close(p.done)
	for {
		select {
		case <-p.wake:
		case <-p.quit:
			return
		}
		for {
			p.mu.Lock()
			var s *Stream
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

// forget removes s from the pump and returns its finish (nil when it
// ended before).
func (p *Pump) forget(s *Stream) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	stop := p.stops[s]
	delete(p.stops, s)
	delete(p.ready, s)
	return stop
}

// serve takes and writes what s may take now, and ends it when it must.
func (p *Pump) serve(s *Stream) {
	p.mu.Lock()
	alive := p.stops[s] != nil
	p.mu.Unlock()
	if !alive {
		return // ended before
	}
	if s.ctx.Err() != nil {
		// The client completed it, or the connection ended.
		stop := p.forget(s)
		s.Release()
		stop()
		return
	}
	switch s.step() {
	case stepEnded:
		stop := p.forget(s)
		s.Release()
		stop()
	case stepDetached:
		// It reads the log on its own now: a goroutine of its own.
		stop := p.forget(s)
		go func() {
			defer stop()
			defer s.Release()
			if s.detach() {
				s.serveOwn()
			}
		}()
	}
}

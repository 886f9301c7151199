package stream

// A multiplexed connection (a graphql-ws socket, a single connection mode
// stream) may carry thousands of streams. Those that share their events
// (share members, the common case) are served by one pump per connection
// rather than a goroutine each: the share marks a stream when it may take
// something, and the pump takes and writes for each marked stream in
// turn. A member detached for falling behind, and a stream with a
// subscription of its own (a resume), get a goroutine: they wait on the
// log.

// Pump serves the member streams of one connection. Its methods are safe
// for concurrent use.
type Pump struct {
	r runner
	e *Server
}

// newPump starts a pump; stop stops it.
func newPump(e *Server) *Pump {
	p := &Pump{e: e}
	p.r.start(1, p.serve)
	return p
}

// add serves member stream s (joined, readiness written) until it ends.
// The pump does not watch s's context, which would cost a
// context.AfterFunc per stream: whoever cancels it marks s (Stream.Stop),
// or every stream when the connection ends (Conn.End).
func (p *Pump) add(s *Stream) {
	s.pump.Store(p)
	s.m.setNotify(func() { p.Mark(s) })
	p.Mark(s) // what the share published before
}

// Mark makes s due to be served. It never blocks.
func (p *Pump) Mark(s *Stream) { p.r.mark(s) }

// serve takes and writes what s may take now, and ends it when it must;
// false once s left the pump.
func (p *Pump) serve(s *Stream, buf *[]Entry) bool {
	if s.ctx.Err() != nil {
		// The client completed it, or the connection ended.
		s.finish()
		return false
	}
	switch s.step(buf) {
	case stepEnded:
		s.finish()
		return false
	case stepDetached:
		// It reads the log on its own now: a goroutine of its own.
		s.m.setNotify(nil)
		s.pump.Store(nil)
		p.e.wg.Go(func() {
			defer s.finish()
			if s.detach() {
				s.serveOwn()
			}
		})
		return false
	}
	return true
}

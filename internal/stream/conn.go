package stream

import "sync"

// Conn is a connection that carries many streams (a graphql-ws socket, a
// single connection mode stream; Spec.Conn): its distinct shares of one
// database are evaluated from one hub subscription (Feed), and its streams
// that share their events are served by one pump, started with the first,
// rather than a goroutine each. Its methods are safe for concurrent use.
type Conn struct {
	e    *Server
	feed Feed

	mu    sync.Mutex
	pump  *Pump
	ended bool
	live  map[*Stream]struct{} // pumped streams
}

// NewConn returns the state of a connection that carries many streams;
// End it when the connection ends, Close it once its streams did.
func (e *Server) NewConn() *Conn { return &Conn{e: e, live: map[*Stream]struct{}{}} }

// serve serves stream s of the connection: a member by the pump, a stream
// of its own on a goroutine.
func (c *Conn) serve(s *Stream) {
	if s.m != nil {
		c.mu.Lock()
		if !c.ended {
			if c.pump == nil {
				c.pump = newPump(c.e)
			}
			c.live[s] = struct{}{}
			p := c.pump
			done := s.spec.Done
			s.spec.Done = func() {
				c.mu.Lock()
				delete(c.live, s)
				c.mu.Unlock()
				if done != nil {
					done()
				}
			}
			c.mu.Unlock()
			p.add(s)
			return
		}
		c.mu.Unlock()
	}
	c.e.wg.Go(s.serve)
}

// End marks every stream of the connection, whose contexts ended with
// it: they are released.
func (c *Conn) End() {
	c.mu.Lock()
	c.ended = true
	p := c.pump
	streams := make([]*Stream, 0, len(c.live))
	for s := range c.live {
		streams = append(streams, s)
	}
	c.mu.Unlock()
	for _, s := range streams {
		p.Mark(s)
	}
}

// Close stops the connection's pump once its streams have ended.
func (c *Conn) Close() {
	c.mu.Lock()
	p := c.pump
	c.ended = true
	c.mu.Unlock()
	if p != nil {
		p.r.stop()
	}
}

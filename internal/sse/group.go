package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/changefeed"
)

// memberQueue is how many commits' events a group member may have waiting
// before it leaves the group and reads the log on its own.
const memberQueue = 256

// groupKey identifies subscribers that share one evaluation: the same
// executable schema (database, schema version and role), query, operation
// name and variables.
type groupKey struct {
	es        *graph.ExecutableSchema
	query     string
	operation string
	variables string
}

// keyOf returns the group key of a request, and false when its variables
// cannot be put in canonical form (then it is not grouped).
func keyOf(es *graph.ExecutableSchema, req *request) (groupKey, bool) {
	var vars bytes.Buffer
	if len(req.params.Variables) > 0 {
		// encoding/json sorts map keys: equal variables give equal bytes.
		if err := json.NewEncoder(&vars).Encode(req.params.Variables); err != nil {
			return groupKey{}, false
		}
	}
	return groupKey{es: es, query: req.params.Query, operation: req.params.OperationName, variables: vars.String()}, true
}

// group is one change feed subscription whose commits are evaluated once
// (one graph evaluation, one serialized payload per event) and fanned out
// to its members' bounded queues, never blocking on a member.
type group struct {
	srv  *Server
	key  groupKey
	gs   *graph.Subscription
	sub  *changefeed.Subscription
	ctx  context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	members map[*member]struct{}
	closed  bool
	err     error         // why the group ended; set before done is closed
	done    chan struct{} // closed when the group ends on its own (hub, evaluation error)
	exited  chan struct{} // closed when run returns
}

// member is one subscriber of a group.
type member struct {
	g  *group
	ch chan []graph.SubscriptionEvent
	// detached is closed when the group dropped the member because its
	// queue was full; from is then where it continues on its own.
	detached chan struct{}
	from     sluice.Position
}

// join adds a subscriber to the group of key, starting the group (a hub
// subscription from now) when there is none. It fails like Hub.Subscribe.
func (s *Server) join(ctx context.Context, key groupKey, gs *graph.Subscription, d *sluice.Database, label string) (*member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[key]; g != nil {
		g.mu.Lock()
		if !g.closed {
			m := g.add()
			g.mu.Unlock()
			return m, nil
		}
		g.mu.Unlock()
	}
	sub, err := s.opts.Hub.Subscribe(ctx, d, nil, changefeed.Options{Classes: gs.Classes(), Transport: label})
	if err != nil {
		return nil, err
	}
	gctx, stop := context.WithCancel(context.Background())
	g := &group{srv: s, key: key, gs: gs, sub: sub, ctx: gctx, stop: stop,
		members: map[*member]struct{}{}, done: make(chan struct{}), exited: make(chan struct{})}
	s.groups[key] = g
	m := g.add()
	go g.run()
	return m, nil
}

// add adds a member; the caller holds g.mu.
func (g *group) add() *member {
	m := &member{g: g, ch: make(chan []graph.SubscriptionEvent, memberQueue), detached: make(chan struct{})}
	g.members[m] = struct{}{}
	return m
}

// leave removes m from its group (a client that left, or a member that
// finished); the last member out closes the group and waits for it.
func (m *member) leave() {
	g := m.g
	g.mu.Lock()
	delete(g.members, m)
	last := len(g.members) == 0 && !g.closed
	if last {
		g.closed = true
	}
	g.mu.Unlock()
	if !last {
		return
	}
	g.srv.forget(g)
	g.stop()
	g.sub.Close()
	<-g.exited
}

func (s *Server) forget(g *group) {
	s.mu.Lock()
	if s.groups[g.key] == g {
		delete(s.groups, g.key)
	}
	s.mu.Unlock()
}

// run evaluates each commit once and fans the events out.
func (g *group) run() {
	defer close(g.exited)
	for {
		select {
		case c := <-g.sub.Commits():
			if !g.deliver(c) {
				return
			}
		case <-g.sub.Done():
			// What was queued before the end is still owed, in order.
			for {
				select {
				case c := <-g.sub.Commits():
					if !g.deliver(c) {
						return
					}
					continue
				default:
				}
				break
			}
			g.end(g.sub.Err())
			return
		case <-g.ctx.Done():
			return
		}
	}
}

// deliver evaluates c and hands its events to every member without
// blocking: a member whose queue is full is detached, to continue on its
// own from c. It reports whether the group goes on.
func (g *group) deliver(c *sluice.Commit) bool {
	evs, err := g.gs.Events(g.ctx, c)
	if err != nil {
		if g.ctx.Err() == nil {
			g.end(err)
		}
		return false
	}
	if len(evs) == 0 {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for m := range g.members {
		select {
		case m.ch <- evs:
		default:
			// Index -1: the whole of commit c is replayed to it.
			m.from = sluice.Position{Epoch: c.Epoch, Seq: c.Seq, Index: -1}
			delete(g.members, m)
			close(m.detached)
			if mt := g.srv.opts.Metrics; mt != nil {
				mt.CatchUps.WithLabelValues(strconv.FormatInt(c.DatabaseID, 10)).Inc()
			}
		}
	}
	return true
}

// end closes the group with err; its members finish with it.
func (g *group) end(err error) {
	g.srv.forget(g)
	g.mu.Lock()
	g.closed = true
	g.err = err
	g.mu.Unlock()
	close(g.done)
	g.sub.Close()
}

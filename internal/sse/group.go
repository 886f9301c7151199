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

// The bounds of a group's history: the events of the commits some member
// has not taken yet. A member whose next commit would fall out of it
// leaves the group and reads the log on its own. The bytes scale with the
// members (each may lag as much as one alone), so memory per subscriber
// stays bounded while a large group tolerates long bursts: 10,000 members
// lagging 500 commits behind read shared payloads instead of evaluating
// each commit once per member.
const (
	historyCommits        = 4096
	historyBytesPerMember = 64 << 10
	historyMaxBytes       = 64 << 20
	// eventOverhead is what an event costs beyond its SSE frame (the
	// SubscriptionEvent and its share of the entry).
	eventOverhead = 64
	// sseFrameBytes is the most an SSE frame adds to its id and payload.
	sseFrameBytes = len("event: next\nid: \ndata: \n\n")
)

// takeMax is how many commits' events a member takes at once (written
// with one flush). A member keeps a slice of that many entries.
const takeMax = 16

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
// (one graph evaluation, one serialized payload per event) and kept in a
// history that every member reads at its own pace. Publishing never
// blocks on a member: it appends and wakes the members with one channel
// close, instead of one send per member.
type group struct {
	srv   *Server
	key   groupKey
	gs    *graph.Subscription
	sub   *changefeed.Subscription
	epoch string
	ctx   context.Context
	stop  context.CancelFunc
	// catchUps counts members that fell out of the history; nil without
	// metrics.
	catchUps interface{ Inc() }
	// asm gathers the pieces of large commits (run's goroutine only).
	asm assembler

	mu      sync.Mutex
	members map[*member]struct{}
	closed  bool  // no member may join
	ended   bool  // the group ended on its own (hub, evaluation error)
	err     error // why it ended
	// hist holds the events of the commits not yet taken by every member,
	// oldest first; hist[0] has the index first. Indexes only grow.
	hist  []entry
	first int64
	bytes int
	// leaving holds the members that fell out of the history and have not
	// yet subscribed on their own, with the commit they replay from.
	leaving map[*member]int64
	// floor is what the group holds in the hub (see holdFloor); -1: none.
	floor int64
	// wake is closed (and replaced) when the history grows or the group
	// ends.
	wake   chan struct{}
	exited chan struct{} // closed when run returns
}

// entry is the events of one commit (or one piece of a large one) in a
// group's history. evs is shared by
// every member and never modified.
type entry struct {
	// start is the position just before the first change the entry's
	// events were evaluated from: a member that did not take it resumes
	// there.
	start sluice.Position
	evs   []graph.SubscriptionEvent
	// sse is the SSE frames of evs, built once for every member (most
	// streams are SSE); each event's Data points into it.
	sse    []byte
	size   int
	unread int // members that have not taken it
}

// member is one subscriber of a group. Its fields are guarded by g.mu.
type member struct {
	g *group
	// pos is the index of the next history entry it takes.
	pos int64
	// detached is set when its next entry fell out of the history; from is
	// then where it continues on its own.
	detached bool
	from     sluice.Position
	// counted is the subscribers gauge that counts m while it is a member
	// (nil without metrics): the group's hub subscription is not counted.
	counted gauge
	// revoked is set when the stream lost its access (End): m takes
	// nothing more.
	revoked bool
}

// End stops m taking anything more: its stream lost its access (see
// changefeed.Guard). It wakes the members waiting, m among them.
func (m *member) End(error) {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if !m.revoked {
		m.revoked = true
		g.signal()
	}
}

// join adds a subscriber to the group of key, starting the group (a hub
// subscription from now) when there is none. It fails like Hub.Subscribe.
func (s *Server) join(ctx context.Context, key groupKey, gs *graph.Subscription, d *sluice.Database, label string) (*member, error) {
	var counted gauge
	if mt := s.opts.Metrics; mt != nil {
		counted = mt.Subscribers.WithLabelValues(label, strconv.FormatInt(d.ID, 10))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[key]; g != nil {
		g.mu.Lock()
		if !g.closed {
			m := g.add(counted)
			g.mu.Unlock()
			return m, nil
		}
		g.mu.Unlock()
	}
	sub, err := s.opts.Hub.Subscribe(ctx, d, nil, changefeed.Options{Classes: gs.Classes(), Transport: label, Shared: true})
	if err != nil {
		return nil, err
	}
	g := newGroup(s, key, gs, sub, d)
	s.groups[key] = g
	m := g.add(counted)
	go g.run()
	return m, nil
}

func newGroup(s *Server, key groupKey, gs *graph.Subscription, sub *changefeed.Subscription, d *sluice.Database) *group {
	gctx, stop := context.WithCancel(context.Background())
	g := &group{srv: s, key: key, gs: gs, sub: sub, epoch: d.Epoch, ctx: gctx, stop: stop,
		members: map[*member]struct{}{}, leaving: map[*member]int64{}, floor: -1, wake: make(chan struct{}), exited: make(chan struct{}),
		asm: assembler{max: s.opts.MaxChangeSetBytes}}
	if mt := s.opts.Metrics; mt != nil {
		g.catchUps = mt.CatchUps.WithLabelValues(strconv.FormatInt(d.ID, 10))
	}
	return g
}

// gauge is a subscribers gauge (a prometheus.Gauge).
type gauge interface {
	Inc()
	Dec()
}

// add adds a member that takes what is published from now on, counted in
// the subscribers gauge counted (may be nil); the caller holds g.mu.
func (g *group) add(counted gauge) *member {
	m := &member{g: g, pos: g.first + int64(len(g.hist)), counted: counted}
	g.members[m] = struct{}{}
	if counted != nil {
		counted.Inc()
	}
	return m
}

// remove takes m out of the members (and the gauge); the caller holds g.mu.
func (g *group) remove(m *member) {
	delete(g.members, m)
	if m.counted != nil {
		m.counted.Dec()
	}
}

// leave removes m from its group (a client that left, or a member that
// finished); the last member out closes the group and waits for it.
func (m *member) leave() {
	g := m.g
	g.mu.Lock()
	if _, ok := g.members[m]; ok {
		g.remove(m)
		for i := m.pos - g.first; i < int64(len(g.hist)); i++ {
			g.hist[i].unread--
		}
		g.trim()
	}
	delete(g.leaving, m)
	g.holdFloor()
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

// run evaluates each commit once and publishes its events.
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

// deliver evaluates c and publishes its events. It reports whether the
// group goes on.
func (g *group) deliver(c *sluice.Commit) bool {
	evs, start, err := g.asm.events(g.ctx, g.gs, c)
	if err != nil {
		if g.ctx.Err() == nil {
			g.end(err)
		}
		return false
	}
	if len(evs) > 0 {
		g.publish(start, evs)
	}
	return true
}

// publish appends the events of commit seq to the history and wakes the
// members. Over the history's bounds, the oldest entries go, and the
// members that had not taken them leave the group.
func (g *group) publish(start sluice.Position, evs []graph.SubscriptionEvent) {
	n := 0
	for i := range evs {
		n += len(evs[i].ID) + len(evs[i].Data) + sseFrameBytes
	}
	sse := make([]byte, 0, n)
	for i := range evs {
		sse = appendNextSSE(sse, evs[i].ID, evs[i].Data)
		// The payload is the frame's bytes before its closing "\n\n".
		evs[i].Data = sse[len(sse)-2-len(evs[i].Data) : len(sse)-2 : len(sse)-2]
	}
	size := len(sse) + len(evs)*eventOverhead
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.members) == 0 {
		return
	}
	g.hist = append(g.hist, entry{start: start, evs: evs, sse: sse, size: size, unread: len(g.members)})
	g.bytes += size
	budget := min(historyBytesPerMember*len(g.members), historyMaxBytes)
	for len(g.hist) > 1 && (len(g.hist) > historyCommits || g.bytes > budget) {
		g.evictOldest()
	}
	g.holdFloor()
	g.signal()
}

// holdFloor keeps the commits members still need from being pruned: the
// group's hub subscription moves on as soon as a commit is evaluated, but
// members take it later, and one that fell out of the history replays
// from the log. The caller holds g.mu.
func (g *group) holdFloor() {
	floor := int64(-1)
	if len(g.hist) > 0 {
		floor = g.hist[0].start.Seq - 1
	}
	for _, seq := range g.leaving {
		if floor < 0 || seq-1 < floor {
			floor = seq - 1
		}
	}
	if floor != g.floor {
		g.floor = floor
		if g.sub != nil { // nil in tests of the history alone
			g.sub.Hold(floor)
		}
	}
}

// left says that m, which fell out of the history, has its own hub
// subscription now (or gave up): the group stops holding its commits.
func (m *member) left() {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.leaving[m]; ok {
		delete(g.leaving, m)
		g.holdFloor()
	}
}

// evictOldest drops the oldest entry, detaching the members that had not
// taken it: they continue from its commit, read from the log. The caller
// holds g.mu.
func (g *group) evictOldest() {
	e := g.hist[0]
	for m := range g.members {
		if m.pos != g.first {
			continue
		}
		// From just before the entry's first change: what it holds is
		// replayed to it.
		m.detached, m.from = true, e.start
		m.from.Epoch = g.epoch
		g.remove(m)
		g.leaving[m] = e.start.Seq
		for i := 1; i < len(g.hist); i++ {
			g.hist[i].unread--
		}
		if g.catchUps != nil {
			g.catchUps.Inc()
		}
	}
	g.bytes -= e.size
	g.hist[0] = entry{}
	g.hist = g.hist[1:]
	g.first++
	g.trim()
}

// trim drops the oldest entries every member has taken. The caller holds
// g.mu.
func (g *group) trim() {
	for len(g.hist) > 0 && g.hist[0].unread <= 0 {
		g.bytes -= g.hist[0].size
		g.hist[0] = entry{}
		g.hist = g.hist[1:]
		g.first++
	}
	if len(g.hist) == 0 {
		g.hist = nil // release the backing array
	}
}

// signal wakes every member waiting on the current wake channel. The
// caller holds g.mu.
func (g *group) signal() {
	close(g.wake)
	g.wake = make(chan struct{})
}

// end closes the group with err; its members finish with it once they
// have taken what it published.
func (g *group) end(err error) {
	g.srv.forget(g)
	g.mu.Lock()
	g.closed = true
	g.ended = true
	g.err = err
	g.signal()
	g.mu.Unlock()
	g.sub.Close()
}

// takeState says what a member does once take gave it nothing.
type takeState int

const (
	takeWait     takeState = iota // wait on the wake channel
	takeDetached                  // continue on its own from m.from
	takeEnded                     // the group ended: finish with g.err
	takeRevoked                   // the member lost its access: finish
)

// take appends to buf the next entries (at most takeMax) m has not taken.
// When that leaves nothing to take, it also returns the channel that is
// closed when that changes (nil when more can be taken now), or the
// reason m must not wait: detached or ended.
func (m *member) take(buf []entry) ([]entry, <-chan struct{}, takeState) {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.revoked {
		return buf, nil, takeRevoked
	}
	if m.detached {
		return buf, nil, takeDetached
	}
	i := int(m.pos - g.first)
	n := min(len(g.hist)-i, takeMax)
	for k := i; k < i+n; k++ {
		buf = append(buf, g.hist[k])
		g.hist[k].unread--
	}
	m.pos += int64(n)
	more := i+n < len(g.hist) // before trim moves the indexes
	if n > 0 {
		first := g.first
		g.trim()
		if g.first != first {
			g.holdFloor()
		}
	}
	switch {
	case more:
		return buf, nil, takeWait
	case g.ended:
		return buf, nil, takeEnded
	}
	return buf, g.wake, takeWait
}

package stream

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
)

// Feeds. A share is evaluated by a feed: one hub subscription whose
// queued pieces a goroutine evaluates, for each of its shares in turn,
// when there are some (drain), then exits. Usually a share has a feed of
// its own. A multiplexed connection (a graphql-ws socket, a single
// connection mode stream) may hold thousands of distinct subscriptions,
// each a share; with a Feed, the connection's distinct subscriptions of
// one database are evaluated from one hub subscription instead of one
// each, which is most of what a distinct subscription would cost. The
// shares of a cohort (ShareOptions.Cohort: live queries that differ only
// in their variables) share a feed the same way, whatever their
// connections.
//
// Batches. The shares of a feed that have a Batcher are evaluated
// together, in two steps: each queued piece is noted for all of them at
// once (Note: what they have in common, such as decoding a change's
// images, is done once), and once the queue is empty, or after
// settleEvery pieces, they are settled (Settle: a live query cohort
// re-reads the results the noted pieces may have changed, in one
// statement) and what each gives is published. Pieces that queue while
// a settle runs are noted and settled together after it: a burst of
// commits costs at most two settles.

// Batcher evaluates shares together (ShareOptions.Batcher). Shares with
// equal Batchers are evaluated by one BatchGroup per feed.
type Batcher interface {
	// NewGroup returns the state of a feed's shares of this Batcher; the
	// feed's drain goroutine uses it, one call at a time.
	NewGroup() BatchGroup
}

// BatchGroup evaluates a feed's shares of one Batcher. evs are the
// shares' evaluators (ShareOptions.New), in the order of the shares.
type BatchGroup interface {
	// Note takes note of piece c, in commit order.
	Note(ctx context.Context, c *sluice.Commit, evs []Evaluator)
	// Settle sets out[i] (zeroed) to what evs[i] gives now: a share that
	// joined since the last settle is due its first entry.
	Settle(ctx context.Context, evs []Evaluator, out []Settled)
}

// settleEvery bounds the pieces noted before a settle while more keep
// queuing.
const settleEvery = 64

// group is a feed's shares of one Batcher. The slices are replaced, not
// modified, when shares attach or detach, so the drain may use a group
// it read without holding the feed's lock.
type group struct {
	g      BatchGroup
	shares []*share
	evs    []Evaluator
}

// Feed is a connection's handle on the feed its shares join (see
// ShareOptions.Feed). The zero value is ready to use; a Feed needs no
// closing: its hub subscription ends when its last share does.
type Feed struct {
	mu  sync.Mutex
	cur *feed
}

// feed is one hub subscription evaluated for its shares.
type feed struct {
	e   *Server
	db  *sluice.Database
	sub *changefeed.Subscription
	// ctx ends when the feed closes (its last share left), with stop.
	ctx  context.Context
	stop context.CancelFunc

	// cohort is the key of the cohort the feed evaluates (nil: none).
	cohort *cohortKey

	mu      sync.Mutex
	shares  []*share
	closing bool // no share may attach
	// groups holds the shares with a Batcher (not in shares).
	groups map[Batcher]*group
	// unsettled: a share of a group attached since the last settle.
	unsettled bool
	// batch is set for a connection's feed: its subscription takes every
	// commit (any class), and each piece is matched to the classes of
	// each share.
	batch bool
	buf   []*share // the drain's copy of shares
	// The drain's: the groups, a piece was noted since the last settle,
	// and the outcomes of a settle.
	gbuf    []*group
	noted   bool
	settled []Settled
	// version is the newest schema version of the pieces delivered (the
	// drain's): a cohort's filter is narrowed only to classes computed
	// for it (narrowCohort).
	version int

	// A feed has no goroutine of its own while nothing is queued: its
	// subscription notifies it (kick), and a goroutine evaluates what is
	// queued, then exits (drain). Thousands of distinct idle
	// subscriptions then cost no stack. runMu guards the fields below.
	runMu   sync.Mutex
	ready   bool      // sub is set: a drain may start
	running bool      // a drain runs
	again   bool      // kicked while it ran: it drains once more
	halted  bool      // the feed is over: no drain starts any more
	idle    sync.Cond // broadcast when a drain returns (on runMu)
}

func newFeed(e *Server, db *sluice.Database, batch bool) *feed {
	f := &feed{e: e, db: db, batch: batch}
	f.ctx, f.stop = context.WithCancel(context.Background())
	f.idle.L = &f.runMu
	return f
}

// current returns the connection's feed for database d if it may take
// another share, else nil.
func (c *Feed) current(d *sluice.Database) *feed {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.cur; f != nil && f.db.ID == d.ID && f.db.Epoch == d.Epoch {
		return f
	}
	return nil
}

func (c *Feed) set(f *feed) {
	c.mu.Lock()
	c.cur = f
	c.mu.Unlock()
}

// start lets drains run once the subscription is set.
func (f *feed) start() {
	f.runMu.Lock()
	f.ready = true
	queued := f.again // kicked before it was ready
	f.again = false
	f.runMu.Unlock()
	f.mu.Lock()
	queued = queued || f.unsettled
	f.mu.Unlock()
	if queued {
		f.kick()
	}
}

// attach adds share s, reporting false when the feed is closing. A
// share with a Batcher is due a settle: attach kicks the drain (start
// does for a feed that is not started).
func (f *feed) attach(s *share) bool {
	f.mu.Lock()
	if f.closing {
		f.mu.Unlock()
		return false
	}
	s.f = f
	if f.cohort != nil && f.sub != nil {
		f.widenCohort(s)
	}
	if s.batcher == nil {
		f.shares = append(f.shares, s)
		f.mu.Unlock()
		return true
	}
	if f.groups == nil {
		f.groups = map[Batcher]*group{}
	}
	old := f.groups[s.batcher]
	g := &group{}
	if old != nil {
		g.g = old.g
		g.shares = append(slices.Clip(old.shares), s)
		g.evs = append(slices.Clip(old.evs), s.ev)
	} else {
		g.g = s.batcher.NewGroup()
		g.shares, g.evs = []*share{s}, []Evaluator{s.ev}
	}
	f.groups[s.batcher] = g
	f.unsettled = true
	f.mu.Unlock()
	f.kick()
	return true
}

// count returns how many shares the feed has; the caller holds f.mu.
func (f *feed) count() int {
	n := len(f.shares)
	for _, g := range f.groups {
		n += len(g.shares)
	}
	return n
}

// detach removes share s. When it was the last, the feed closes: its
// subscription ends, and (unless called by the drain itself, inDrain)
// detach waits for a running drain to return.
func (f *feed) detach(s *share, inDrain bool) {
	closeEvaluator(s.ev)
	f.mu.Lock()
	if i := slices.Index(f.shares, s); i >= 0 {
		f.shares = slices.Delete(f.shares, i, i+1)
	}
	if old := f.groups[s.batcher]; s.batcher != nil && old != nil {
		if i := slices.Index(old.shares, s); i >= 0 {
			g := &group{g: old.g,
				shares: slices.Concat(old.shares[:i], old.shares[i+1:]),
				evs:    slices.Concat(old.evs[:i], old.evs[i+1:])}
			if len(g.shares) == 0 {
				delete(f.groups, s.batcher)
			} else {
				f.groups[s.batcher] = g
			}
		}
	}
	last := f.count() == 0 && !f.closing
	if last {
		f.closing = true
		f.shares, f.groups = nil, nil
	}
	f.mu.Unlock()
	if !last {
		return
	}
	if f.cohort != nil {
		f.e.shares.forgetCohort(f)
	}
	f.stop()
	f.sub.Close()
	if !inDrain {
		f.halt()
	}
}

// floor is what the feed's shares hold (Options.Hold): the lowest of
// their floors (see share.holdFloor), -1 for none. Floors asks for it
// when it needs it, rather than each share telling the feed every time
// its floor moves: a connection's feed may have thousands of shares.
func (f *feed) floor() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	floor := int64(-1)
	for _, s := range f.shares {
		if v := s.floor.Load(); v >= 0 && (floor < 0 || v < floor) {
			floor = v
		}
	}
	// The groups' shares are shares of results, which hold nothing.
	return floor
}

// kick makes sure a drain evaluates what the subscription queued
// (Options.Notify). It never blocks.
func (f *feed) kick() {
	f.runMu.Lock()
	defer f.runMu.Unlock()
	switch {
	case f.running || !f.ready:
		f.again = true
	case !f.halted:
		f.running = true
		go f.drain()
	}
}

// drain evaluates what is queued, then returns; a kick while it runs
// makes it look once more, so nothing queued waits for the next kick.
func (f *feed) drain() {
	for {
		ok := f.step()
		f.runMu.Lock()
		if ok && f.again {
			f.again = false
			f.runMu.Unlock()
			continue
		}
		f.running = false
		f.halted = f.halted || !ok
		f.idle.Broadcast()
		f.runMu.Unlock()
		return
	}
}

// halt stops drains from starting and waits for the running one: after
// it, the evaluators are not used any more.
func (f *feed) halt() {
	f.runMu.Lock()
	defer f.runMu.Unlock()
	f.halted = true
	for f.running {
		f.idle.Wait()
	}
}

// step evaluates each queued piece once for every share and publishes
// the events, settling the groups when the queue is empty (or every
// settleEvery pieces). It reports whether the feed goes on.
func (f *feed) step() bool {
	pieces := 0
	for {
		if f.ctx.Err() != nil {
			return false
		}
		if pieces < settleEvery {
			select {
			case c := <-f.sub.Commits():
				f.deliver(c)
				pieces++
				continue
			default:
			}
		}
		f.mu.Lock()
		due := f.unsettled || f.noted
		f.unsettled = false
		f.mu.Unlock()
		if due {
			f.settle()
			pieces = 0
			continue // what queued meanwhile
		}
		select {
		case <-f.sub.Done():
			// What was queued before the end is still owed, in order.
			for {
				select {
				case c := <-f.sub.Commits():
					f.deliver(c)
					continue
				default:
				}
				break
			}
			f.mu.Lock()
			shares := append(f.buf[:0], f.shares...)
			for _, g := range f.groups {
				shares = append(shares, g.shares...)
			}
			f.mu.Unlock()
			for _, s := range shares {
				s.end(f.sub.Err())
			}
			clear(shares)
			return false
		default:
			return true
		}
	}
}

// deliver evaluates piece c for each share (of a connection's feed, only
// those it may concern) and publishes their events; the groups note it.
func (f *feed) deliver(c *sluice.Commit) {
	f.version = max(f.version, c.SchemaVersion)
	f.mu.Lock()
	f.buf = append(f.buf[:0], f.shares...)
	f.gbuf = f.gbuf[:0]
	for _, g := range f.groups {
		f.gbuf = append(f.gbuf, g)
	}
	f.mu.Unlock()
	if len(f.gbuf) > 0 {
		ctx := f.ctx
		// A group decodes the piece's images to note it: the feed's
		// notes take them from the image budget together. Without
		// room before the feed closes, nothing is noted: its shares
		// end with it.
		if release, err := f.e.images.take(ctx, c); err == nil {
			for _, g := range f.gbuf {
				g.g.Note(ctx, c, g.evs)
			}
			release()
			f.noted = true
		}
		clear(f.gbuf)
	}
	var classes map[string]bool
	for _, s := range f.buf {
		if f.batch && len(s.classes) > 0 && !c.NewSchema && (s.version <= 0 || c.SchemaVersion <= s.version) {
			if classes == nil {
				classes = commitClasses(c)
			}
			if !anyOf(s.classes, classes) {
				continue
			}
		}
		s.deliver(c)
	}
	clear(f.buf) // do not hold shares that leave
}

// settle settles every group and publishes what each share gives; a
// share whose evaluation failed ends.
func (f *feed) settle() {
	f.noted = false
	f.mu.Lock()
	f.gbuf = f.gbuf[:0]
	for _, g := range f.groups {
		f.gbuf = append(f.gbuf, g)
	}
	f.mu.Unlock()
	ctx := f.ctx
	var ended []*share
	var errs []error
	var retry []<-chan struct{}
	for _, g := range f.gbuf {
		out := f.settled[:0]
		for range g.evs {
			out = append(out, Settled{})
		}
		g.g.Settle(ctx, g.evs, out)
		if f.cohort != nil {
			f.narrowCohort() // before its results are out
		}
		for i := range out {
			r := &out[i]
			switch {
			case r.Retry != nil:
				if !slices.Contains(retry, r.Retry) {
					retry = append(retry, r.Retry)
				}
			case r.Err != nil:
				if ctx.Err() == nil {
					ended = append(ended, g.shares[i])
					errs = append(errs, r.Err)
				}
			case len(r.Events) > 0:
				g.shares[i].publishResult(r)
			}
		}
		clear(out)
		f.settled = out
	}
	clear(f.gbuf)
	// Ending a share detaches it from the feed: after the walk.
	for i, s := range ended {
		s.end(errs[i])
	}
	// Shares left unsettled are settled once what they wait for is
	// free: the drain goes on with the others meanwhile.
	for _, ch := range retry {
		go func() {
			select {
			case <-ch:
				f.mu.Lock()
				f.unsettled = true
				f.mu.Unlock()
				f.kick()
			case <-ctx.Done():
			}
		}()
	}
}

// narrowCohort narrows the class filter of a cohort's feed, which passes
// every commit made under a later schema version than the one its
// classes were computed for (changefeed.Options.ClassesVersion), to the
// classes its live queries need once each of them was revised to the
// version of the newest piece delivered, as revisedClasses does for the
// other feeds: the pieces that follow are made under that version or a
// later one (which still passes), and a commit of that version that
// touches none of those classes concerns none of them. Their classes may
// differ with their variables: the filter takes the union. The drain
// calls it, after a group's settle (which revises them), before the
// results are published.
func (f *feed) narrowCohort() {
	v := f.version
	if cur := f.sub.ClassesVersion(); cur <= 0 || v <= cur {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing || len(f.shares) > 0 || len(f.groups) == 0 {
		return
	}
	var union []string
	for _, g := range f.groups {
		for _, ev := range g.evs {
			cl, ok := ev.(classer)
			if !ok {
				return
			}
			classes, version := cl.Classes()
			if version != v {
				return // not revised yet, or revised past what was met
			}
			if len(classes) == 0 {
				return // it needs every commit
			}
			for _, c := range classes {
				if !slices.Contains(union, c) {
					union = append(union, c)
				}
			}
		}
	}
	f.sub.SetClasses(union, v)
}

// widenCohort makes the class filter of a cohort's feed, narrowed since
// share s's query was prepared (narrowCohort), pass every commit made
// under a later schema version than s's again, until s too is revised:
// s may need classes the others do not. What was skipped before was
// committed before s reads its first result. The caller holds f.mu.
func (f *feed) widenCohort(s *share) {
	if v := f.sub.ClassesVersion(); v > 0 && s.version < v {
		classes := s.classes
		if s.version <= 0 {
			classes = nil // its version is not known: every commit
		}
		f.sub.SetClasses(classes, s.version)
	}
}

func anyOf(want []string, have map[string]bool) bool {
	for _, cl := range want {
		if have[cl] {
			return true
		}
	}
	return false
}

// commitClasses returns the classes piece c changes.
func commitClasses(c *sluice.Commit) map[string]bool {
	m := make(map[string]bool, 4)
	for i := range c.Changes {
		m[c.Changes[i].Class] = true
	}
	return m
}

// dbLabel is database id as a metric label.
func dbLabel(id int64) string { return strconv.FormatInt(id, 10) }

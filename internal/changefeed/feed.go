package changefeed

import (
	"slices"
	"sync"

	"github.com/sluice-dev/sluice"
)

// Feeds. A share is evaluated by a feed: one hub subscription whose
// queued pieces a goroutine evaluates, for each of its shares in turn,
// when there are some (drain), then exits. Usually a share has a feed of
// its own. A multiplexed connection (a graphql-ws socket, a single
// connection mode stream) may hold thousands of distinct subscriptions,
// each a share; with a Feed, the connection's distinct subscriptions of
// one database are evaluated from one hub subscription instead of one
// each, which is most of what a distinct subscription would cost.

// Feed is a connection's handle on the feed its shares join (see
// ShareOptions.Feed). The zero value is ready to use; a Feed needs no
// closing: its hub subscription ends when its last share does.
type Feed struct {
	mu  sync.Mutex
	cur *feed
}

// feed is one hub subscription evaluated for its shares.
type feed struct {
	h   *Hub
	db  *sluice.Database
	sub *Subscription
	// ctx ends when the feed closes (its last share left).
	ctx lazyCtx

	mu      sync.Mutex
	shares  []*share
	closing bool // no share may attach
	// batch is set for a connection's feed: its subscription takes every
	// commit (any class), and each piece is matched to the classes of
	// each share.
	batch bool
	buf   []*share // the drain's copy of shares

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

func newFeed(h *Hub, db *sluice.Database, batch bool) *feed {
	f := &feed{h: h, db: db, batch: batch}
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
	if queued {
		f.kick()
	}
}

// attach adds share s, reporting false when the feed is closing.
func (f *feed) attach(s *share) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return false
	}
	s.f = f
	f.shares = append(f.shares, s)
	return true
}

// detach removes share s. When it was the last, the feed closes: its
// subscription ends, and (unless called by the drain itself, inDrain)
// detach waits for a running drain to return.
func (f *feed) detach(s *share, inDrain bool) {
	f.mu.Lock()
	if i := slices.Index(f.shares, s); i >= 0 {
		f.shares = slices.Delete(f.shares, i, i+1)
	}
	last := len(f.shares) == 0 && !f.closing
	if last {
		f.closing = true
		f.shares = nil
	}
	f.mu.Unlock()
	if !last {
		return
	}
	f.ctx.stop()
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
// the events. It reports whether the feed goes on.
func (f *feed) step() bool {
	for {
		if f.ctx.get().Err() != nil {
			return false
		}
		select {
		case c := <-f.sub.Commits():
			f.deliver(c)
			continue
		default:
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
// those it may concern) and publishes their events.
func (f *feed) deliver(c *sluice.Commit) {
	f.mu.Lock()
	f.buf = append(f.buf[:0], f.shares...)
	f.mu.Unlock()
	var classes map[string]bool
	for _, s := range f.buf {
		if f.batch && len(s.classes) > 0 {
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

func anyOf(want []string, have map[string]bool) bool {
	for _, cl := range want {
		if have[cl] {
			return true
		}
	}
	return false
}

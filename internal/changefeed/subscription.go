package changefeed

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice"
)

// Subscription receives the commits of one database in order, each once,
// from its starting position on. Read Commits until Done is closed, then
// Err says why it ended; Close it when done. Its methods are safe for
// concurrent use.
type Subscription struct {
	id      uint64
	hub     *Hub
	db      *sluice.Database
	opts    Options
	started time.Time
	st      *dbState

	ch chan *sluice.Commit
	// ctx ends with the subscription (for reading the log).
	ctx lazyCtx

	// cursor and part are the subscription's mark (Subscription.mark): every
	// commit up to cursor, and in the next the changes up to index part,
	// were put in ch or skipped. The tailer writes them (under st.mu)
	// while live, the catch-up goroutine while not; the hand-over between
	// the two happens under st.mu. Others read only cursor (atomic).
	cursor atomic.Int64
	part   int
	// stamp is that of the commit the mark names (the last one it has
	// changes of), written with it; zero when not known (a mark from a
	// client's position): the catch-up's reads check it (rewind.go).
	stamp sluice.Stamp
	// verify: the mark is a client's position carrying its commit's tag
	// (stamp is known by it only), which no read checked yet: s reads
	// the log before it goes live, even at the head (rewind.go).
	verify   bool
	live     atomic.Bool
	catchUps atomic.Int64
	// queued counts the commits put in ch, live or from the log.
	queued atomic.Int64
	// bytes is what is queued in ch, kept by whoever writes the mark.
	bytes queuedBytes
	// filter is the classes the subscription delivers (Options.Classes,
	// then SetClasses'); read by whoever writes the mark.
	filter atomic.Pointer[classFilter]
	// rewound, under st.mu, is set by Hub.rewind on a subscription not
	// live, whose mark it may not read: the log now ends at commit
	// rewoundTo (the lowest end since its catch-up last looked), and the
	// catch-up judges its mark against it (rewind.go).
	rewound   bool
	rewoundTo int64

	once sync.Once
	done chan struct{}
	err  error // set before done is closed
}

// ID returns the subscription's id, unique in the process and increasing,
// for logs, metrics and the `: connected sub=<n>` frame.
func (s *Subscription) ID() uint64 { return s.id }

// Database returns the database subscribed to.
func (s *Subscription) Database() *sluice.Database { return s.db }

// Commits returns the channel the commits arrive on, oldest first. It is
// never closed: select on Done too. Commits are shared; do not modify them.
func (s *Subscription) Commits() <-chan *sluice.Commit { return s.ch }

// Done is closed when the subscription ends. Commits already queued may
// still be read from Commits, in order.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err returns why the subscription ended: ErrClosed, ErrShutdown, or a
// *sluice.Error with CodeGone (history it needed was pruned) or
// CodeNotFound (the database was deleted). It is nil before Done is closed.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the subscription and releases it. It is idempotent.
func (s *Subscription) Close() { s.finish(ErrClosed) }

// End ends the subscription with err (what Err then returns), unless it
// already ended. It never blocks on the consumer.
func (s *Subscription) End(err error) { s.finish(err) }

func (s *Subscription) finish(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.done)
		s.ctx.stop()
		s.hub.remove(s)
		s.notify()
	})
}

// notify tells the consumer, if it asked (Options.Notify), that a piece
// was queued or the subscription ended.
func (s *Subscription) notify() {
	if s.opts.Notify != nil {
		s.opts.Notify()
	}
}

// sleep waits d or until the subscription ends, reporting whether it is
// still open.
func (s *Subscription) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

// mark returns how far s got. Only its writer (see cursor) may call it.
func (s *Subscription) mark() sluice.Cursor { return sluice.Cursor{Seq: s.cursor.Load(), Part: s.part} }

// setMark records how far s got, and forgets the stamp of its commit.
// Only its writer may call it.
func (s *Subscription) setMark(m sluice.Cursor) {
	s.part = m.Part
	s.cursor.Store(m.Seq)
	s.stamp = sluice.Stamp{}
}

// took records that s got piece c (put in ch or skipped), its mark being
// m: its mark moves to the end of c, and its stamp to c's, unless m is
// past it already. Only its writer may call it.
func (s *Subscription) took(m sluice.Cursor, c *sluice.Commit) {
	if !m.Less(c.Taken()) {
		return
	}
	s.setMark(c.Taken())
	s.stamp = c.Stamp()
}

// classFilter is the classes a subscription delivers, computed for
// schema version version (see Options.ClassesVersion).
type classFilter struct {
	classes []string
	version int
}

// SetClasses replaces the subscription's Classes and ClassesVersion: its
// consumer, revised to schema version version, now needs the commits of
// classes only. The commits queued already stay.
func (s *Subscription) SetClasses(classes []string, version int) {
	s.filter.Store(&classFilter{classes: classes, version: version})
}

// ClassesVersion returns the schema version the subscription's classes
// were computed for (0: not known).
func (s *Subscription) ClassesVersion() int { return s.filter.Load().version }

// prepare returns what s receives of piece c given its mark m: nil when
// it holds nothing after m or changes none of its classes (classes, when
// not nil, is c's set of classes), starts no schema version and was made
// under the version the classes were computed for (or an unknown one),
// else c or a copy of it holding only the changes after m. A commit made
// under an older version passes too: its consumer selects its changes by
// the classes as they were then (engine.SchemaThen), which may be others
// (a class that implemented an interface then and no longer does).
func (s *Subscription) prepare(m sluice.Cursor, c *sluice.Commit, classes map[string]bool) *sluice.Commit {
	out := c.Since(m)
	f := s.filter.Load()
	if out == nil || len(f.classes) == 0 || c.NewSchema || (f.version > 0 && c.SchemaVersion > 0 && c.SchemaVersion != f.version) {
		return out
	}
	if classes == nil {
		classes = commitClasses(out)
	}
	for _, cl := range f.classes {
		if classes[cl] {
			return out
		}
	}
	return nil
}

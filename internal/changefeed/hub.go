package changefeed

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// Log is the part of the commit log the hub reads (internal/postgres's DB
// implements it).
type Log interface {
	History(ctx context.Context, dbID int64) (sluice.History, error)
	// ChangeCount returns how many changes commit seq of database dbID
	// has; ok is false when the log has no such commit (pruned).
	ChangeCount(ctx context.Context, dbID, seq int64) (n int, ok bool, err error)
	// ReadLog returns the commits after position after (Index
	// sluice.WholeCommit: after all of commit after.Seq), oldest first,
	// at most limit commits and about maxBytes of change images: a large
	// commit comes in pieces (sluice.Commit.Partial), and the first commit
	// may start inside. Commits carry the AccessVersion of the snapshot
	// they were read in. more reports whether the log held more. A result
	// that does not start right after after, or a Gone error, means the
	// history in between was pruned. of, unless zero, is the stamp of
	// commit after.Seq as the reader read it: when the log holds another
	// commit of that number, the read fails with sluice.ErrCommitReplaced
	// (rewind.go).
	ReadLog(ctx context.Context, d *sluice.Database, after sluice.Position, of sluice.Stamp, limit int, maxBytes int64) (commits []*sluice.Commit, more bool, err error)
	// AccessChanges returns the access log's changes in (after, upTo],
	// oldest first: at most upTo-after, since versions are unique, so
	// the range bounds what a read holds (guards.sync reads accessPage
	// versions at a time). A version of the range missing from the
	// result was pruned.
	AccessChanges(ctx context.Context, after, upTo int64) ([]sluice.AccessChange, error)
}

// ErrShutdown ends every subscription when the hub closes.
var ErrShutdown = sluice.Errorf(sluice.CodeUnavailable, "the server is shutting down")

// ErrClosed is the Err of a subscription ended by its own Close.
var ErrClosed = errors.New("subscription closed")

// HubOptions configure a Hub. Zero values take the defaults.
type HubOptions struct {
	Logger  *slog.Logger
	Metrics *metrics.Stream
	// QueueSize is how many commits a live subscription may have waiting
	// before it switches to reading the log (default 256).
	QueueSize int
	// BatchSize is how many commits a catch-up reads at a time (default
	// 256), and PieceBytes about how many bytes of change images at most
	// (default 64 KiB): a larger commit is read and delivered in pieces,
	// so a subscription holds at most QueueSize pieces.
	BatchSize  int
	PieceBytes int64
	// QueueBytes is about how many bytes of change images a subscription
	// may have queued (default 1 MiB); a piece is queued when the queue
	// is empty whatever its size (one row of the log, which may be
	// larger). A live subscription past it switches to reading the log, as
	// when its queue is full, and a catching-up one waits for its
	// consumer. The pieces a catch-up reads are its own, and the live ones
	// a stalled subscription holds are its alone once every other took
	// them: without it, QueueSize pieces of large rows (documents of 1
	// MB) held 256 MB for one stream that did not read.
	QueueBytes int64
	// Recheck is how often a subscription waiting for the tailer checks that
	// its database still exists (default 1s).
	Recheck time.Duration
	// Check re-checks a stream's grant against the current state (see
	// Guard): nil when it still holds, else the error a request would
	// get. Nil checks nothing.
	Check func(context.Context, *sluice.Grant) error
	// CheckTimeout bounds each Check (default 30 s, Postgres' default
	// statement timeout in Sluice): Guard runs it on the request's
	// context, which has no deadline.
	CheckTimeout time.Duration
	// CatchUpReads caps the catch-ups' reads of the log running at once
	// in the process, and CatchUpReadsPerUser those of the streams of one
	// user (Options.User; the super user is held to the process's cap
	// only); 0: no cap. A catch-up holds its turn for one read (PieceBytes,
	// BatchSize), never while its consumer takes what it read.
	CatchUpReads        int
	CatchUpReadsPerUser int
	// ReadAs, when set, returns the context a catch-up of a stream of user
	// u reads the log with, so that its reads count toward that user's
	// share of Postgres connections (the daemon: postgres.CountFor).
	ReadAs func(ctx context.Context, u *sluice.User) context.Context
	// CatchUpRead, for tests, is told of each catch-up read of the log,
	// once it has its turn, with the user of the stream (nil: none); it
	// may block, and the read ends with a call of what it returns.
	CatchUpRead func(u *sluice.User) (done func())
	// Now is the clock a catch-up's reads of the log are timed by
	// (sluice.Commit.ReadLocal; default time.Now).
	Now func() time.Time
	// JWTKeyRemoved reports whether the JWT key identified by id (a
	// credential's JWTKey) was removed from this replica's key set: a
	// stream of such a key is refused, and ended by JWTKeysChanged. A key
	// the set never held is not removed (another replica may have learnt
	// it first, and made the stream ticket). Nil checks nothing.
	JWTKeyRemoved func(id string) bool
	// MaxStreams caps the open streams (guards) of the process, and
	// MaxStreamsPerUser those of one user (the super user is exempt);
	// 0: no cap.
	MaxStreams        int
	MaxStreamsPerUser int
	// StreamVariablesBytes bounds what the streams of the process keep
	// of their variables (what Guard charges them), and
	// StreamVariablesBytesPerUser what those of one user keep (the super
	// user is exempt); 0: no bound.
	StreamVariablesBytes        int64
	StreamVariablesBytesPerUser int64
}

// Hub fans commits out to subscriptions. It is safe for concurrent use.
type Hub struct {
	log     Log
	logger  *slog.Logger
	metrics *metrics.Stream
	queue   int
	batch   int
	piece   int64
	bytes   int64 // HubOptions.QueueBytes
	recheck time.Duration
	now     func() time.Time // HubOptions.Now
	nextID  atomic.Uint64
	// reads caps the catch-ups' reads of the log at once; readAs and
	// onRead are HubOptions.ReadAs and CatchUpRead.
	reads  *readSlots
	readAs func(context.Context, *sluice.User) context.Context
	onRead func(*sluice.User) func()
	// The open streams' access guards have a lock of their own; access.go
	// says how it orders with mu.
	guards *guards

	// mu guards the fields below. It may be taken while holding a
	// dbState's mu, never the other way round.
	mu     sync.Mutex
	closed bool
	dbs    map[int64]*dbState
	subs   map[*Subscription]struct{}
	perDB  map[int64]int  // len(subs) by database
	wg     sync.WaitGroup // catch-up goroutines

	// resumed gets a token (it holds one at most) when a subscription
	// starting at a position in the log registers (Resumed).
	resumed chan struct{}
}

// dbState is the hub's view of one database.
type dbState struct {
	id int64

	mu      sync.Mutex
	tracked bool          // the tailer follows this database
	head    sluice.Cursor // how far the tailer handed the log over
	live    map[*Subscription]struct{}
	// changed is closed (and replaced) whenever head or tracked changes,
	// to wake catch-ups waiting for the tailer.
	changed chan struct{}
}

// NewHub returns a Hub that reads catch-ups from log.
func NewHub(log Log, o HubOptions) *Hub {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 256
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 256
	}
	if o.PieceBytes <= 0 {
		o.PieceBytes = 64 << 10
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 1 << 20
	}
	if o.Recheck <= 0 {
		o.Recheck = time.Second
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Hub{
		log: log, logger: o.Logger, metrics: o.Metrics, queue: o.QueueSize, batch: o.BatchSize, piece: o.PieceBytes, bytes: o.QueueBytes, recheck: o.Recheck, now: o.Now,
		dbs: map[int64]*dbState{}, subs: map[*Subscription]struct{}{}, perDB: map[int64]int{}, resumed: make(chan struct{}, 1),
		guards: newGuards(log, o),
		readAs: o.ReadAs, onRead: o.CatchUpRead,
	}
	var waiting prometheus.Gauge
	if o.Metrics != nil {
		waiting = o.Metrics.CatchUpsWaiting
	}
	h.reads = newReadSlots(o.CatchUpReads, o.CatchUpReadsPerUser, waiting)
	return h
}

// state returns the state of database id, creating it untracked.
func (h *Hub) state(id int64) *dbState {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.dbs[id]
	if st == nil {
		st = &dbState{id: id, live: map[*Subscription]struct{}{}, changed: make(chan struct{})}
		h.dbs[id] = st
	}
	return st
}

func (st *dbState) signal() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// Options describe one subscription.
type Options struct {
	// Classes limits delivery to commits that change a document of one of
	// these classes, and those that start a schema version
	// (sluice.Commit.NewSchema); empty means every commit. The consumer
	// still filters changes within a commit.
	Classes []string
	// ClassesVersion, when positive, is the schema version Classes were
	// computed for: a commit made under another version is delivered
	// whatever its classes. Its consumer evaluates a later one prepared
	// for that version, which may know more classes (one added to the
	// schema, a new implementation of an interface), so a commit of such
	// a class reaches a stream open across the change as it reaches one
	// subscribed after it (see SetClasses); and an older one (a resume)
	// by the classes as they were then, which may be others (a class
	// that implemented an interface then and no longer does).
	ClassesVersion int
	// Transport labels the subscription in metrics and listings ("rest",
	// "graphql-sse").
	Transport string
	// Shared marks a subscription that serves several clients (a group
	// of GraphQL subscribers): its owner counts them in the subscribers
	// gauge, the hub does not count the subscription itself.
	Shared bool
	// Notify, when set, is called whenever a piece was queued on Commits
	// and when the subscription ends, so that its consumer needs no
	// goroutine waiting on it (a share starts one when there is work). It
	// is called with the hub's locks held and must not block.
	Notify func()
	// Queue, when positive and below the hub's QueueSize, is how many
	// pieces this subscription may have waiting.
	Queue int
	// User is whose stream the subscription serves, when it serves one
	// user's (nil: a share's, which serves many, or Sluice's own): its
	// catch-up reads count toward that user's connections and catch-up
	// reads (HubOptions.ReadAs, CatchUpReadsPerUser).
	User *sluice.User
	// Hold, when set, returns a floor the subscription's owner keeps
	// (-1: none): Floors reports at most it, so that pruning keeps the
	// commits after it. An owner that hands the commits on at its
	// readers' pace (a feed's shares) holds what its slowest reader
	// still needs, which may be behind the subscription's own cursor.
	// Called by Floors, with the hub's lock held; it must not block.
	Hold func() int64
}

// Subscribe registers a subscription to database d starting after position
// from, or at the newest commit when from is nil. It returns a CodeGone
// error when from is from another epoch or older than retained history, a
// CodeInvalid one when it is ahead of the log, NotFound when d no longer
// exists and ErrShutdown once the hub is closed. Any commit that starts
// after Subscribe returns is delivered. The caller must Close it.
func (h *Hub) Subscribe(ctx context.Context, d *sluice.Database, from *sluice.Position, o Options) (*Subscription, error) {
	hist, err := h.log.History(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	label := dbLabel(d.ID)
	s := &Subscription{
		id: h.nextID.Add(1), hub: h, db: d, opts: o,
		ch: make(chan *sluice.Commit, queueSize(h.queue, o.Queue)), done: make(chan struct{}),
		started: time.Now(),
	}
	s.filter.Store(&classFilter{classes: o.Classes, version: o.ClassesVersion})
	if from == nil {
		s.setMark(sluice.WholeCursor(hist.LastSeq))
	} else {
		if err := hist.Check(d, *from); err != nil {
			if h.metrics != nil && sluice.ErrorCode(err) == sluice.CodeGone {
				h.metrics.ResumeFailures.WithLabelValues(label).Inc()
			}
			return nil, err
		}
		if err := h.checkIndex(ctx, d, *from); err != nil {
			return nil, err
		}
		if h.metrics != nil {
			h.metrics.Replays.WithLabelValues(label).Inc()
		}
		s.setMark(sluice.CursorAt(*from))
		if from.Tag != "" {
			// The commit it names may be another of its number now: the
			// first read of the catch-up checks it (rewind.go).
			s.stamp, s.verify = sluice.TaggedStamp(from.Tag), true
		}
	}
	st := h.state(d.ID)
	s.st = st

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrShutdown
	}
	h.subs[s] = struct{}{}
	h.perDB[d.ID]++
	h.mu.Unlock()
	if from != nil {
		select {
		case h.resumed <- struct{}{}:
		default:
		}
	}
	if h.metrics != nil && !o.Shared {
		h.metrics.Subscribers.WithLabelValues(o.Transport, label).Inc()
	}

	st.mu.Lock()
	if st.tracked && !s.rewound && !s.verify && !s.mark().Less(st.head) {
		st.live[s] = struct{}{}
		s.live.Store(true)
	} else {
		h.startCatchUp(s)
	}
	st.mu.Unlock()
	return s, nil
}

// checkIndex refuses a resume from a position inside a commit past its
// last change (sluice.CheckIndex), as a read of the past or /api/changes
// refuses it, before the stream starts: read as a cursor it would resume
// after the commit, from a point no event gave the client.
func (h *Hub) checkIndex(ctx context.Context, d *sluice.Database, from sluice.Position) error {
	if from.Index == sluice.WholeCommit || from.Seq == 0 {
		return nil // an end of a commit; commit 0's changes History.Check refused
	}
	n, ok, err := h.log.ChangeCount(ctx, d.ID, from.Seq)
	if err != nil || !ok {
		return err // pruned since History: the catch-up finds the gap
	}
	return sluice.CheckIndex(d, "position", from, n)
}

// queueSize returns the queue of a subscription that asked for want
// pieces, of a hub whose queue is def.
func queueSize(def, want int) int {
	if want > 0 && want < def {
		return want
	}
	return def
}

// startCatchUp starts s's catch-up goroutine. The caller holds s.st.mu.
func (h *Hub) startCatchUp(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return // Close ends s
	}
	h.wg.Add(1)
	go h.catchUp(s)
}

// track tells the hub that the tailer follows database id from the end of
// commit head on.
func (h *Hub) track(id int64, head int64) {
	st := h.state(id)
	st.mu.Lock()
	st.tracked = true
	st.head = sluice.WholeCursor(head)
	st.signal()
	st.mu.Unlock()
}

// skipIfIdle moves database id's head to seq without delivering anything
// when the database has no subscription at all, and reports whether it did.
// It would be safe even with subscriptions catching up (they read the log
// themselves up to the head), but then the published counts would depend
// on timing; one that registers later starts from the log or after the
// head. The check and the move happen under the database's lock, so no
// subscription can go live in between.
func (h *Hub) skipIfIdle(id int64, seq int64) bool {
	st := h.state(id)
	st.mu.Lock()
	defer st.mu.Unlock()
	if h.watchedLocked(id, st) {
		return false
	}
	if st.head.Less(sluice.WholeCursor(seq)) {
		st.head = sluice.WholeCursor(seq)
		st.signal()
	}
	return true
}

// watched reports whether database id has subscriptions, live or
// catching up.
func (h *Hub) watched(id int64) bool {
	st := h.state(id)
	st.mu.Lock()
	defer st.mu.Unlock()
	return h.watchedLocked(id, st)
}

// watchedLocked is watched with st (id's state) locked.
func (h *Hub) watchedLocked(id int64, st *dbState) bool {
	h.mu.Lock()
	n := h.perDB[id]
	h.mu.Unlock()
	return n > 0 || len(st.live) > 0
}

// drop ends every subscription of database id, which was deleted.
func (h *Hub) drop(id int64) {
	h.end(id, true, func(s *Subscription) error {
		return sluice.Errorf(sluice.CodeNotFound, "database %s was deleted", s.db.Path())
	})
}

// fail ends every subscription of database id with err: its log cannot
// be read past a commit, so none can go on.
func (h *Hub) fail(id int64, err error) {
	h.end(id, false, func(*Subscription) error { return err })
}

// end ends every subscription of database id with the error errOf gives
// it, forgetting the database's state first when deleted is set.
func (h *Hub) end(id int64, deleted bool, errOf func(*Subscription) error) {
	h.mu.Lock()
	if deleted {
		delete(h.dbs, id)
	}
	var victims []*Subscription
	for s := range h.subs {
		if s.db.ID == id {
			victims = append(victims, s)
		}
	}
	h.mu.Unlock()
	for _, s := range victims {
		s.finish(errOf(s))
	}
}

// publish hands piece c, the successor of the database's head, to every
// live subscription. It never blocks on a subscriber: one whose queue is
// full, or holds QueueBytes of pieces, switches to catching up from its
// mark. Live pieces are shared by every live subscription, but those a
// stalled one still holds are its alone once the others took them: 256
// pieces of documents of 1 MB pinned 256 MB for one client that did not
// read.
func (h *Hub) publish(c *sluice.Commit) {
	st := h.state(c.DatabaseID)
	var classes map[string]bool
	st.mu.Lock()
	defer st.mu.Unlock()
	st.head = c.Taken()
	for s := range st.live {
		m := s.mark()
		if classes == nil && len(s.filter.Load().classes) > 0 {
			classes = commitClasses(c)
		}
		out := s.prepare(m, c, classes)
		if out == nil {
			s.took(m, c)
			continue
		}
		if size := pieceBytes(out); s.bytes.fits(len(s.ch), size, h.bytes) {
			select {
			case s.ch <- out:
				s.bytes.pushed(size)
				s.took(m, c)
				s.queued.Add(1)
				s.notify()
				continue
			default:
			}
		}
		// The catch-up reads the log from s's mark, waiting for the
		// consumer to take what it holds: nothing is lost.
		delete(st.live, s)
		s.live.Store(false)
		s.catchUps.Add(1)
		if h.metrics != nil {
			h.metrics.CatchUps.WithLabelValues(dbLabel(c.DatabaseID)).Inc()
		}
		h.startCatchUp(s)
	}
	st.signal()
}

// gap moves every live subscription of database id to catching up: the
// tailer found commits missing (pruned while it lagged), and each
// subscription must find out for itself whether it needed them.
func (h *Hub) gap(id int64) {
	st := h.state(id)
	st.mu.Lock()
	defer st.mu.Unlock()
	for s := range st.live {
		delete(st.live, s)
		s.live.Store(false)
		h.startCatchUp(s)
	}
}

// catchUp reads the log for s until its mark reaches the head, then
// makes it live.
func (h *Hub) catchUp(s *Subscription) {
	defer h.wg.Done()
	ctx := s.ctx.get()
	backoff := 50 * time.Millisecond
	failures := 0 // reads of the log that failed in a row
	for {
		st := s.st
		st.mu.Lock()
		if ctx.Err() != nil {
			st.mu.Unlock()
			return
		}
		if end, past := s.pastRewind(); past {
			st.mu.Unlock()
			s.finish(lostError(s.db, end))
			return
		}
		if st.tracked && !s.verify && !s.mark().Less(st.head) {
			st.live[s] = struct{}{}
			s.live.Store(true)
			st.mu.Unlock()
			return
		}
		changed := st.changed
		st.mu.Unlock()

		m := s.mark()
		cs, more, err := h.readLog(ctx, s, m)
		if s.rewoundMeanwhile() {
			continue // judged at the top, what was read may be of the log before
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, sluice.ErrCommitReplaced) {
				// The commit its mark names was lost, and maybe some
				// before it (rewind.go).
				if s.verify {
					if h.metrics != nil {
						h.metrics.ResumeFailures.WithLabelValues(dbLabel(s.db.ID)).Inc()
					}
					s.finish(replacedError(s.db, m, s.stamp))
					return
				}
				s.finish(lostError(s.db, m.After().Seq-1))
				return
			}
			if sluice.ErrorCode(err) == sluice.CodeGone {
				s.finish(h.goneError(ctx, s, m, err))
				return
			}
			h.logger.Warn("change feed catch-up read failed", "sub", s.id, "database", s.db.Path(), "err", err)
			// A commit this process cannot read will not read the next
			// time either: the stream ends, as the tailer ends the live
			// ones (Tailer.failedRead), rather than wait without a word.
			// Other failures are retried.
			if failures++; failures >= 3 && errors.Is(err, sluice.ErrUnreadableCommit) {
				s.finish(sluice.Errorf(sluice.CodeInternal, "the change log holds a commit this server cannot read (its log says why); the stream cannot go on"))
				return
			}
			if !s.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff, failures = 50*time.Millisecond, 0
		s.verify = false
		if len(cs) > 0 {
			// Access changes visible where these commits were read reach
			// the streams first (access.go).
			if err := h.guards.sync(ctx, maxAccessVersion(cs)); err != nil {
				if ctx.Err() != nil {
					return
				}
				h.logger.Warn("change feed catch-up: apply access changes", "sub", s.id, "database", s.db.Path(), "err", err)
				if !s.sleep(backoff) {
					return
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			if !m.Follows(cs[0].Seq) {
				s.finish(sluice.Errorf(sluice.CodeGone, "the history of %s after commit %d was pruned before this subscriber read it; re-read the current state", s.db.Path(), m.Seq))
				return
			}
		}
		for _, c := range cs {
			if ctx.Err() != nil {
				return // ended, maybe by an access change just applied
			}
			if out := s.prepare(m, c, nil); out != nil {
				size := pieceBytes(out)
				if !s.bytes.wait(s, size, h.bytes) {
					return
				}
				select {
				case s.ch <- out:
					s.bytes.pushed(size)
					s.queued.Add(1)
					s.notify()
				case <-ctx.Done():
					return
				}
			}
			s.took(m, c)
			m = s.mark()
		}
		if more || len(cs) > 0 {
			continue
		}
		// At the end of the log but the tailer does not follow this
		// database yet: wait for it, checking that the database exists.
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-time.After(h.recheck):
			if _, err := h.log.History(ctx, s.db.ID); sluice.ErrorCode(err) == sluice.CodeNotFound {
				s.finish(sluice.Errorf(sluice.CodeNotFound, "database %s was deleted", s.db.Path()))
				return
			}
		}
	}
}

// readLog reads the log for s's catch-up after m, once it has its turn
// (readSlots), counted for s's user; it fails with ctx's error when s
// ended while it waited. It holds nothing read while it waits.
func (h *Hub) readLog(ctx context.Context, s *Subscription, m sluice.Cursor) ([]*sluice.Commit, bool, error) {
	u := s.opts.User
	counted := u != nil && !u.Superuser
	var id int64
	if counted {
		id = u.ID
	}
	release, ok := h.reads.take(ctx, id, counted)
	if !ok {
		return nil, false, ctx.Err()
	}
	defer release()
	if h.onRead != nil {
		defer h.onRead(u)()
	}
	rctx := ctx
	if counted && h.readAs != nil {
		rctx = h.readAs(ctx, u)
	}
	return h.readLogAt(rctx, s.db, m.After(), s.stamp)
}

// readLogAt reads the log of d after position after, and sets the time
// the read began on every commit it returns (sluice.Commit.ReadLocal).
func (h *Hub) readLogAt(ctx context.Context, d *sluice.Database, after sluice.Position, of sluice.Stamp) ([]*sluice.Commit, bool, error) {
	start := h.now()
	cs, more, err := h.log.ReadLog(ctx, d, after, of, h.batch, h.piece)
	for _, c := range cs {
		c.ReadLocal = start
	}
	return cs, more, err
}

// Floors returns, per database, the lowest cursor (the last commit a
// subscription has whole, or its hold, see Options.Hold) of the local
// subscriptions: Prune must keep every commit after it.
func (h *Hub) Floors() map[int64]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int64]int64{}
	for s := range h.subs {
		c := s.cursor.Load()
		if s.opts.Hold != nil {
			if hold := s.opts.Hold(); hold >= 0 && hold < c {
				c = hold
			}
		}
		if f, ok := out[s.db.ID]; !ok || c < f {
			out[s.db.ID] = c
		}
	}
	return out
}

// Resumed returns a channel that receives when a subscription starting
// at a position in the log (a resume, a replay) registered since it last
// did: its floor may be older than any the Floors before it reported,
// which the replicas that prune the log should know of at once.
func (h *Hub) Resumed() <-chan struct{} { return h.resumed }

// SubscriptionInfo describes one open subscription.
type SubscriptionInfo struct {
	ID        uint64
	Database  string // org/name
	Transport string
	Started   time.Time
	// Cursor is the sequence of the last commit handed to the consumer's
	// queue (or skipped as not matching).
	Cursor int64
	// Live is false while the subscription reads the log itself.
	Live bool
	// CatchUps counts the times its queue overflowed.
	CatchUps int64
	// Commits counts the commits handed to its consumer.
	Commits int64
}

// Subscriptions lists the open subscriptions.
func (h *Hub) Subscriptions() []SubscriptionInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]SubscriptionInfo, 0, len(h.subs))
	for s := range h.subs {
		out = append(out, SubscriptionInfo{
			ID: s.id, Database: s.db.Path(), Transport: s.opts.Transport, Started: s.started,
			Cursor: s.cursor.Load(), Live: s.live.Load(), CatchUps: s.catchUps.Load(), Commits: s.queued.Load(),
		})
	}
	return out
}

// Close ends every subscription with ErrShutdown, refuses new ones, and
// waits for the hub's goroutines.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	subs := make([]*Subscription, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	for _, s := range subs {
		s.finish(ErrShutdown)
	}
	h.wg.Wait()
}

func (h *Hub) remove(s *Subscription) {
	st := s.st
	if st != nil {
		st.mu.Lock()
		delete(st.live, s)
		st.mu.Unlock()
	}
	h.mu.Lock()
	_, ok := h.subs[s]
	if ok {
		delete(h.subs, s)
		if h.perDB[s.db.ID]--; h.perDB[s.db.ID] == 0 {
			delete(h.perDB, s.db.ID)
		}
	}
	h.mu.Unlock()
	if ok && h.metrics != nil && !s.opts.Shared {
		h.metrics.Subscribers.WithLabelValues(s.opts.Transport, dbLabel(s.db.ID)).Dec()
	}
}

// maxAccessVersion returns the highest access version of cs (commits read
// in one statement share one).
func maxAccessVersion(cs []*sluice.Commit) int64 {
	var v int64
	for _, c := range cs {
		v = max(v, c.AccessVersion)
	}
	return v
}

func commitClasses(c *sluice.Commit) map[string]bool {
	m := make(map[string]bool, 4)
	for i := range c.Changes {
		m[c.Changes[i].Class] = true
	}
	return m
}

func dbLabel(id int64) string { return strconv.FormatInt(id, 10) }

// queuedBytes is what a subscription's writer (the tailer while it is
// live, its catch-up while not) knows of the bytes queued on it: the
// sizes of the pieces queued, live or from the log, oldest first, of
// which the consumer has taken all but the newest len(queue). The
// consumer takes from the channel without telling anyone, so the writer
// works out what is left from the channel's length when it needs to.
// The sizes are a ring, so that a subscriber that keeps up costs the
// tailer no allocation per piece; it grows to the most pieces queued at
// once (QueueSize at most).
type queuedBytes struct {
	ring  []int64
	head  int // index of the oldest size in ring
	n     int // sizes in ring
	total int64
}

// pushed records a piece of size bytes queued.
func (q *queuedBytes) pushed(size int64) {
	if q.n == len(q.ring) {
		grown := make([]int64, max(8, 2*len(q.ring)))
		for i := range q.n {
			grown[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = size
	q.n++
	q.total += size
}

// fits forgets the pieces the consumer took, queued being how many are
// left in the queue, and reports whether a piece of size bytes fits
// beside them (limit bytes in all), or the queue holds none.
func (q *queuedBytes) fits(queued int, size, limit int64) bool {
	for ; q.n > queued; q.n-- {
		q.total -= q.ring[q.head]
		q.head = (q.head + 1) % len(q.ring)
	}
	return q.n == 0 || q.total+size <= limit
}

// wait waits until a piece of size bytes fits in s's queue (fits). It
// polls, from 1 ms up to 64 ms apart: only a consumer slower than the
// log waits, and the wait ends at most 64 ms after the consumer took
// enough. It reports false when s ended.
func (q *queuedBytes) wait(s *Subscription, size, limit int64) bool {
	pause := time.Millisecond
	for {
		if q.fits(len(s.ch), size, limit) {
			return true
		}
		if !s.sleep(pause) {
			return false
		}
		pause = min(2*pause, 64*time.Millisecond)
	}
}

// pieceBytes is about what piece c holds in memory: its changes' images
// and ids, and a little for each change.
func pieceBytes(c *sluice.Commit) int64 {
	n := int64(0)
	for i := range c.Changes {
		ch := &c.Changes[i]
		n += int64(len(ch.Before)+len(ch.After)+len(ch.DocID)) + 64
	}
	return n
}

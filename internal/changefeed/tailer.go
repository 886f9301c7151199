package changefeed

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// Store is what the tailer reads: the log, every database's head, and the
// notifications of commits made by other processes.
type Store interface {
	Log
	// Heads returns every database's head and the access log's version,
	// from one snapshot.
	Heads(ctx context.Context) ([]sluice.Head, int64, error)
	// Listen opens a connection that receives the notifications.
	Listen(ctx context.Context) (Listener, error)
	// ResetConnections makes the reads after it run on new connections.
	ResetConnections()
}

// Listener receives commit notifications: a wake-up only (the tailer reads
// the log by position, and polls). Its owner is one goroutine.
type Listener interface {
	// Wait returns the id of the database a notification names (0 for
	// any, or an access change), or an error when the connection failed
	// or ctx ended: the Listener is then unusable.
	Wait(ctx context.Context) (int64, error)
	Close(ctx context.Context) error
}

// TailerOptions configure a Tailer. Zero values take the defaults.
type TailerOptions struct {
	Logger *slog.Logger
	// Metrics, when set, counts what the tailer hands on; the series of
	// a database it finds deleted are deleted from it (ForgetDatabase).
	Metrics *metrics.Stream
	// Poll is the interval of the periodic read of every database's head
	// and of the access log's version, which covers lost notifications
	// (default 500ms: an access change ends the streams it affects within
	// it even when its notification is lost).
	Poll time.Duration
	// BatchSize is how many commits one read fetches (default 256), and
	// PieceBytes about how many bytes of change images (default 64 KiB):
	// a larger commit is read and handed on in pieces.
	BatchSize  int
	PieceBytes int64
	// Now is the clock used to measure lag (default time.Now).
	Now func() time.Time
	// OnDrop, when set, is called with the id of each database the tailer
	// finds deleted (on any replica), after its subscriptions ended, so
	// other per-database state can be released.
	OnDrop func(id int64)
}

// Tailer follows the commit log of every database and hands each new
// commit to the hub, once and in order. There is one per process.
type Tailer struct {
	store   Store
	hub     *Hub
	logger  *slog.Logger
	metrics *metrics.Stream
	poll    time.Duration
	batch   int
	piece   int64
	now     func() time.Time
	onDrop  func(id int64)
	running atomic.Bool
	// synced is closed once the first read of the log is done, whether
	// it succeeded or not (see Synced).
	synced     chan struct{}
	syncedOnce sync.Once

	mu      sync.Mutex
	pending map[int64]struct{} // databases woken since the last sync
	full    bool               // re-read every database's head
	// recheck, set when the listener (re)connects, makes the next full
	// read also read on every database whose stamp it knows: a commit
	// that took the number of the one it read last (rewind.go) leaves
	// the head where it was, and its notification may be lost with the
	// connection.
	recheck bool
	wake    chan struct{}

	// Owned by Run's goroutine.
	dbs map[int64]*sluice.Database // followed databases (ID and Epoch)
	pos map[int64]sluice.Cursor    // how far the log was handed to the hub
	// stamps holds the stamp of the last commit handed on (pos.After's
	// Seq), absent when not known: each read of the log checks that the
	// log still holds it (rewind.go).
	stamps  map[int64]sluice.Stamp
	started bool // the first read of the heads is done
	// lost is set while Postgres is unreachable: the open streams were
	// ended once (their access can no longer be checked), not again.
	lost bool
	// broken holds, by database, the error its log last failed to be
	// read with and how many reads in a row failed so (see failedRead).
	broken map[int64]brokenLog
	// forgotten holds the databases dropped in the last forgetAgain, and
	// when, whose series are to be deleted once more (see forget).
	forgotten []forgotten
}

// forgotten is a database whose metric series were deleted at.
type forgotten struct {
	id int64
	at time.Time
}

// forgetAgain is how long after a database is dropped its metric series
// are deleted once more: work its streams had under way when they ended
// (a live query's read, which fails) may count in them after the first
// deletion, and would leave them for good.
const forgetAgain = 10 * time.Second

// brokenLog is a database whose log the tailer failed to read.
type brokenLog struct {
	err   string
	times int
}

// NewTailer returns a Tailer that reads store and feeds hub. Call Run.
func NewTailer(store Store, hub *Hub, o TailerOptions) *Tailer {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 256
	}
	if o.PieceBytes <= 0 {
		o.PieceBytes = 64 << 10
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Tailer{
		store: store, hub: hub, logger: o.Logger, metrics: o.Metrics, poll: o.Poll, batch: o.BatchSize, piece: o.PieceBytes, now: o.Now, onDrop: o.OnDrop,
		pending: map[int64]struct{}{}, full: true, wake: make(chan struct{}, 1), synced: make(chan struct{}),
		dbs: map[int64]*sluice.Database{}, pos: map[int64]sluice.Cursor{}, stamps: map[int64]sluice.Stamp{},
	}
}

// Wake tells the tailer that database dbID committed (in this process, or
// as a notification said). It never blocks.
func (t *Tailer) Wake(dbID int64) {
	t.mu.Lock()
	if dbID == 0 {
		t.full = true
	} else {
		t.pending[dbID] = struct{}{}
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Running reports whether the tailer's last read of the log succeeded.
func (t *Tailer) Running() bool { return t.running.Load() }

// Synced returns a channel closed once Run's first read of the log is
// done, successful or not: from then on Running says whether the tailer
// follows the log. Before it, Running is false although nothing failed.
func (t *Tailer) Synced() <-chan struct{} { return t.synced }

// Run follows the log until ctx ends, then returns after its goroutines.
// Read errors are logged and retried on the next poll.
func (t *Tailer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { t.listen(ctx) })
	defer wg.Wait()
	tick := time.NewTicker(t.poll)
	defer tick.Stop()
	for {
		err := t.sync(ctx)
		if errors.Is(err, sluice.ErrStorageUnavailable) && !t.lost && ctx.Err() == nil {
			// A connection Postgres ended while Postgres answers (an
			// operator's pg_terminate_backend, a proxy or pooler closing
			// it) fails as an unreachable server does: read once more,
			// on new connections, before ending every stream. Ended at
			// the first failure, every stream of the process ended for
			// one dead connection of the pool
			// (TestCutConnectionsKeepStreams).
			t.store.ResetConnections()
			err = t.sync(ctx)
		}
		t.setRunning(err == nil)
		t.syncedOnce.Do(func() { close(t.synced) })
		t.outage(err)
		select {
		case <-ctx.Done():
			t.setRunning(false)
			return
		case <-t.wake:
		case <-tick.C:
			t.mu.Lock()
			t.full = true
			t.mu.Unlock()
		}
	}
}

// outage ends every open stream when Postgres became unreachable: access
// changes can no longer be seen, so no stream may go on. Their clients
// reconnect and resume once it is back; until then new streams get 503.
func (t *Tailer) outage(err error) {
	switch {
	case err == nil:
		t.lost = false
	case errors.Is(err, sluice.ErrStorageUnavailable) && !t.lost:
		t.lost = true
		t.logger.Warn("change feed: postgres is unreachable; ending every open stream", "err", err)
		t.hub.guards.endAll(sluice.ErrStorageUnavailable)
	}
}

func (t *Tailer) setRunning(ok bool) {
	t.running.Store(ok)
	if t.metrics != nil {
		v := 0.0
		if ok {
			v = 1
		}
		t.metrics.TailerRunning.Set(v)
	}
}

// sync reads every woken database's new commits and hands them over.
func (t *Tailer) sync(ctx context.Context) error {
	t.mu.Lock()
	full, recheck := t.full || t.recheck, t.recheck
	ids := make([]int64, 0, len(t.pending))
	for id := range t.pending {
		ids = append(ids, id)
		if t.dbs[id] == nil {
			full = true // a database created since the last poll
		}
	}
	clear(t.pending)
	t.full = false
	t.recheck = false
	t.mu.Unlock()

	if full {
		var err error
		if ids, err = t.heads(ctx, recheck); err != nil {
			t.retry(full, ids)
			if recheck {
				t.mu.Lock()
				t.recheck = true
				t.mu.Unlock()
			}
			if ctx.Err() == nil {
				t.logger.Log(ctx, failureLevel(err), "change feed: read heads", "err", err)
			}
			return err
		}
	}
	for i, id := range ids {
		err := t.follow(ctx, id)
		if err == nil {
			delete(t.broken, id)
			continue
		}
		if ctx.Err() != nil || errors.Is(err, sluice.ErrStorageUnavailable) {
			t.retry(false, ids[i:])
			if ctx.Err() == nil {
				t.logger.Log(ctx, failureLevel(err), "change feed: read commits", "database", id, "err", err)
			}
			return err
		}
		t.failedRead(ctx, id, err)
	}
	return nil
}

// failedRead handles a read of database id's log that failed with err
// while Postgres answers: that database's alone, so the other databases
// go on, and the tailer is still running. The read is tried again at the
// next sync. A commit this process cannot read (sluice.ErrUnreadableCommit)
// will not read the next time either: from the second time in a row, each
// failure ends the database's streams, since they cannot go on, rather
// than leave them waiting without a word. Other failures (a statement
// timeout, a conflict) are retried only. It logs when the error changes.
func (t *Tailer) failedRead(ctx context.Context, id int64, err error) {
	t.retry(false, []int64{id})
	if t.broken == nil {
		t.broken = map[int64]brokenLog{}
	}
	b := t.broken[id]
	unreadable := errors.Is(err, sluice.ErrUnreadableCommit)
	if b.err != err.Error() {
		b = brokenLog{err: err.Error()}
		if unreadable {
			t.logger.Log(ctx, slog.LevelError, "change feed: the log of a database holds a commit this process cannot read; its streams end, the others go on", "database", id, "err", err)
		} else {
			t.logger.Log(ctx, slog.LevelWarn, "change feed: read commits; trying again", "database", id, "err", err)
		}
	}
	b.times++
	t.broken[id] = b
	if unreadable && b.times >= 2 { // and the streams that joined since
		t.hub.fail(id, sluice.Errorf(sluice.CodeInternal, "the change log holds a commit this server cannot read (its log says why); the stream cannot go on"))
	}
}

// failureLevel is the level a failed read of the log is logged at: an
// unreachable Postgres is reported once, when it becomes unreachable
// (outage), not at every retry.
func failureLevel(err error) slog.Level {
	if errors.Is(err, sluice.ErrStorageUnavailable) {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// retry schedules the work a failed sync left for the next one.
func (t *Tailer) retry(full bool, ids []int64) {
	t.mu.Lock()
	t.full = t.full || full
	for _, id := range ids {
		t.pending[id] = struct{}{}
	}
	t.mu.Unlock()
}

// heads reads every database's head: it starts following new databases
// at their head, drops deleted ones, and returns those with new commits,
// and, with recheck, those whose last commit read it knows the stamp of.
func (t *Tailer) heads(ctx context.Context, recheck bool) ([]int64, error) {
	hs, access, err := t.store.Heads(ctx)
	if err != nil {
		return nil, err
	}
	if err := t.hub.guards.sync(ctx, access); err != nil {
		return nil, err
	}
	seen := make(map[int64]bool, len(hs))
	var behind []int64
	for _, h := range hs {
		seen[h.DatabaseID] = true
		if t.dbs[h.DatabaseID] == nil {
			// At start, commits up to the head are in the log for any
			// subscription that needs them and the hub delivers from there
			// on. A database that appears later is new: its subscribers
			// are waiting, so its retained history is handed over.
			from := h.LastSeq
			if t.started {
				from = h.PrunedSeq
			}
			t.dbs[h.DatabaseID] = &sluice.Database{ID: h.DatabaseID, Epoch: h.Epoch}
			t.pos[h.DatabaseID] = sluice.WholeCursor(from)
			t.hub.track(h.DatabaseID, from)
			if h.LastSeq > from {
				behind = append(behind, h.DatabaseID)
			}
			continue
		}
		p := t.pos[h.DatabaseID]
		if sluice.WholeCursor(h.LastSeq).Less(p) {
			// Past the end, or inside the commit after it (a large
			// commit read in pieces): the end is not where it was.
			t.rewound(h.DatabaseID, h.LastSeq, p)
			continue
		}
		_, stamped := t.stamps[h.DatabaseID]
		if h.LastSeq > p.Seq || recheck && stamped {
			behind = append(behind, h.DatabaseID)
		}
	}
	t.started = true
	for id := range t.dbs {
		if !seen[id] {
			delete(t.dbs, id)
			delete(t.pos, id)
			delete(t.stamps, id)
			t.hub.drop(id)
			t.forget(id)
			if t.onDrop != nil {
				t.onDrop(id)
			}
		}
	}
	t.forgetLate()
	return behind, nil
}

// rewound handles database id's log found ending at commit head, before
// pos, how far the tailer read it: what it read after head was lost (a
// Postgres failover with asynchronous replication, or a restore). The
// streams that may have received it end (Hub.rewind), and the tailer
// reads on from head.
func (t *Tailer) rewound(id, head int64, pos sluice.Cursor) {
	t.logger.Error("change feed: a database's commit log ends before commits this process read; they were lost (a Postgres failover with asynchronous replication, or a restore); ending the streams that may have received them",
		"database", id, "head", head, "read", pos.Seq, "read_part", pos.Part)
	t.pos[id] = sluice.WholeCursor(head)
	delete(t.stamps, id)
	t.hub.rewind(id, head)
}

// replaced handles database id's log found holding another commit of the
// number of the last one the tailer handed on, standing at pos: it lost
// that commit, and maybe some before it, and new commits took their
// numbers (a Postgres failover with asynchronous replication, or a
// restore), before the head showed it. Read on, the log's commit of that
// number passed for the one the streams had, and they went on without
// it, or received the rest of another commit as the rest of theirs. The
// streams that received it end as when the log ends before it, the
// tailer reads on from the commit before (which may be a new one too:
// the streams behind it that received a lost commit are catching up and
// find out for themselves).
func (t *Tailer) replaced(id int64, pos sluice.Cursor) {
	seq := pos.After().Seq
	t.logger.Error("change feed: a database's commit log holds another commit of the number of one this process read; the commit was lost (a Postgres failover with asynchronous replication, or a restore) and new commits took its number; ending the streams that may have received it",
		"database", id, "commit", seq, "read_part", pos.Part)
	t.pos[id] = sluice.WholeCursor(seq - 1)
	delete(t.stamps, id)
	t.hub.rewind(id, seq-1)
}

// forget deletes the metric series of database id, dropped: they would
// stay until the process ends, and a user who may create databases could
// add series without bound. They are deleted again forgetAgain later.
func (t *Tailer) forget(id int64) {
	if t.metrics == nil {
		return
	}
	t.metrics.ForgetDatabase(id)
	t.forgotten = append(t.forgotten, forgotten{id: id, at: t.now()})
}

// forgetLate deletes once more the series of the databases dropped
// forgetAgain ago or more.
func (t *Tailer) forgetLate() {
	now := t.now()
	n := 0
	for _, f := range t.forgotten {
		if now.Sub(f.at) < forgetAgain {
			break // in the order dropped
		}
		t.metrics.ForgetDatabase(f.id)
		n++
	}
	t.forgotten = slices.Delete(t.forgotten, 0, n)
}

// follow hands database id's next commits after its position to the
// hub: what one read of the log gives (at most the batch's commits and
// about a piece's bytes of changes). When the log holds more, the
// database is woken again, and the next sync reads on, taking turns with
// the databases woken meanwhile. Read to its end at once, a log that
// grew as fast as it was read (a role writing in SQL commits as much and
// as often as it likes) held up every other database's streams.
func (t *Tailer) follow(ctx context.Context, id int64) error {
	d := t.dbs[id]
	if d == nil {
		return nil // deleted meanwhile
	}
	// With no live subscriber the commits need not be read at all (most
	// databases have none, and a bulk write's changes are large): move to
	// the newest commit. Catching-up subscribers read the log themselves.
	// With subscribers, the commits are read straight away (one query
	// fewer per commit); one that leaves meanwhile costs a wasted read.
	if !t.hub.watched(id) {
		h, err := t.store.History(ctx, id)
		if sluice.ErrorCode(err) == sluice.CodeNotFound {
			return nil // deleted meanwhile; the next full read drops it
		}
		if err != nil {
			return err
		}
		if h.LastSeq <= t.pos[id].Seq {
			return nil
		}
		if t.hub.skipIfIdle(id, h.LastSeq) {
			t.pos[id] = sluice.WholeCursor(h.LastSeq)
			delete(t.stamps, id)
			return nil
		}
	}
	for {
		pos := t.pos[id]
		readStart := t.now()
		cs, more, err := t.store.ReadLog(ctx, d, pos.After(), t.stamps[id], t.batch, t.piece)
		if errors.Is(err, sluice.ErrCommitReplaced) {
			t.replaced(id, pos)
			continue
		}
		if sluice.ErrorCode(err) == sluice.CodeGone {
			h, herr := t.store.History(ctx, id)
			if herr != nil {
				return herr
			}
			if head, lost := lostAt(pos, h); lost {
				// Read as pruning, the tailer went back to the oldest
				// retained commit and handed the history on again, and
				// the subscriptions inside the lost commit went on.
				t.rewound(id, head, pos)
				continue
			}
			// Pruned while this process lagged behind: start after the
			// pruned part; the live subscriptions re-read and each learns
			// whether it lost anything.
			t.logger.Warn("change feed: commits pruned before they were read", "database", id, "after", pos.Seq, "next", h.PrunedSeq+1)
			t.pos[id] = sluice.WholeCursor(h.PrunedSeq)
			delete(t.stamps, id)
			t.hub.gap(id)
			continue
		}
		if err != nil {
			return err
		}
		if len(cs) > 0 {
			// Access changes visible where these commits were read reach
			// the streams first (access.go).
			if err := t.hub.guards.sync(ctx, maxAccessVersion(cs)); err != nil {
				return err
			}
			if !pos.Follows(cs[0].Seq) {
				t.logger.Warn("change feed: commits pruned before they were read", "database", id, "after", pos.Seq, "next", cs[0].Seq)
				t.hub.gap(id)
			}
		}
		for _, c := range cs {
			// Before it is handed on: the streams measure the delivery
			// latency from it (Commit.MadeLocal).
			c.ReadLocal = readStart
			t.hub.publish(c)
			t.pos[id] = c.Taken()
			t.stamps[id] = c.Stamp()
			if t.metrics != nil {
				t.metrics.Published.WithLabelValues(dbLabel(id)).Add(float64(len(c.Changes)))
				// The commit's age by Postgres' clock up to the read,
				// then by this process's monotonic clock (MadeLocal):
				// now against the commit's time read minutes, or hours,
				// of skew on a process whose clock is off.
				if made := c.MadeLocal(); !made.IsZero() {
					t.metrics.TailerLag.Set(t.now().Sub(made).Seconds())
				}
			}
		}
		if more {
			t.Wake(id)
		}
		return nil
	}
}

// listen wakes the tailer on every notification, reconnecting with backoff.
// After each (re)connection it asks for a full read, so commits whose
// notification was missed while disconnected are not delayed to the poll.
func (t *Tailer) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	first := true
	// failing is set from a failure to the next connection: the first
	// failure of a run is a warning, the retries after it are not (a
	// restarting Postgres would fill the log with them).
	failing := false
	for ctx.Err() == nil {
		l, err := t.store.Listen(ctx)
		if err != nil {
			if ctx.Err() == nil {
				level := slog.LevelWarn
				if failing {
					level = slog.LevelDebug
				}
				t.logger.Log(ctx, level, "change feed: listen", "err", err, "retry_in", backoff)
			}
			failing = true
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		if !first && t.metrics != nil {
			t.metrics.ListenReconnects.Inc()
		}
		if failing {
			t.logger.Info("change feed: listening again")
		}
		first, failing = false, false
		backoff = 100 * time.Millisecond
		t.mu.Lock()
		t.recheck = true
		t.mu.Unlock()
		t.Wake(0)
		for {
			id, err := l.Wait(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.logger.Warn("change feed: listen connection lost; reconnecting", "err", err)
					failing = true
				}
				break
			}
			t.Wake(id)
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = l.Close(cctx)
		cancel()
	}
}

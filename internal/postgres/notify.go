package postgres

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// Commits (the payload is the database id) and access changes (the payload
// is AccessPayload) are announced on the commits channel, changes to
// webhooks on the webhooks channel. A notification is only a wake-up:
// listeners read the log by position, and also poll, so a lost one only
// delays.
//
// Postgres lets any role that may connect LISTEN and NOTIFY on any
// channel. The channels' names are therefore random, made by migration 21
// and kept in sluice.settings, which only Sluice's role may read: another
// role can neither learn which database commits when nor wake Sluice's
// listeners. Senders name a channel by the setting's key (channelSQL);
// listeners read the name when they connect.
const (
	commitsChannel  = "commits_channel"
	webhooksChannel = "webhooks_channel"
)

// channelSQL is an SQL expression of the name of the channel whose
// sluice.settings key is the statement's parameter p.
func channelSQL(p string) string {
	return "(SELECT value FROM sluice.settings WHERE key = " + p + ")"
}

// Notifier sends one NOTIFY per burst of commits, after they committed,
// instead of one inside every transaction: NOTIFY takes a cluster-wide lock
// at commit, which serialized concurrent writers. Commit calls Wake; Run
// sends what accumulated since its last send.
//
// Under a steady stream of commits, sends are at least notifyInterval
// apart: sending as often as a round trip allowed (a NOTIFY after nearly
// every group-commit batch, each waking every listening tailer) cost
// concurrent writers measurably. A commit after a quiet spell is still
// announced at once; under load, other replicas learn of commits up to
// notifyInterval later. The figures are in docs/benchmarks.md, "Measured
// choices in the code".
type Notifier struct {
	db *DB

	mu      sync.Mutex
	pending map[int64]struct{}
	wake    chan struct{}
}

// notifyInterval is the least time between two NOTIFYs of one process.
const notifyInterval = 5 * time.Millisecond

// NewNotifier returns a Notifier that sends through db. Call Run.
func NewNotifier(db *DB) *Notifier {
	return &Notifier{db: db, pending: map[int64]struct{}{}, wake: make(chan struct{}, 1)}
}

// Wake records that database dbID committed. It never blocks.
func (n *Notifier) Wake(dbID int64) {
	n.mu.Lock()
	n.pending[dbID] = struct{}{}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Run sends notifications until ctx ends, and then once more for the
// commits not yet announced. A failed send is logged and dropped: the
// listeners' periodic poll covers it.
func (n *Notifier) Run(ctx context.Context) {
	defer func() {
		// The last commits of a daemon that is stopping are announced
		// too, rather than left to the other replicas' poll.
		final, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		n.send(final)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		}
		n.send(ctx)
		// Commits meanwhile wait in pending for the next send.
		select {
		case <-ctx.Done():
			return
		case <-time.After(notifyInterval):
		}
	}
}

// send announces the databases pending, if any.
func (n *Notifier) send(ctx context.Context) {
	n.mu.Lock()
	ids := make([]string, 0, len(n.pending))
	for id := range n.pending {
		ids = append(ids, strconv.FormatInt(id, 10))
	}
	clear(n.pending)
	n.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	if _, err := n.db.pool.Exec(ctx, "SELECT pg_notify("+channelSQL("$1")+", x) FROM unnest($2::text[]) x", commitsChannel, ids); err != nil && ctx.Err() == nil {
		n.db.logger.Warn("send commit notification", "err", err)
	}
}

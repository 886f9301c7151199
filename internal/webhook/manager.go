package webhook

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// pollEvery is how often the manager reads every database's head and the
// access log's version, which covers lost notifications; reloadEvery how
// often it re-reads the active webhooks.
const (
	pollEvery   = time.Second
	reloadEvery = 5 * time.Second
)

// noteEvery is the least time between two reads that notifications of
// other processes cause. A notification is a hint, not news: other
// replicas send one per burst of commits, and only a role that can read
// the channels' names (Sluice's, a superuser) can send one at all; but
// many replicas, or such a role, may send them by the thousand. A commit's
// makes the manager read the heads of the databases named that have
// webhooks (one statement; none when none has) and wake the loops of
// those that moved; a webhook change's, re-read the active webhooks; each
// at most this often, what came meanwhile answered by the next. (Woken by
// each notification, every loop read its log: a flood of them cost reads
// by the thousand.)
const noteEvery = 10 * time.Millisecond

// manager runs one loop per active webhook while the deliverer holds the
// lease of generation gen. Its run goroutine owns the loops: it starts
// them, wakes them, and stops and waits for them.
type manager struct {
	d   *Deliverer
	gen int64

	loops map[int64]*loop
	// heads are the databases' newest commits and access the access log's
	// version, as last read; loops read them.
	heads  sync.Map // db id -> int64
	access atomic.Int64
	// pollFailing is set from a failed poll to the next that succeeds
	// (run's goroutine only).
	pollFailing bool
	// reloadFailing is set from a failed reload to the next that
	// succeeds: an outage is warned of once, not at every reload.
	reloadFailing bool
	// until is when the lease may have run out, as lead reckons it (on
	// the monotonic clock): a loop starts no request after it (see
	// loop.send). Nil until lead sets it.
	until atomic.Pointer[time.Time]
}

// holding reports whether the lease the manager delivers under is still
// held: a process that was frozen past its term (a pause, a stop) must
// not start a request after another replica took over.
func (m *manager) holding() bool {
	until := m.until.Load()
	return until != nil && time.Now().Before(*until)
}

func newManager(d *Deliverer, gen int64) *manager {
	m := &manager{d: d, gen: gen, loops: map[int64]*loop{}}
	m.access.Store(-1)
	return m
}

// notification is what the listener heard: a commit of a database, a
// change to a webhook, or (id 0 on the commit channel) an access change.
type notification struct {
	id      int64
	webhook bool
}

// run manages the loops until ctx ends, then stops them.
func (m *manager) run(ctx context.Context) {
	notes := make(chan notification, 64)
	var wg sync.WaitGroup
	wg.Go(func() { m.listen(ctx, notes) })
	defer func() {
		for _, l := range m.loops {
			l.stop()
			m.forget(l)
		}
		wg.Wait()
	}()
	m.reload(ctx)
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	lastReload := time.Now()
	// due fires when what notifications asked for (pollDue, reloadDue) is
	// to be done; nil when nothing is asked.
	var due <-chan time.Time
	var reloadDue bool
	var noted map[int64]bool // databases notified since the last read; 0: access
	var lastNote time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-notes:
			if n.webhook {
				reloadDue = true
			} else {
				if noted == nil {
					noted = map[int64]bool{}
				}
				noted[n.id] = true
			}
			if due == nil {
				due = time.After(noteEvery - time.Since(lastNote))
			}
		case <-due:
			due, lastNote = nil, time.Now()
			if reloadDue {
				m.reload(ctx)
				lastReload, reloadDue = time.Now(), false
			}
			if noted != nil {
				m.pollNoted(ctx, noted)
				noted = nil
			}
		case <-m.d.wake:
			for _, id := range m.d.takeWoken() {
				m.wakeDB(id)
			}
		case <-poll.C:
			m.poll(ctx)
			if time.Since(lastReload) >= reloadEvery {
				m.reload(ctx)
				lastReload = time.Now()
			}
		}
	}
}

// reload starts a loop for every active webhook without a running one of
// its version, and stops the others; a loop whose webhook's settings
// changed goes on, told to read them again before its next request.
func (m *manager) reload(ctx context.Context) {
	refs, err := m.d.store.ActiveWebhooks(ctx)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case !m.reloadFailing:
			m.d.logger.Warn("read the active webhooks", "err", err)
			m.reloadFailing = true
		default:
			m.d.logger.Debug("read the active webhooks", "err", err)
		}
		return
	}
	m.reloadFailing = false
	want := make(map[int64]postgres.WebhookRef, len(refs))
	for _, r := range refs {
		want[r.ID] = r
	}
	for id, l := range m.loops {
		if r, ok := want[id]; !ok || r.Version != l.version || l.finished() {
			l.stop()
			delete(m.loops, id)
			if !ok {
				m.forget(l)
			}
			continue
		}
		l.changed(want[id].UpdatedAt)
	}
	for id, r := range want {
		if _, ok := m.loops[id]; !ok {
			l := newLoop(m, r)
			m.loops[id] = l
			l.start(ctx)
		}
	}
}

// forget deletes the series of l's webhook, stopped: this replica reports
// those of the webhooks it delivers only, so that one deleted (with its
// database or not), paused, or delivered by another replica since a lease
// was lost leaves none behind.
func (m *manager) forget(l *loop) {
	if m.d.m != nil {
		m.d.m.ForgetWebhook(l.label, l.dbLabel)
	}
}

// wakeDB wakes the loops of database id; 0 wakes every loop (an access
// change, or a database not named).
func (m *manager) wakeDB(id int64) {
	for _, l := range m.loops {
		if id == 0 || l.dbID == id {
			l.poke()
		}
	}
}

// poll reads every head and the access version, and wakes the loops of
// databases that moved, or every loop when access changed.
func (m *manager) poll(ctx context.Context) {
	heads, access, err := m.d.store.Heads(ctx)
	m.woken(ctx, heads, access, err)
}

// pollNoted is poll for what notifications named: the heads of the
// databases among them that have webhooks, and the access version when an
// access change (0) is among them or a database is read. Nothing is read
// when none of them concerns a webhook.
func (m *manager) pollNoted(ctx context.Context, noted map[int64]bool) {
	var ids []int64
	for _, l := range m.loops {
		if noted[l.dbID] && !slices.Contains(ids, l.dbID) {
			ids = append(ids, l.dbID)
		}
	}
	if len(ids) == 0 && (!noted[0] || len(m.loops) == 0) {
		return
	}
	heads, access, err := m.d.store.HeadsOf(ctx, ids)
	m.woken(ctx, heads, access, err)
}

// woken takes the heads and access version read (or the error of reading
// them) and wakes the loops of the databases that moved, or every loop
// when access changed.
func (m *manager) woken(ctx context.Context, heads []sluice.Head, access int64, err error) {
	if err != nil {
		if ctx.Err() == nil {
			// Once per run of failures: a restarting Postgres fails
			// every poll.
			level := slog.LevelWarn
			if m.pollFailing {
				level = slog.LevelDebug
			}
			m.d.logger.Log(ctx, level, "read the heads of the logs", "err", err)
		}
		m.pollFailing = true
		return
	}
	m.pollFailing = false
	if old := m.access.Swap(access); old >= 0 && old != access {
		m.wakeDB(0)
	}
	for _, h := range heads {
		if old, ok := m.heads.Swap(h.DatabaseID, h.LastSeq); !ok || old.(int64) != h.LastSeq {
			m.wakeDB(h.DatabaseID)
		}
	}
}

// head returns the newest commit of database id as last read, -1 when
// unknown.
func (m *manager) head(id int64) int64 {
	if v, ok := m.heads.Load(id); ok {
		return v.(int64)
	}
	return -1
}

// listen passes the notifications of commits and of webhook changes to
// notes until ctx ends, reconnecting with backoff; the poll covers what
// is missed meanwhile.
func (m *manager) listen(ctx context.Context, notes chan<- notification) {
	backoff := 100 * time.Millisecond
	// failing: the first failure of a run is a warning, the retries after
	// it are not (a restarting Postgres would fill the log with them).
	failing := false
	for ctx.Err() == nil {
		l, err := m.d.store.ListenWebhooks(ctx)
		if err != nil {
			if ctx.Err() == nil {
				level := slog.LevelWarn
				if failing {
					level = slog.LevelDebug
				}
				m.d.logger.Log(ctx, level, "listen for webhook notifications", "err", err, "retry_in", backoff)
			}
			failing = true
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		if failing {
			m.d.logger.Info("listening for webhook notifications again")
		}
		failing = false
		backoff = 100 * time.Millisecond
		for {
			id, webhook, err := l.Wait(ctx)
			if err != nil {
				failing = ctx.Err() == nil
				break
			}
			select {
			case notes <- notification{id: id, webhook: webhook}:
			default:
				// The manager is busy: a full queue already wakes it, and
				// the poll covers what this drops.
			}
		}
		_ = l.Close(context.WithoutCancel(ctx))
	}
}

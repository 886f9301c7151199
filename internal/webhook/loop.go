package webhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/cloudevent"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// Reading the log: at most readCommits commits and about readBytes of
// change images at a time; a request of a commit batch holds at most
// maxBatchBytes of events (a larger commit is sent in several).
const (
	readCommits   = 256
	readBytes     = 1 << 20
	maxBatchBytes = 1 << 20
	// idleCheck is how often an idle loop reads the log even unwoken.
	idleCheck = 5 * time.Second
	// advanceEvery is how many commits without events a loop passes
	// before it records its position (it also does when idle).
	advanceEvery = 1000
	// recordOnStop bounds how long a stopping loop takes to record a
	// delivery its receiver already answered with a 2xx.
	recordOnStop = 5 * time.Second
)

// errStop ends a loop: the webhook is gone, not active, paused, resumed or
// replayed (a new version), or the lease is lost. The manager starts a new
// loop if the webhook is active.
var errStop = errors.New("webhook loop stops")

// errAgain starts the loop over at once (access changed: its creator's
// access is checked again; or its settings changed: they are read again).
var errAgain = errors.New("webhook loop starts over")

// errBudget starts the loop over once webhook_body_budget has room for its
// next request (loop.need): it waits holding nothing of the request (the
// page of the log read, its events, the body), then reads the log again
// from the recorded position.
var errBudget = errors.New("webhook loop waits for room in webhook_body_budget")

// errRetry starts the loop over after a failed attempt that is to be
// retried: deliver waits for the recorded time of the next attempt, then
// reads the log and makes the request again from the recorded position.
// What the failed attempt held (the page of the log read, its events, the
// request's body: several times the size of a large commit) is dropped
// meanwhile, which may be hours, for every webhook that retries.
var errRetry = errors.New("webhook loop retries")

// loop delivers one webhook, in order: one request at a time, the next
// only after a 2xx for the previous one. Its goroutine is owned by the
// manager (start, stop).
type loop struct {
	m              *manager
	id, dbID       int64
	version        int64
	label, dbLabel string
	// updated is the webhook's newest updated_at (in microseconds) the
	// manager read. A change of settings (a PATCH, a secret rotation)
	// moves it without a new version: the loop is not stopped, which
	// would abandon a request its receiver may already be handling (and
	// the next loop would send it again at once, alongside); it reads the
	// settings again before its next request instead (settingsChanged).
	updated atomic.Int64
	// need is the weight in the body budget the next run of deliver
	// takes before it reads the log (0: none), after the budget had no
	// room for a request (errBudget). Only the loop's goroutine uses it.
	need int64
	// held is the weight in the body budget a run of deliver kept when it
	// started over (errAgain) for a change of settings, or for an access
	// change that affects the creator's grant, reserved or taken for a
	// request: the next run uses it without waiting again. Given back,
	// the bytes went to the next waiter, and the restarted run found no
	// room and waited again behind it, so a PATCH, or a change of the
	// creator's role or password, made during each wait delayed the
	// webhook for ever. The next run checks the creator's access before
	// it uses them: when the access ended, it stops and gives them back
	// (deliver gives them back on any way out but a request or another
	// start over, run when it returns). Only the loop's goroutine uses
	// it.
	held   int64
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func newLoop(m *manager, r postgres.WebhookRef) *loop {
	l := &loop{m: m, id: r.ID, dbID: r.DatabaseID, version: r.Version,
		label: strconv.FormatInt(r.ID, 10), dbLabel: strconv.FormatInt(r.DatabaseID, 10),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	l.updated.Store(r.UpdatedAt.UnixMicro())
	return l
}

// changed tells the loop that the webhook's settings changed at updated
// (see loop.updated), and wakes it.
func (l *loop) changed(updated time.Time) {
	if us := updated.UnixMicro(); us > l.updated.Load() {
		l.updated.Store(us)
		l.poke()
	}
}

// settingsChanged reports whether the settings st runs with are older
// than the newest the manager read. (updated_at only moves forward: see
// postgres.touched.)
func (l *loop) settingsChanged(st *state) bool {
	return l.updated.Load() > st.w.UpdatedAt.UnixMicro()
}

// refused is what a loop returns when Postgres refused a record: it starts
// over when its settings changed meanwhile (a failure is not counted
// then), and stops otherwise (see errStop; if the change was of settings
// after all, the manager starts it again when it reads it).
func (l *loop) refused(st *state) error {
	if l.settingsChanged(st) {
		return errAgain
	}
	return errStop
}

func (l *loop) start(ctx context.Context) {
	ctx, l.cancel = context.WithCancel(ctx)
	go func() {
		defer close(l.done)
		l.run(ctx)
	}()
}

// stop ends the loop and waits for it.
func (l *loop) stop() {
	l.cancel()
	<-l.done
}

// finished reports whether the loop ended by itself.
func (l *loop) finished() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// poke wakes the loop if it waits for commits.
func (l *loop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *loop) run(ctx context.Context) {
	d := l.m.d
	// A run that started over for a change of settings as ctx ended kept
	// bytes for a run that never comes.
	defer func() {
		if l.held > 0 {
			d.budget.sem.Release(l.held)
			l.held = 0
		}
	}()
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		err := l.deliver(ctx)
		switch {
		case errors.Is(err, errStop) || ctx.Err() != nil:
			return
		case errors.Is(err, errAgain) || errors.Is(err, errRetry) || errors.Is(err, errBudget):
			continue
		}
		d.logger.Warn("webhook delivery interrupted; retrying", "webhook", l.id, "err", err, "retry_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// waitRetry waits for d, the time until the next attempt; it returns
// errAgain early when the webhook's settings change, and ctx's error when
// ctx ends.
func (l *loop) waitRetry(ctx context.Context, st *state, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-l.wake: // a commit, or a change of settings
			if l.settingsChanged(st) {
				return errAgain
			}
		}
	}
}

// sleep waits for d or until ctx ends, reporting whether ctx is alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// state is where one run of a loop stands.
type state struct {
	w *sluice.Webhook
	// read is where the log is read from next; pos the position reached
	// (delivered, or passed without events), recorded what Postgres
	// holds.
	read, pos, recorded sluice.Position
	// failures counts the failed attempts of the next request.
	failures int
	// access is the access log version the creator's access was checked
	// at, and grant what the events are made with then (the creator, the
	// token it made the webhook with, its role), which the access changes
	// after it are judged against.
	access int64
	user   *sluice.User
	grant  *sluice.Grant
	// secrets sign: the current one, and the previous one until oldUntil.
	current, old []byte
	oldUntil     time.Time
	// reserved is the weight in the body budget this run took before it
	// read the log (see loop.need), or kept from the previous run (see
	// loop.held), for its first request; 0 once used, given back, or kept
	// for the next run.
	reserved int64
}

// deliver runs the webhook from its recorded position until an error.
func (l *loop) deliver(ctx context.Context) error {
	d := l.m.d
	if d.m != nil {
		d.m.LoopStarts.Inc()
	}
	// What the previous run kept (loop.held) is this run's: used for its
	// first request, or given back however it ends before.
	kept := l.held
	l.held = 0
	defer func() {
		if kept > 0 {
			d.budget.sem.Release(kept)
		}
	}()
	w, sealed, err := d.store.WebhookForDelivery(ctx, l.id)
	if sluice.ErrorCode(err) == sluice.CodeNotFound {
		return errStop
	}
	if err != nil {
		return err
	}
	if w.State != sluice.WebhookActive || w.Version != l.version {
		return errStop
	}
	st := &state{w: w, read: w.Position, pos: w.Position, recorded: w.Position, failures: w.Attempt}
	// The version first: an access change after it is seen as a newer
	// version, and checked then.
	if st.access, err = d.store.AccessVersion(ctx); err != nil {
		return err
	}
	if err := l.checkAccess(ctx, st); err != nil {
		return err
	}
	if st.current, err = d.keys.Open(w.ID, sealed.Current); err != nil {
		return err
	}
	if sealed.Old != nil {
		if st.old, err = d.keys.Open(w.ID, sealed.Old); err != nil {
			return err
		}
		st.oldUntil = sealed.OldUntil
	}
	u, err := d.store.UserByID(ctx, w.CreatorID)
	if err != nil {
		return err
	}
	// The creator's role as of st.access at least (the engine remembers
	// roles for a second unless asked for a newer version).
	actx := auth.WithCredential(ctx, &sluice.Credential{User: u, AccessVersion: st.access})
	rd, err := d.eng.StreamReader(actx, u, w.Database.Org, w.Database.Name)
	if err != nil {
		return l.revokedOr(ctx, st, err)
	}
	st.user = u
	st.grant = &sluice.Grant{Credential: sluice.Credential{User: u, TokenID: w.CreatorTokenID, AccessVersion: st.access}, Database: w.Database, Role: rd.Role}
	sel, err := selector(rd.Schema, w)
	if err != nil {
		return l.halt(ctx, st, sluice.WebhookFailing, "its settings no longer fit the schema: "+sluice.ErrorMessage(err)+"; change them, then resume it")
	}
	ev := cloudevent.New(rd, sel)
	if w.Attempt > 0 {
		// A retry is due at the time the previous deliverer recorded,
		// whoever delivers now; a change of settings restarts its
		// schedule (UpdateWebhook), or brings a new secret, at once.
		if wait := w.NextAttemptAt.Sub(d.now()); wait > 0 {
			if err := l.waitRetry(ctx, st, wait); err != nil {
				return err
			}
		}
	}
	switch {
	case kept > 0:
		// Kept through a change of settings or of access (which
		// checkAccess found still there): the turn this loop already
		// waited for, not waited for again.
		st.reserved, kept = kept, 0
		defer l.unreserve(st)
	case l.need > 0:
		// The budget had no room for the next request: wait for it
		// here, holding nothing of the request.
		if d.m != nil {
			d.m.BudgetWaits.Inc()
		}
		d.logger.Debug("webhook waits for room in webhook_body_budget", "webhook", l.id, "bytes", l.need)
		if err := d.budget.sem.Acquire(ctx, l.need); err != nil {
			return err
		}
		st.reserved, l.need = l.need, 0
		defer l.unreserve(st)
	}
	idle := time.NewTimer(idleCheck)
	defer idle.Stop()
	var pending []sluice.Event // a commit batch not sent yet
	pendingBytes := 0
	for {
		if l.settingsChanged(st) {
			// Before the first request, what was reserved for it is
			// kept for the next run (see loop.held).
			l.held, st.reserved = l.held+st.reserved, 0
			return errAgain
		}
		if d.m != nil {
			d.m.LogReads.Inc()
		}
		cs, _, err := d.store.ReadLog(ctx, w.Database, st.read, readCommits, readBytes)
		if sluice.ErrorCode(err) == sluice.CodeGone {
			return l.halt(ctx, st, sluice.WebhookFailing, "history after "+st.pos.String()+" was pruned: "+sluice.ErrorMessage(err))
		}
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			l.unreserve(st) // no request to take it
			if err := l.record(ctx, st, 0); err != nil {
				return err
			}
			l.lag(st, time.Time{})
			// Idle, no commit brings the access log's version: the
			// manager's does. Only a change that affects the webhook's
			// grant starts it over (starting over costs about ten
			// statements, and any user may change access, its own
			// tokens, as often as it likes).
			if v := l.m.access.Load(); v > st.access {
				if changed, err := l.accessMoved(ctx, st, v); err != nil || changed {
					return cmp.Or(err, errAgain)
				}
			}
			idle.Reset(idleCheck)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-l.wake:
			case <-idle.C:
			}
			continue
		}
		if first := cs[0].Seq; !sluice.CursorAt(st.read).Follows(first) {
			return l.halt(ctx, st, sluice.WebhookFailing, fmt.Sprintf("commits %d to %d were pruned before it delivered them; replay it from a retained position to go on", st.read.Seq+1, first-1))
		}
		var v int64
		for _, c := range cs {
			v = max(v, c.AccessVersion)
		}
		if v > st.access {
			if changed, err := l.accessMoved(ctx, st, v); err != nil || changed {
				if changed {
					// What was reserved for the first request is
					// kept for the next run, which checks the access
					// first (see loop.held).
					l.held, st.reserved = l.held+st.reserved, 0
				}
				return cmp.Or(err, errAgain)
			}
		}
		for _, c := range cs {
			l.lag(st, c.Time)
			evs, _, err := ev.Events(actx, c)
			if err != nil {
				return l.revokedOr(ctx, st, err)
			}
			end := pieceEnd(c)
			if w.Batch == sluice.BatchEvent {
				for i, e := range evs {
					after := e.Position
					if i == len(evs)-1 {
						after = end // nothing of the piece is left
					}
					if err := l.send(ctx, st, &message{url: w.URL, id: e.ID, parts: evs[i : i+1], contentType: "application/cloudevents+json", events: 1}, after); err != nil {
						return err
					}
				}
			} else {
				for _, e := range evs {
					pending = append(pending, e)
					pendingBytes += len(e.Data) + 1
					if pendingBytes >= maxBatchBytes {
						if err := l.sendBatch(ctx, st, pending, pending[len(pending)-1].Position); err != nil {
							return err
						}
						pending, pendingBytes = nil, 0
					}
				}
				if len(pending) > 0 && !c.Partial {
					if err := l.sendBatch(ctx, st, pending, end); err != nil {
						return err
					}
					pending, pendingBytes = nil, 0
				}
			}
			if len(pending) == 0 && st.pos.Less(end) {
				st.pos = end
			}
			st.read = end
		}
		// The page's first request took the weight reserved for it; a
		// page without one gives it back.
		l.unreserve(st)
		if err := l.record(ctx, st, advanceEvery); err != nil {
			return err
		}
	}
}

// pieceEnd returns the position at the end of piece c.
func pieceEnd(c *sluice.Commit) sluice.Position { return c.Taken().Position(c.Epoch) }

// sendBatch sends events as one request (a JSON array: CloudEvents' batched
// mode), identified by its last event.
func (l *loop) sendBatch(ctx context.Context, st *state, events []sluice.Event, after sluice.Position) error {
	last := events[len(events)-1]
	return l.send(ctx, st, &message{url: st.w.URL, id: last.ID, parts: events, batch: true, contentType: "application/cloudevents-batch+json", events: len(events)}, after)
}

// reserve takes n bytes of the body budget for a request, and returns
// the weight taken, which the caller gives back. When the budget has no
// room, the loop does not wait holding the request, its events and the
// page of the log they were read in (several times n: a whole document,
// possibly, for each of many webhooks): it records its position and
// returns errBudget, and the next run of deliver waits for n before it
// reads the log again.
func (l *loop) reserve(ctx context.Context, st *state, n int64) (int64, error) {
	b := l.m.d.budget
	n = b.weigh(n)
	if st.reserved >= n {
		st.reserved -= n
		l.unreserve(st)
		return n, nil
	}
	// Reserved for a request that grew since (its creator's role
	// widened): given back, so that this loop never waits holding some.
	l.unreserve(st)
	if b.sem.TryAcquire(n) {
		return n, nil
	}
	if err := l.record(ctx, st, 0); err != nil {
		return 0, err
	}
	l.need = n
	return 0, errBudget
}

// unreserve gives back what st still holds of the body budget.
func (l *loop) unreserve(st *state) {
	if st.reserved > 0 {
		l.m.d.budget.sem.Release(st.reserved)
		st.reserved = 0
	}
}

// send delivers m, and moves the position to after once it is answered
// 2xx. A failed attempt is recorded with the time of the next one, and
// send returns errRetry (the retry is made from the log again); when the
// schedule runs out, the webhook is paused as failing, keeping its
// position, and send returns errStop.
func (l *loop) send(ctx context.Context, st *state, m *message, after sluice.Position) error {
	d := l.m.d
	// The body's bytes are taken from the budget before it is made, and
	// given back once the attempt is recorded (or kept for the next run:
	// see below).
	n, err := l.reserve(ctx, st, m.size())
	if err != nil {
		return err
	}
	defer func() {
		if n > 0 {
			d.budget.sem.Release(n)
		}
	}()
	m.build()
	// m was made with the creator's role as of st.access: when the
	// role changed since, the loop starts over, making m again with
	// the role as it is now (a field the creator may no longer read
	// is never sent, however soon after the change, and however long
	// the retries took).
	v, err := d.store.AccessVersion(ctx)
	if err != nil {
		return err
	}
	if v > st.access {
		if changed, err := l.accessMoved(ctx, st, v); err != nil || changed {
			if changed {
				// The bytes taken for m are kept for the next run,
				// which checks the access first (see loop.held).
				l.held, n = l.held+n, 0
			}
			return cmp.Or(err, errAgain)
		}
	}
	secrets := [][]byte{st.current}
	if st.old != nil && d.now().Before(st.oldUntil) {
		secrets = append(secrets, st.old)
	}
	// Settings changed since m was made: m is made again with them, with
	// the bytes taken for it kept (see loop.held).
	if l.settingsChanged(st) {
		l.held, n = l.held+n, 0
		return errAgain
	}
	// The lease is checked last, right before the request: only
	// recording a delivery is fenced in Postgres, and a leader frozen
	// past its term must not send an old request after the next one
	// sent newer ones (its loops end as soon as it runs again).
	if !l.m.holding() {
		return errStop
	}
	at := d.now()
	res := d.send.send(ctx, m, secrets)
	if ctx.Err() != nil && !res.ok() {
		return ctx.Err() // stopped: the attempt does not count
	}
	if ctx.Err() != nil {
		// Stopped after the receiver took it: record it all the same
		// (bounded in time), or the next deliverer sends it again.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), recordOnStop)
		defer cancel()
	}
	if d.m != nil {
		d.m.Duration.Observe(res.duration.Seconds())
	}
	// What a receiver answered, and errors that quote it, are
	// recorded as text Postgres can store (no NUL byte): an answer
	// that could not be recorded would be sent again outside the
	// schedule, with nothing to show why.
	res.err, res.response = cleanText([]byte(res.err)), cleanText([]byte(res.response))
	a := sluice.WebhookAttempt{At: at, MessageID: m.id, Events: m.events, Attempt: st.failures + 1, Status: res.status,
		Error: res.err, Duration: res.duration, Response: res.response}
	rec := postgres.Delivery{Webhook: l.id, Version: l.version, Generation: l.m.gen, UpdatedAt: st.w.UpdatedAt, Attempt: a}
	if res.ok() {
		rec.OK, rec.Position = true, after
		ok, err := d.store.RecordDelivery(ctx, rec)
		if err != nil {
			// Delivered but not recorded: it is delivered again from
			// the recorded position (at least once).
			return err
		}
		if !ok {
			return errStop
		}
		// The settings may have changed while the request was in flight:
		// the next request is made with the new ones (see send's start).
		st.pos, st.recorded, st.failures = after, after, 0
		if d.m != nil {
			d.m.Delivered.WithLabelValues(l.label, l.dbLabel).Inc()
			d.m.Events.WithLabelValues(l.label, l.dbLabel).Add(float64(m.events))
		}
		return nil
	}
	st.failures++
	rec.Failures = st.failures
	wait, more := d.sched.wait(st.failures)
	if more {
		rec.Next = d.now().Add(wait)
	} else {
		rec.Fail = fmt.Sprintf("the delivery of %s failed %d times, the whole retry schedule (last: %s); its position %s is kept: resume it to try again",
			m.id, st.failures, res.err, st.recorded)
	}
	ok, err := d.store.RecordDelivery(ctx, rec)
	if err != nil {
		return err
	}
	if !ok {
		return l.refused(st)
	}
	if d.m != nil {
		d.m.Failed.WithLabelValues(l.label, l.dbLabel).Inc()
	}
	if !more {
		d.logger.Warn("webhook failing: paused after its retry schedule ran out", "webhook", l.id, "position", st.recorded.String(), "err", res.err)
		return errStop
	}
	d.logger.Info("webhook attempt failed; retrying", "webhook", l.id, "message", m.id, "attempt", a.Attempt, "err", res.err, "detail", res.detail, "retry_in", wait)
	return errRetry
}

// record stores the position reached without a delivery when it is more
// than every commits past the recorded one (0: whenever it moved).
func (l *loop) record(ctx context.Context, st *state, every int64) error {
	if !st.recorded.Less(st.pos) || st.pos.Seq-st.recorded.Seq < every {
		return nil
	}
	ok, err := l.m.d.store.AdvanceWebhook(ctx, l.id, l.version, st.w.UpdatedAt, l.m.gen, st.pos)
	if err != nil {
		return err
	}
	if !ok {
		return l.refused(st)
	}
	st.recorded = st.pos
	return nil
}

// accessMoved applies the access changes after st.access, up to version
// v, to the webhook's grant, as they reach every consumer of the log
// (sluice.AccessChange.Affects: the streams' guards judge them the same
// way). It reports whether one affects the grant (the creator deleted,
// its role narrowed or taken away, its token revoked, the database or
// organization deleted): the loop then starts over, checking the
// creator's access again (pausing the webhook when it is gone) and making
// the events not yet delivered with its role as it is now. Changes pruned
// before they were read count as affecting it.
func (l *loop) accessMoved(ctx context.Context, st *state, v int64) (bool, error) {
	changes, err := l.m.d.store.AccessChanges(ctx, st.access, v)
	if err != nil {
		return false, err
	}
	from := st.access
	st.access = v
	if len(changes) == 0 || changes[0].Version != from+1 || changes[len(changes)-1].Version != v {
		return true, nil
	}
	for _, c := range changes {
		if c.Affects(st.grant) != nil {
			return true, nil
		}
	}
	return false, nil
}

// checkAccess checks that the creator still has the read access the
// webhook delivers with, and pauses it as revoked when not.
func (l *loop) checkAccess(ctx context.Context, st *state) error {
	if err := checkCreator(ctx, l.m.d.store, st.w); err != nil {
		return l.revokedOr(ctx, st, err)
	}
	return nil
}

// revokedOr pauses the webhook as revoked when err says its creator lost
// its access (or its database is gone), and returns err otherwise.
func (l *loop) revokedOr(ctx context.Context, st *state, err error) error {
	switch sluice.ErrorCode(err) {
	case sluice.CodeUnauthenticated, sluice.CodeForbidden, sluice.CodeNotFound:
		return l.halt(ctx, st, sluice.WebhookRevoked, fmt.Sprintf("paused: its creator %s lost the read access it delivers with: %s", st.w.CreatorName, sluice.ErrorMessage(err)))
	}
	return err
}

// halt pauses the webhook in state with msg (the position kept) and
// returns errStop.
func (l *loop) halt(ctx context.Context, st *state, state sluice.WebhookState, msg string) error {
	d := l.m.d
	if err := l.record(ctx, st, 0); err != nil && !errors.Is(err, errStop) {
		return err
	}
	ok, err := d.store.StopWebhook(ctx, l.id, l.version, st.w.UpdatedAt, l.m.gen, state, msg)
	if err != nil {
		return err
	}
	if !ok {
		// Changed meanwhile: the new settings may fit (and a change
		// meant to fix them must not be undone by this pause).
		return l.refused(st)
	}
	d.logger.Warn("webhook paused", "webhook", l.id, "state", state, "reason", msg)
	return errStop
}

// lag sets the lag gauges: the commits after the position, and the age of
// oldest, the commit being delivered (zero: none).
func (l *loop) lag(st *state, oldest time.Time) {
	m := l.m.d.m
	if m == nil {
		return
	}
	var behind int64 // idle: nothing after the position
	if !oldest.IsZero() {
		behind = l.m.head(l.dbID) - st.pos.Seq
		if st.pos.Index != sluice.WholeCommit {
			behind++
		}
	}
	m.LagCommits.WithLabelValues(l.label, l.dbLabel).Set(float64(max(behind, 0)))
	secs := 0.0
	if !oldest.IsZero() {
		secs = max(l.m.d.now().Sub(oldest).Seconds(), 0)
	}
	m.LagSeconds.WithLabelValues(l.label, l.dbLabel).Set(secs)
}

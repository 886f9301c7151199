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
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// Reading the log: at most readCommits commits and about readBytes of
// change images at a time; the body of a request of a commit batch is at
// most maxBatchBytes (a larger commit is sent in several), unless one
// event alone is larger.
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
	// room for a page of the log or a request (errBudget). Only the
	// loop's goroutine uses it.
	need int64
	// held is the weight in the body budget a run of deliver kept when it
	// started over (errAgain) for a change of settings, or for an access
	// change that affects the creator's grant, held for a page of the log
	// and its requests: the next run uses it without waiting again. Given back,
	// the bytes went to the next waiter, and the restarted run found no
	// room and waited again behind it, so a PATCH, or a change of the
	// creator's role or password, made during each wait delayed the
	// webhook for ever. The next run checks the creator's access before
	// it uses them: when the access ended, it stops and gives them back
	// (deliver gives them back on any way out but a request or another
	// start over, run when it returns). Only the loop's goroutine uses
	// it. heldShare is the share of the budget they were taken in (see
	// budget): the user's the webhook delivered as then.
	held      int64
	heldShare *share
	wake      chan struct{}
	cancel    context.CancelFunc
	done      chan struct{}
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
		if l.heldShare != nil {
			d.budget.shrink(l.heldShare, l.held, 0)
			d.budget.drop(l.heldShare)
			l.held, l.heldShare = 0, nil
		}
	}()
	var backoff time.Duration
	for ctx.Err() == nil {
		began := time.Now()
		err := l.deliver(ctx)
		switch {
		case errors.Is(err, errStop) || ctx.Err() != nil:
			return
		case errors.Is(err, errAgain) || errors.Is(err, errRetry) || errors.Is(err, errBudget):
			continue
		}
		backoff = nextBackoff(backoff, time.Since(began))
		d.logger.Warn("webhook delivery interrupted; retrying", "webhook", l.id, "err", err, "retry_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
	}
}

// Interrupted runs start again after a wait from minBackoff, doubled for
// each run interrupted in a row up to maxBackoff.
const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// nextBackoff returns the wait after a run interrupted after ranFor, the
// previous wait being prev (0 for none). A run that lasted longer than the
// longest wait was working, and the next wait starts again from the
// shortest: a webhook that delivered for days after Postgres restarted
// once waited 30 s at its next interruption.
func nextBackoff(prev, ranFor time.Duration) time.Duration {
	if prev == 0 || ranFor > maxBackoff {
		return minBackoff
	}
	return min(2*prev, maxBackoff)
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
	// secrets sign: the current one, and the previous one until oldUntil,
	// by this process's clock: the time Postgres said the old one had
	// left, counted from just before it was read (its old_secret_until
	// against this process's clock read the skew between them: an hour
	// ahead, a rotation's grace of an hour ended at once).
	current, old []byte
	oldUntil     time.Time
	// reserved is the weight in the body budget this run holds for the
	// page of the log it reads and the request bodies made from it: taken
	// before the page is read (see loop.hold), cut to the page read, and
	// given back at the page's end (or kept for the next run: see
	// loop.held). turn is the weight this run waited for (loop.need) or
	// kept from the previous run (loop.held) for its first page: reserved
	// is not cut below it until that page ends, so the request that did
	// not fit goes with it. share is the share of the budget of the user
	// the run delivers as, which reserved is taken in too (see budget);
	// set whenever reserved is not 0.
	reserved, turn int64
	share          *share
	// pageDone is what Options.LogRead returned for the page read and not
	// yet finished.
	pageDone func()
	// ev makes the events, with the settings as checked against schema
	// version fitted of its reader (see loop.events).
	ev     *cloudevent.Evaluator
	fitted int
}

// deliver runs the webhook from its recorded position until an error.
func (l *loop) deliver(ctx context.Context) error {
	d := l.m.d
	if d.m != nil {
		d.m.LoopStarts.Inc()
	}
	// What the previous run kept (loop.held) is this run's: used for its
	// first page, or given back however it ends before.
	st := &state{reserved: l.held, turn: l.held, share: l.heldShare}
	l.held, l.heldShare = 0, nil
	defer l.dropShare(st)
	defer l.unreserve(st)
	defer l.endPage(st)
	// The old secret's and the retry's time left are counted from here
	// (see oldUntil).
	readAt := d.now()
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
	if st.share == nil || st.share.user != w.CreatorID {
		// What was kept for this run was taken in the share of the user
		// the webhook delivered as before it was taken over: it goes
		// back there, and this run waits in its new user's share.
		l.unreserve(st)
		l.dropShare(st)
		st.turn = 0
		st.share = d.budget.share(w.CreatorID)
	}
	st.w, st.read, st.pos, st.recorded, st.failures = w, w.Position, w.Position, w.Position, w.Attempt
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
		st.oldUntil = readAt.Add(sealed.OldFor)
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
	if err := fit(st, rd); err != nil {
		return l.halt(ctx, st, sluice.WebhookFailing, noLongerFits(err))
	}
	if w.Attempt > 0 {
		// A retry is due at the time the previous deliverer recorded,
		// whoever delivers now; a change of settings restarts its
		// schedule (UpdateWebhook), or brings a new secret, at once.
		// The time left is Postgres' (next_attempt_at against its
		// clock), counted on this process's clock from the read: the
		// recorded time against this process's clock read the skew
		// between replicas (an hour behind, an hour too long a wait).
		if wait := readAt.Add(sealed.RetryIn).Sub(d.now()); wait > 0 {
			if err := l.waitRetry(ctx, st, wait); err != nil {
				return err
			}
		}
	}
	// What was kept through a change of settings or of access (which
	// checkAccess found still there) is the turn this loop already
	// waited for, not waited for again.
	if st.reserved == 0 && l.need > 0 {
		// The budget had no room for the next page or request: wait for
		// it here, holding nothing of them.
		if d.m != nil {
			d.m.BudgetWaits.Inc()
		}
		d.logger.Debug("webhook waits for room in webhook_body_budget", "webhook", l.id, "bytes", l.need)
		if err := d.budget.acquire(ctx, st.share, l.need); err != nil {
			return err
		}
		st.reserved, st.turn = l.need, l.need
	}
	l.need = 0
	idle := time.NewTimer(idleCheck)
	defer idle.Stop()
	var pending []sluice.Event // a commit batch not sent yet
	pendingBytes := 0
	for {
		if l.settingsChanged(st) {
			// What was reserved for the page is kept for the next run
			// (see loop.held).
			l.keep(st)
			return errAgain
		}
		if d.m != nil {
			d.m.LogReads.Inc()
		}
		// The page is read within what this loop holds of the budget,
		// taken before it is read: a large commit that wakes many
		// webhooks is read by as many of them at once as the budget
		// has room for, not by every one (each read it, and made its
		// events, before it asked the budget for the body). Without
		// room for readBytes, the read takes what the loop holds (none:
		// only commits without changes), and a change that does not
		// fit is waited for below.
		b := d.budget
		if want := b.weigh(readBytes); st.reserved < want && b.tryGrow(st.share, st.reserved, want) {
			st.reserved = want
		}
		cs, need, err := l.read(ctx, st)
		if sluice.ErrorCode(err) == sluice.CodeGone {
			return l.halt(ctx, st, sluice.WebhookFailing, "history after "+st.pos.String()+" was pruned: "+sluice.ErrorMessage(err))
		}
		if err != nil {
			return err
		}
		if need > 0 {
			// The next change is larger than what the loop holds: it
			// takes room for it, or waits for it holding nothing.
			if err := l.hold(ctx, st, b.weigh(need)); err != nil {
				return err
			}
			continue
		}
		if len(cs) == 0 {
			l.endPage(st)
			l.unreserve(st) // no request to take it
			if err := l.record(ctx, st, 0); err != nil {
				return err
			}
			l.lag(st, nil)
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
		l.readPage(st, cs)
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
					// What was reserved for the page is kept for the
					// next run, which checks the access first (see
					// loop.held).
					l.keep(st)
				}
				return cmp.Or(err, errAgain)
			}
		}
		for _, c := range cs {
			l.lag(st, c)
			evs, err := l.events(actx, st, c)
			var misfit *misfitError
			if errors.As(err, &misfit) {
				return l.halt(ctx, st, sluice.WebhookFailing, noLongerFits(misfit.err))
			}
			if code := sluice.ErrorCode(err); code == sluice.CodeConflict || code == sluice.CodeUnprocessable {
				// A commit made under an older schema version has an
				// event that today's schema cannot show as it was
				// (engine.Engine.LeftSince), or one whose filter tests
				// a value Sluice cannot read (filter.UnknownError):
				// paused before it, never skipped. Trying again would
				// answer the same.
				return l.halt(ctx, st, sluice.WebhookFailing, sluice.ErrorMessage(err))
			}
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
					// pendingBytes is the body's size, brackets and
					// commas counted. An event that would take it past
					// maxBatchBytes goes in the next request: sent with
					// the ones before it, a batch of two events of 600
					// KB made a body of 1.2 MB, which a receiver behind a
					// 1 MiB body limit (nginx's default) refuses. Only an
					// event larger than the bound on its own is sent
					// larger, alone.
					if len(pending) > 0 && pendingBytes+len(e.Data)+1 > maxBatchBytes {
						if err := l.sendBatch(ctx, st, pending, pending[len(pending)-1].Position); err != nil {
							return err
						}
						pending, pendingBytes = nil, 0
					}
					if len(pending) == 0 {
						pendingBytes = 1 // the closing bracket
					}
					pending = append(pending, e)
					pendingBytes += len(e.Data) + 1 // and its comma or opening bracket
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
		// The page is done: what was reserved for it and its requests
		// goes back, unless a commit batch waits for the rest of its
		// commit. Then the room is kept, and not cut, for the next
		// page: given back, a run that found no room for that page
		// would start again from the commit's start, and under a busy
		// budget a commit of many pages with few selected events would
		// never be sent. What the next run waits for is then never less
		// than this room (see hold), so each run gets further.
		l.endPage(st)
		if len(pending) > 0 {
			st.turn = st.reserved
		} else {
			l.unreserve(st)
		}
		if err := l.record(ctx, st, advanceEvery); err != nil {
			return err
		}
	}
}

// fit checks the webhook's settings against rd's schema, as a start of
// the loop does, and makes the evaluator of its events with them (see
// loop.events).
func fit(st *state, rd *engine.Reader) error {
	sel, err := selector(rd.Schema, st.w)
	if err != nil {
		return err
	}
	// The filter is matched against the documents as the creator may see
	// them: one testing a field the creator's role may not read (it was
	// narrowed since, or the field made @private) would select by the
	// field's absence, without a word. It is paused instead, as a filter
	// a schema change broke is.
	if field := hiddenTested(sel.Filter, schema.VisibilityOf(rd.Schema, rd.Role)); field != "" {
		return sluice.Errorf(sluice.CodeForbidden, "filter tests %s.%s, which its creator %s (role %s) may not read", st.w.Classes[0], field, st.w.CreatorName, rd.Role)
	}
	sel.Outcome = "this webhook is paused before it: re-read the current state, then replay it from a later position"
	st.ev, st.fitted = cloudevent.New(rd, sel), rd.Database.SchemaVersion
	return nil
}

// noLongerFits is the status message of a webhook paused because its
// settings do not fit its database's schema, or its creator's access to
// it (err says why).
func noLongerFits(err error) string {
	if sluice.ErrorCode(err) == sluice.CodeForbidden {
		return "its settings no longer fit its creator's access: " + sluice.ErrorMessage(err) + "; change them, then resume it"
	}
	return "its settings no longer fit the schema: " + sluice.ErrorMessage(err) + "; change them, then resume it"
}

// misfitError is a schema change, met by a running loop, that its
// settings do not fit.
type misfitError struct{ err error }

func (e *misfitError) Error() string { return e.err.Error() }

// events returns the events of piece c. The reader follows the schema
// versions of the commits read (and may refresh to a newer one while it
// makes the events): when it moved past the version the settings were
// checked against, they are checked again and the events made with them,
// as a loop started after the change makes them. A filter of the old
// version went on testing a field dropped since (it matched nothing, and
// the position passed the events without a word: found by review), or
// one whose type changed. Settings that no longer fit are a *misfitError:
// the webhook is paused before c, as a loop started after the change
// pauses it.
func (l *loop) events(ctx context.Context, st *state, c *sluice.Commit) ([]sluice.Event, error) {
	rd := st.ev.Reader()
	if err := rd.Follow(ctx, c.SchemaVersion); err != nil {
		return nil, err
	}
	for {
		if rd.Database.SchemaVersion != st.fitted {
			if err := fit(st, rd); err != nil {
				return nil, &misfitError{err}
			}
		}
		evs, _, err := st.ev.Events(ctx, c)
		if err != nil || rd.Database.SchemaVersion == st.fitted {
			return evs, err
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

// read reads the next page of the log, from st.read, within what the
// loop holds of the budget: need is the weight of the next change when it
// does not fit (nothing is read then). Holding the whole budget, the
// first change comes whatever its size: one larger than the whole budget
// goes alone.
func (l *loop) read(ctx context.Context, st *state) (cs []*sluice.Commit, need int64, err error) {
	d := l.m.d
	// The lag is measured from it (see loop.lag).
	start := d.now()
	if st.reserved >= d.budget.size {
		cs, _, err = d.store.ReadLog(ctx, st.w.Database, st.read, sluice.Stamp{}, readCommits, st.reserved)
	} else {
		cs, need, err = d.store.ReadLogWithin(ctx, st.w.Database, st.read, readCommits, st.reserved)
	}
	for _, c := range cs {
		c.ReadLocal = start
	}
	return cs, need, err
}

// hold makes what the loop holds of the body budget at least n (a
// weight: see budget.weigh) for the page being read or a request made
// from it. When the budget has no room, the loop does not wait holding
// the page, its events and the request (several times n: a whole
// document, possibly, for each of many webhooks): it records its
// position, gives back what it holds and returns errBudget, and the next
// run of deliver waits for n (or what it waited for this time, if more)
// before it reads the log again.
func (l *loop) hold(ctx context.Context, st *state, n int64) error {
	if st.reserved >= n {
		return nil
	}
	if l.m.d.budget.tryGrow(st.share, st.reserved, n) {
		st.reserved = n
		return nil
	}
	if err := l.record(ctx, st, 0); err != nil {
		return err
	}
	// Never less than this run waited for: what it found it needed only
	// grows, up to the whole budget, so the next run gets further.
	l.need = max(n, st.turn)
	l.unreserve(st)
	return errBudget
}

// readPage notes the page cs read, and cuts what the loop holds to it
// (not below the turn it waited for): the requests made from a small page
// hold no more than it while they are sent.
func (l *loop) readPage(st *state, cs []*sluice.Commit) {
	var n int64
	for _, c := range cs {
		for _, ch := range c.Changes {
			n += int64(len(ch.Before) + len(ch.After))
		}
	}
	if f := l.m.d.logRead; f != nil {
		st.pageDone = f(n)
	}
	if keep := max(l.m.d.budget.weigh(n), st.turn); st.reserved > keep {
		l.m.d.budget.shrink(st.share, st.reserved, keep)
		st.reserved = keep
	}
}

// endPage notes that the loop no longer holds the page it read; the turn
// it waited for is used.
func (l *loop) endPage(st *state) {
	if st.pageDone != nil {
		st.pageDone()
	}
	st.pageDone, st.turn = nil, 0
}

// keep moves what the loop holds of the budget, and the share it holds
// it in, to the next run (see loop.held). The run returns at once.
func (l *loop) keep(st *state) {
	l.held, l.heldShare = st.reserved, st.share
	st.reserved, st.share = 0, nil
}

// unreserve gives back what st still holds of the body budget.
func (l *loop) unreserve(st *state) {
	if st.reserved > 0 {
		l.m.d.budget.shrink(st.share, st.reserved, 0)
		st.reserved = 0
	}
}

// dropShare gives back the share st uses, once it holds none of it.
func (l *loop) dropShare(st *state) {
	if st.share != nil {
		l.m.d.budget.drop(st.share)
		st.share = nil
	}
}

// send delivers m, and moves the position to after once it is answered
// 2xx. A failed attempt is recorded with the time of the next one, and
// send returns errRetry (the retry is made from the log again); when the
// schedule runs out, the webhook is paused as failing, keeping its
// position, and send returns errStop.
func (l *loop) send(ctx context.Context, st *state, m *message, after sluice.Position) error {
	d := l.m.d
	// The body counts against what the loop holds for the page it is
	// made from, grown to the body's size if it is larger, before it is
	// made; given back with the page (or kept for the next run: see
	// below).
	if err := l.hold(ctx, st, d.budget.weigh(m.size())); err != nil {
		return err
	}
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
				l.keep(st)
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
		l.keep(st)
		return errAgain
	}
	// The lease is checked last, right before the request: only
	// recording a delivery is fenced in Postgres, and a leader frozen
	// past its term must not send an old request after the next one
	// sent newer ones (its loops end as soon as it runs again).
	if !l.m.holding() {
		return errStop
	}
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
	// The attempt's time is Postgres' (see postgres.Delivery).
	a := sluice.WebhookAttempt{MessageID: m.id, Events: m.events, Attempt: st.failures + 1, Status: res.status,
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
		rec.Wait = wait
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
// before they were read count as affecting it. Only the changes that may
// affect the grant are read, one at a time, up to the first that does
// (postgres.AccessChangesFor): however many access changes other users
// made while the webhook waited to retry, it holds none of them.
func (l *loop) accessMoved(ctx context.Context, st *state, v int64) (bool, error) {
	affected := false
	whole, err := l.m.d.store.AccessChangesFor(ctx, st.access, v, st.grant, func(c sluice.AccessChange) bool {
		affected = c.Affects(st.grant) != nil
		return !affected
	})
	if err != nil {
		return false, err
	}
	st.access = v
	return affected || !whole, nil
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
// oldest, the commit being delivered (nil: none). The age is measured on
// one clock at a time, as the change feed's lag is: by Postgres' clock
// from the commit to the read of the log that found it, then by this
// process's monotonic clock (sluice.Commit.MadeLocal). This process's
// clock against the commit's time read the skew between them: an hour
// ahead, an hour of lag for a webhook that was keeping up.
func (l *loop) lag(st *state, oldest *sluice.Commit) {
	m := l.m.d.m
	if m == nil {
		return
	}
	var behind int64 // idle: nothing after the position
	if oldest != nil {
		behind = l.m.head(l.dbID) - st.pos.Seq
		if st.pos.Index != sluice.WholeCommit {
			behind++
		}
	}
	m.LagCommits.WithLabelValues(l.label, l.dbLabel).Set(float64(max(behind, 0)))
	secs := 0.0
	if oldest != nil {
		if made := oldest.MadeLocal(); !made.IsZero() {
			secs = max(l.m.d.now().Sub(made).Seconds(), 0)
		}
	}
	m.LagSeconds.WithLabelValues(l.label, l.dbLabel).Set(secs)
}

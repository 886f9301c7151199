package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dev/sluice"
)

// A document a write holds costs up to about ten times its JSON in
// memory until its rows are sent to Postgres: the decoded document, its
// row values and its after image, their encoding as statement parameters
// and the messages sent (10 documents of 6 MB, 60 MB of JSON, held
// together, took the live heap 877 MB higher). So the documents that
// REST writes hold, from the moment each is read from its body until the
// rows of the chunk or the group commit holding it are sent, are charged
// by their JSON size to a budget of the process (write_bytes), of which
// one user may hold write_bytes_per_user. The super user is held to the
// process's budget only, as by the other per-user budgets: the operator's
// own writes (a restore, a migration) are not to queue behind a share
// meant to keep users from crowding each other out. A document is charged
// before it is validated. One larger than what its user may hold is
// charged that much, so it waits until its user holds nothing else.
//
// A write that cannot have a document's charge waits for it, at most
// writeBudgetWait, then fails naming the setting (429 for a user's
// share, 503 for the process's). A write never waits while it holds
// charges that only its own progress gives back (see writeDocsWith): a
// small write whose next document must wait becomes a large one, which
// writes what it holds first, and a large write's reader sends the chunk
// it is building before it waits, while its writer sends the statements
// it holds back (and gives back their charge) once the reader waits.
// Waits that other writes' Postgres row locks
// hold up end with writeBudgetWait.
//
// Writes whose documents no validator reads one at a time hold a
// WriteCharge instead: a REST PATCH (its body, before it is decoded) and
// a GraphQL mutation (all its documents and patches, which arrive decoded
// and are held together until its commit is done, before any is
// validated). A write of documents that exist is charged the stored
// documents it reads too (storedCharge), before they are read.

// writeBudgetWait bounds how long a write waits for a document's charge.
const writeBudgetWait = 10 * time.Second

// budgetUser is whom a charge of the budget is for.
type budgetUser struct {
	id int64
	// exempt is set for the super user, held to the process's budget
	// only.
	exempt bool
}

// budgetUserOf returns u as the budget knows it.
func budgetUserOf(u *sluice.User) budgetUser { return budgetUser{id: u.ID, exempt: u.Superuser} }

// writeBudget counts the bytes of JSON of the documents writes hold.
type writeBudget struct {
	total   int64 // all users together; 0: not bounded
	perUser int64 // one user; 0: not bounded
	wait    time.Duration

	mu   sync.Mutex
	held map[int64]int64 // by user, the super user's not counted
	all  int64
	peak int64 // the most all has been (for tests)
	// queue holds the writes waiting in take, in arrival order.
	queue []*budgetWaiter
}

// budgetWaiter is a write waiting for a charge.
type budgetWaiter struct {
	user    budgetUser
	n       int64
	granted chan struct{} // closed once the charge is taken for it
}

// state returns the bytes the budget holds and how many writes wait for
// it (for the metrics).
func (b *writeBudget) state() (held int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.all, len(b.queue)
}

// newWriteBudget returns a budget of total bytes, perUser of them for one
// user (0: no bound).
func newWriteBudget(total, perUser int64) *writeBudget {
	return &writeBudget{total: total, perUser: perUser, wait: writeBudgetWait, held: map[int64]int64{}}
}

// charge is what a document of n bytes is charged for user: n, or a
// user's share or the process's budget when n is larger.
func (b *writeBudget) charge(user budgetUser, n int64) int64 {
	if b.perUser > 0 && !user.exempt {
		n = min(n, b.perUser)
	}
	if b.total > 0 {
		n = min(n, b.total)
	}
	return n
}

// Waiting writes take the budget in arrival order. A charge that fits its
// user's share but not the process's budget holds the budget given back
// for itself: no later write, of any user, takes any until it has its
// charge, so that small writes cannot overtake a large one forever (each
// taking what is given back before the large one fits). One that waits
// for its user's share keeps back only its user's later writes: a user
// holding its share must not stop the others, which is what the share is
// for. A write that would not wait (tryTake) is served as one arriving
// now, after every waiting write.

// tryTake charges n bytes to user if that fits now, after the writes
// waiting, and returns the charge (0 when it did not fit, or n is 0).
func (b *writeBudget) tryTake(user budgetUser, n int64) (int64, bool) {
	n = b.charge(user, n)
	b.mu.Lock()
	defer b.mu.Unlock()
	return n, b.grant(&budgetWaiter{user: user, n: n})
}

// grant charges the waiting writes that fit, in arrival order (see
// above), closing their granted channels and taking them off the queue,
// then charges extra, a write arriving now, if it fits after them, and
// reports whether it did; b.mu is held.
func (b *writeBudget) grant(extra *budgetWaiter) bool {
	var keptBack map[int64]bool // users with an earlier write still waiting
	full := false               // an earlier write waits for the process's budget
	fits := func(w *budgetWaiter) bool {
		switch {
		case full || !w.user.exempt && keptBack[w.user.id] || b.userBound(w.user, w.n):
		case b.total > 0 && b.all+w.n > b.total:
			full = true
		default:
			if !w.user.exempt {
				b.held[w.user.id] += w.n
			}
			b.all += w.n
			b.peak = max(b.peak, b.all)
			return true
		}
		if !w.user.exempt {
			if keptBack == nil {
				keptBack = map[int64]bool{}
			}
			keptBack[w.user.id] = true
		}
		return false
	}
	kept := b.queue[:0]
	for _, w := range b.queue {
		if fits(w) {
			close(w.granted)
		} else {
			kept = append(kept, w)
		}
	}
	clear(b.queue[len(kept):])
	b.queue = kept
	return extra != nil && fits(extra)
}

// userBound reports whether user's share keeps a charge of n from
// fitting; b.mu is held.
func (b *writeBudget) userBound(user budgetUser, n int64) bool {
	return b.perUser > 0 && !user.exempt && b.held[user.id]+n > b.perUser
}

// take charges n bytes to user, waiting for them (in turn, see above) at
// most b.wait, and returns the charge to give back.
func (b *writeBudget) take(ctx context.Context, user budgetUser, n int64) (int64, error) {
	n = b.charge(user, n)
	w := &budgetWaiter{user: user, n: n, granted: make(chan struct{})}
	b.mu.Lock()
	if b.grant(w) {
		b.mu.Unlock()
		return n, nil
	}
	b.queue = append(b.queue, w)
	b.mu.Unlock()
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	var err error
	select {
	case <-w.granted:
		return n, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.granted: // given it meanwhile: the caller gives it back
		return n, nil
	default:
	}
	// Which bound keeps it waiting, for the error.
	userBound := b.userBound(user, n)
	b.queue = slices.DeleteFunc(b.queue, func(o *budgetWaiter) bool { return o == w })
	b.grant(nil) // it may have kept back others
	switch {
	case err != nil:
		return 0, err
	case userBound:
		return 0, sluice.Errorf(sluice.CodeTooMany, "this user's writes hold the documents they may hold at once (write_bytes_per_user, %d bytes of JSON) and none was written in time; retry shortly, or send fewer writes at once", b.perUser)
	}
	return 0, sluice.Errorf(sluice.CodeUnavailable, "the server's writes hold the documents they may hold at once (write_bytes, %d bytes of JSON) and none was written in time; retry shortly", b.total)
}

// give gives back a charge of user, and charges the writes waiting that
// then fit.
func (b *writeBudget) give(user budgetUser, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !user.exempt {
		if b.held[user.id] -= n; b.held[user.id] <= 0 {
			delete(b.held, user.id)
		}
	}
	b.all -= n
	b.grant(nil)
}

// errWouldWait is what validator.next returns when a document's charge
// cannot be had without waiting and the validator may not wait: the
// document is kept, and read again by the next call.
var errWouldWait = errors.New("the write budget is held")

// A write of documents that exist reads them: a patch, however small,
// merges into its stored document, validates the result and writes it
// whole, and a replace or a delete holds the stored document as its
// change's before image until the change is sent. Neither is said by the
// request's own text: a tiny PUT, PATCH or DELETE of a 5 MB document
// holds 5 MB. So such a write is charged, on top of what it holds for
// the request itself (its documents, patches or body), the stored
// documents it reads: their size as stored (postgres's imageSize, then
// as read), a run of documents at a time (one document, or several up
// to about 4 MiB, the most a write holds at once), the charge growing to
// the largest run. It is charged before the documents are read, inside
// the write's transaction, where it must not wait (a group commit's
// transaction is other writes' too): a charge that cannot be had at
// once fails the write (needCharge), which then waits for it holding
// nothing else (as WriteCharge.Grow does) and runs again. A large REST
// PUT (written as it is read, in a transaction of its own) is not
// charged its stored documents: it cannot run again, and waiting for
// their charge inside its transaction would wait for what its own reader
// holds (a document that its writer is to take). What it holds of them
// is bounded otherwise: a run at a time, at most about 4 MiB or one
// document, while its own body is charged as it is read.

// storedCharge is a write's charge of the stored documents it reads
// (postgres.StoredCharge).
type storedCharge struct {
	charge *WriteCharge
	base   int64 // what charge held for the request itself
	stored int64 // what it holds on top of base for stored documents
}

// newStoredCharge returns the charge of the stored documents that the
// write whose charge is c reads.
func newStoredCharge(c *WriteCharge) *storedCharge { return &storedCharge{charge: c, base: c.held} }

// Room returns how many bytes of stored documents the write may read
// now without waiting.
func (p *storedCharge) Room() int64 {
	r := p.charge.room()
	if r > math.MaxInt64-p.stored {
		return math.MaxInt64
	}
	return p.stored + r
}

// Hold makes the charge at least n bytes of stored documents if that
// needs no wait, else fails with a *needCharge.
func (p *storedCharge) Hold(n int64) error {
	if n <= p.stored {
		return nil
	}
	if !p.charge.tryGrow(p.base + n) {
		return &needCharge{n: p.base + n}
	}
	p.stored = n
	return nil
}

// wait reports whether err, a write's error, is a *needCharge: the
// write is to run again once the charge it asks is had, which wait
// waits for (writeBudget.take), else returns its error.
func (p *storedCharge) wait(ctx context.Context, err error) (bool, error) {
	nc, ok := errors.AsType[*needCharge](err)
	if !ok {
		return false, err
	}
	if err := p.charge.Grow(ctx, nc.n); err != nil {
		return false, err
	}
	p.stored = nc.n - p.base
	return true, nil
}

// needCharge is the error of a write whose stored documents need a
// charge of n bytes in all that it could not have without waiting.
type needCharge struct{ n int64 }

func (e *needCharge) Error() string {
	return fmt.Sprintf("the stored documents the write reads need %d bytes of the write budget", e.n)
}

// WriteCharge is what a write whose documents are not read by a
// validator (a REST merge patch, decoded whole; a GraphQL mutation's
// documents, decoded with its variables) holds of the write budget, so
// that they are bounded as a REST write's documents are: charged before
// they are decoded or validated, given back once the write is done.
// It is not safe for concurrent use.
type WriteCharge struct {
	budget *writeBudget
	user   budgetUser
	held   int64
}

// ChargeWrite returns an empty charge of user u's writes; Grow charges
// it, Release gives it back.
func (e *Engine) ChargeWrite(u *sluice.User) *WriteCharge {
	return &WriteCharge{budget: e.writeBytes, user: budgetUserOf(u)}
}

// Grow makes the charge n bytes of JSON (or its user's share, or the
// process's budget, when n is larger; nothing when it holds that much
// already). What fits at once is added to it; otherwise the charge gives
// back what it holds and waits, holding nothing, for the whole of n, in
// turn with the writes waiting, as a REST write waits for its next
// document (writeBudget.take): a write never waits for what only its own
// progress gives back. The error of a charge not had in time is a 429 or
// 503 naming the setting, as a REST write's.
func (c *WriteCharge) Grow(ctx context.Context, n int64) error {
	if c.budget == nil {
		return nil
	}
	n = c.budget.charge(c.user, n)
	if n <= c.held {
		return nil
	}
	if more, ok := c.budget.tryTake(c.user, n-c.held); ok {
		c.held += more
		return nil
	}
	c.Release()
	got, err := c.budget.take(ctx, c.user, n)
	c.held = got
	return err
}

// tryGrow makes the charge n bytes (as Grow) if that needs no wait, and
// reports whether it did; a charge that must wait is left as it is.
func (c *WriteCharge) tryGrow(n int64) bool {
	if c.budget == nil {
		return true
	}
	n = c.budget.charge(c.user, n)
	if n <= c.held {
		return true
	}
	more, ok := c.budget.tryTake(c.user, n-c.held)
	if ok {
		c.held += more
	}
	return ok
}

// room returns how many bytes more the charge could take now without
// waiting (math.MaxInt64: any number), as tryGrow would find it, or
// less: nothing while writes wait for the budget.
func (c *WriteCharge) room() int64 {
	if c.budget == nil || c.held >= c.budget.charge(c.user, math.MaxInt64) {
		return math.MaxInt64
	}
	return c.budget.room(c.user)
}

// room returns how many bytes user could be charged now without
// waiting: nothing while writes wait, else what its share and the
// process's budget have left (math.MaxInt64 when neither bounds it).
func (b *writeBudget) room(user budgetUser) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) > 0 {
		return 0
	}
	n := int64(math.MaxInt64)
	if b.total > 0 {
		n = min(n, b.total-b.all)
	}
	if b.perUser > 0 && !user.exempt {
		n = min(n, b.perUser-b.held[user.id])
	}
	return max(n, 0)
}

// Release gives the charge back; it may be called again.
func (c *WriteCharge) Release() {
	if c.budget != nil {
		c.budget.give(c.user, c.held)
	}
	c.held = 0
}

// decodedJSONSize returns the size of v, a decoded JSON value (a
// GraphQL mutation's document), as JSON text without escapes: what a
// REST write of it would be charged, near enough (escapes make the text
// longer, not what is held). A value of another type (a number decoded
// as such) counts as 24 bytes, more than any number's text.
func decodedJSONSize(v any) int64 {
	switch x := v.(type) {
	case nil:
		return 4
	case bool:
		if x {
			return 4
		}
		return 5
	case string:
		return int64(len(x)) + 2
	case json.Number:
		return int64(len(x))
	case map[string]any:
		n := int64(1) // {, and } for the last member's comma
		for k, v := range x {
			n += int64(len(k)) + 4 + decodedJSONSize(v) // "k":v,
		}
		return max(n, 2)
	case []any:
		n := int64(1)
		for _, v := range x {
			n += decodedJSONSize(v) + 1
		}
		return max(n, 2)
	}
	return 24
}

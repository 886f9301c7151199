package changefeed

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// readSlots caps the catch-ups' reads of the log running at once: in all
// (HubOptions.CatchUpReads) and for the streams of one user
// (CatchUpReadsPerUser). Every stream resumed from an old position, or
// fallen behind, reads the log on a goroutine of its own until it reaches
// the head, one read after another: without a cap, one user's hundreds of
// resumed streams ran as many reads at once as the pool had connections,
// and everyone else's requests waited behind them.
//
// A catch-up holds its slot for one read alone, never while it waits for
// its consumer, so a slow client holds none; and it waits for a slot
// before it reads, holding nothing read. Slots are handed on in the order
// they were asked for, skipping the waiters whose user holds its share, so
// no stream waits behind another's endless catch-up.
type readSlots struct {
	all     int // 0: no cap
	perUser int // 0: no cap
	waiting prometheus.Gauge

	mu     sync.Mutex
	n      int           // slots held
	byUser map[int64]int // slots held by user id (counted ones only)
	queue  []*slotWaiter // oldest first
}

// slotWaiter is a catch-up waiting for a slot.
type slotWaiter struct {
	user    int64
	counted bool
	ready   chan struct{} // closed once the slot is its
}

func newReadSlots(all, perUser int, waiting prometheus.Gauge) *readSlots {
	return &readSlots{all: all, perUser: perUser, waiting: waiting, byUser: map[int64]int{}}
}

// fits reports whether a slot may go to user now (counted: the per-user
// cap applies). The caller holds r.mu.
func (r *readSlots) fits(user int64, counted bool) bool {
	if r.all > 0 && r.n >= r.all {
		return false
	}
	return !counted || r.perUser <= 0 || r.byUser[user] < r.perUser
}

// hold gives a slot to user. The caller holds r.mu.
func (r *readSlots) hold(user int64, counted bool) {
	r.n++
	if counted {
		r.byUser[user]++
	}
}

// take waits for a slot for a read of user's stream (counted false: a
// stream of no one user, or of the super user, capped in all only), and
// returns the function that gives it back; false when ctx ended first.
func (r *readSlots) take(ctx context.Context, user int64, counted bool) (func(), bool) {
	release := func() { r.give(user, counted) }
	r.mu.Lock()
	if r.fits(user, counted) {
		r.hold(user, counted)
		r.mu.Unlock()
		return release, true
	}
	w := &slotWaiter{user: user, counted: counted, ready: make(chan struct{})}
	r.queue = append(r.queue, w)
	r.setWaiting()
	r.mu.Unlock()
	select {
	case <-w.ready:
		return release, true
	case <-ctx.Done():
	}
	r.mu.Lock()
	for i, q := range r.queue {
		if q == w {
			r.queue = append(r.queue[:i], r.queue[i+1:]...)
			r.setWaiting()
			r.mu.Unlock()
			return nil, false
		}
	}
	r.mu.Unlock()
	// Handed the slot as ctx ended: give it on.
	release()
	return nil, false
}

// give gives back a slot of user's, and hands the slots free to the
// oldest waiters that fit.
func (r *readSlots) give(user int64, counted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n--
	if counted {
		if r.byUser[user]--; r.byUser[user] <= 0 {
			delete(r.byUser, user)
		}
	}
	kept := r.queue[:0]
	for i, w := range r.queue {
		if r.all > 0 && r.n >= r.all {
			kept = append(kept, r.queue[i:]...) // no slot left for anyone
			break
		}
		if r.fits(w.user, w.counted) {
			r.hold(w.user, w.counted)
			close(w.ready)
			continue
		}
		kept = append(kept, w)
	}
	clear(r.queue[len(kept):])
	r.queue = kept
	r.setWaiting()
}

// setWaiting updates the gauge of waiting catch-ups. The caller holds
// r.mu.
func (r *readSlots) setWaiting() {
	if r.waiting != nil {
		r.waiting.Set(float64(len(r.queue)))
	}
}

// waiters returns how many catch-ups wait for a slot.
func (r *readSlots) waiters() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

package webhook

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
)

// budget is webhook_body_budget: the bytes of the pages of the log that
// every webhook of the process reads, and of the request bodies made from
// them, held at once. The caps on webhooks are per database and per user
// (the super user has none), and one request's body may be a whole
// document (64 MiB through the API, 16 MiB written in SQL): without it,
// 1,000 webhooks sending such a document held 16 GB at once.
//
// A loop takes room for a page before it reads it (readBytes, or the
// size of the next change when it is larger), cuts it to the page read,
// grows it to a body larger than the page before it makes that body, and
// gives it back when it is done with the page (loop.hold). So a large
// commit that wakes many webhooks is read by as many as the budget has
// room for, not by every one at once. A loop waits for room holding no
// bytes of the budget and nothing of the page or the request (see
// errBudget), so loops cannot hold part of the budget each while they
// wait for more. The semaphore serves waiters in turn, and takes no
// request ahead of one waiting, so a large request is not passed over for
// ever by small ones.
//
// The webhooks that deliver as one user (its creator, see
// sluice.Webhook.CreatorID) hold at most perUser of it together
// (webhook_body_budget_per_user): without it, one user's webhooks to
// slow receivers, with large documents, took the whole budget, and every
// other user's webhooks waited behind them. Room is taken in the user's
// share first, then in the budget, and given back to both: a loop waits
// for the budget holding its user's share only, which only the same
// user's loops wait for.
type budget struct {
	sem     *semaphore.Weighted
	size    int64
	perUser int64

	mu    sync.Mutex
	users map[int64]*share // by user id, while a loop uses it
}

// share is one user's part of the budget, used by the loops that deliver
// as that user (refs of them).
type share struct {
	user int64
	sem  *semaphore.Weighted
	refs int
}

// newBudget returns a budget of size bytes, perUser of them at most for
// one user (0, or more than size: size).
func newBudget(size, perUser int64) *budget {
	if perUser <= 0 || perUser > size {
		perUser = size
	}
	return &budget{sem: semaphore.NewWeighted(size), size: size, perUser: perUser, users: map[int64]*share{}}
}

// weigh returns what a body of n bytes takes: a body larger than the whole
// budget takes all of it, so it goes once it is alone.
func (b *budget) weigh(n int64) int64 { return max(min(n, b.size), 1) }

// ofUser returns what weight n (see weigh) takes of a user's share: a
// weight larger than the share takes all of it, so it goes once the
// user's other loops hold none.
func (b *budget) ofUser(n int64) int64 { return min(n, b.perUser) }

// share returns user's share, which the caller gives back with drop.
func (b *budget) share(user int64) *share {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.users[user]
	if s == nil {
		s = &share{user: user, sem: semaphore.NewWeighted(b.perUser)}
		b.users[user] = s
	}
	s.refs++
	return s
}

// drop gives back s, taken with share, once its taker holds none of it.
func (b *budget) drop(s *share) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.refs--; s.refs == 0 {
		delete(b.users, s.user)
	}
}

// tryGrow grows what a loop of s holds from weight have to want, without
// waiting, and reports whether the user's share and the budget had room.
func (b *budget) tryGrow(s *share, have, want int64) bool {
	if want <= have {
		return true
	}
	// Nothing more of the share (its whole, held already) is not asked
	// for: a semaphore with waiters refuses even 0.
	u := b.ofUser(want) - b.ofUser(have)
	if u > 0 && !s.sem.TryAcquire(u) {
		return false
	}
	if !b.sem.TryAcquire(want - have) {
		s.sem.Release(u)
		return false
	}
	return true
}

// acquire waits for weight n in s and in the budget, for a loop that
// holds none of either.
func (b *budget) acquire(ctx context.Context, s *share, n int64) error {
	if err := s.sem.Acquire(ctx, b.ofUser(n)); err != nil {
		return err
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		s.sem.Release(b.ofUser(n))
		return err
	}
	return nil
}

// shrink gives back what a loop of s holds from weight have down to want.
func (b *budget) shrink(s *share, have, want int64) {
	if want >= have {
		return
	}
	s.sem.Release(b.ofUser(have) - b.ofUser(want))
	b.sem.Release(have - want)
}

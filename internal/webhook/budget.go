package webhook

import "golang.org/x/sync/semaphore"

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
type budget struct {
	sem  *semaphore.Weighted
	size int64
}

// weigh returns what a body of n bytes takes: a body larger than the whole
// budget takes all of it, so it goes once it is alone.
func (b budget) weigh(n int64) int64 { return max(min(n, b.size), 1) }

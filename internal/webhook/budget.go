package webhook

import "golang.org/x/sync/semaphore"

// budget is webhook_body_budget: the bytes of request bodies that every
// webhook of the process holds at once, being made or sent. The caps on
// webhooks are per database and per user (the super user has none), and
// one request's body may be a whole document (64 MiB through the API, 16
// MiB written in SQL): without it, 1,000 webhooks sending such a document
// held 16 GB at once.
//
// A loop takes a request's bytes before it makes the body and gives them
// back after the attempt is recorded (loop.reserve). It waits for room
// holding no bytes of the budget and nothing of the request (see
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

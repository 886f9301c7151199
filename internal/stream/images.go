package stream

import (
	"context"
	"slices"
	"sync"

	"github.com/sluice-dev/sluice"
)

// DefaultImageBytes is Options.ImageBytes when it is zero.
const DefaultImageBytes = 32 << 20

// smallImageBytes: a piece of fewer image bytes is evaluated at once,
// without the budget. An evaluation that holds the budget may read
// Postgres (a subscription's references and backlinks) for as long as
// graphql_request_timeout, so a user whose large pieces are evaluated
// slowly held up the commits of every stream of the replica, those of a
// few documents included; what small pieces hold is bounded by the
// streams' caps instead (max_streams).
const smallImageBytes = 64 << 10

// imageBudget bounds the change images that evaluations hold at once.
// Every share evaluates a piece on its own: a GraphQL subscription decodes
// each document it filters or shows (two to four times its JSON), a REST
// change stream copies it into its event, and each live query cohort
// decodes it to judge it (Note), so distinct subscriptions of a class each
// held a commit's documents at once, however many there were.
// An evaluation takes its piece's image bytes from the budget before it
// starts and gives them back when it returns, waiting its turn (in order)
// while the others hold them; a piece larger than the budget takes it
// all, alone, and a small one (smallImageBytes) none.
//
// The pieces of one user's commits (sluice.Commit.User) hold at most
// half of the budget while another user's wait: evaluations may read
// Postgres for as long as graphql_request_timeout, and in a queue of
// their turns alone, one user's large commits evaluated slowly held up
// every other user's large commits behind them. A piece of a user at
// its half is passed over, not waited for, until the user's running
// evaluations return; one of a user holding nothing goes in turn
// whatever its size, so every piece is evaluated.
type imageBudget struct {
	size int64

	mu     sync.Mutex
	held   int64
	byUser map[string]int64
	// queue holds the evaluations waiting, in the order they came.
	queue []*imageWait
}

// imageWait is an evaluation waiting for the budget; ready is closed once
// it holds its bytes.
type imageWait struct {
	user  string
	n     int64
	ready chan struct{}
	held  bool
}

func newImageBudget(size int64) *imageBudget {
	return &imageBudget{size: size, byUser: map[string]int64{}}
}

// imageBytes returns the bytes of c's change images.
func imageBytes(c *sluice.Commit) int64 {
	var n int64
	for i := range c.Changes {
		n += int64(len(c.Changes[i].Before) + len(c.Changes[i].After))
	}
	return n
}

// events returns ev's events of piece c once the budget has room for its
// images (take).
func (b *imageBudget) events(ctx context.Context, ev Evaluator, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	release, err := b.take(ctx, c)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	defer release()
	return ev.Events(ctx, c)
}

// take waits until the budget has room for the images of piece c and
// takes them (b nil, or a small piece: nothing, at once); release gives
// them back. ctx's end while it waits is its error.
func (b *imageBudget) take(ctx context.Context, c *sluice.Commit) (release func(), err error) {
	n := min(imageBytes(c), b.sizeOrZero())
	if n < smallImageBytes {
		return func() {}, nil
	}
	w := &imageWait{user: c.User, n: n, ready: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, w)
	b.grant()
	b.mu.Unlock()
	select {
	case <-w.ready:
	case <-ctx.Done():
		b.mu.Lock()
		if !w.held {
			b.queue = slices.DeleteFunc(b.queue, func(q *imageWait) bool { return q == w })
			b.grant() // those it held up behind it
			b.mu.Unlock()
			return nil, ctx.Err()
		}
		b.mu.Unlock()
		// Given its bytes meanwhile: it holds them, as if it had
		// not waited.
	}
	return func() { b.give(w) }, nil
}

// grant gives their bytes to the evaluations waiting that may have them
// now, in order: one of a user that would hold more than half of the
// budget while another user's wait is passed over, and the first other
// that does not fit stops those behind it. The caller holds b.mu.
func (b *imageBudget) grant() {
	for i := 0; i < len(b.queue); {
		w := b.queue[i]
		if b.atHalf(w) {
			i++
			continue
		}
		if b.held+w.n > b.size {
			return
		}
		b.queue = slices.Delete(b.queue, i, i+1)
		b.held += w.n
		b.byUser[w.user] += w.n
		w.held = true
		close(w.ready)
	}
}

// atHalf reports whether w's user, holding some of the budget already,
// would hold more than half of it with w while another user's evaluation
// waits. The caller holds b.mu.
func (b *imageBudget) atHalf(w *imageWait) bool {
	h := b.byUser[w.user]
	if h == 0 || 2*(h+w.n) <= b.size {
		return false
	}
	for _, q := range b.queue {
		if q.user != w.user {
			return true
		}
	}
	return false
}

// give gives back what w holds.
func (b *imageBudget) give(w *imageWait) {
	b.mu.Lock()
	b.held -= w.n
	if b.byUser[w.user] -= w.n; b.byUser[w.user] <= 0 {
		delete(b.byUser, w.user)
	}
	b.grant()
	b.mu.Unlock()
}

// sizeOrZero is the budget's size, 0 for no budget (b nil).
func (b *imageBudget) sizeOrZero() int64 {
	if b == nil {
		return 0
	}
	return b.size
}

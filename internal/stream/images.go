package stream

import (
	"context"

	"golang.org/x/sync/semaphore"

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
type imageBudget struct {
	size int64
	sem  *semaphore.Weighted
}

func newImageBudget(size int64) *imageBudget {
	return &imageBudget{size: size, sem: semaphore.NewWeighted(size)}
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
	return b.takeBytes(ctx, imageBytes(c))
}

// takeBytes is take for a piece of n bytes of change images.
func (b *imageBudget) takeBytes(ctx context.Context, n int64) (release func(), err error) {
	n = min(n, b.sizeOrZero())
	if n < smallImageBytes {
		return func() {}, nil
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return func() { b.sem.Release(n) }, nil
}

// sizeOrZero is the budget's size, 0 for no budget (b nil).
func (b *imageBudget) sizeOrZero() int64 {
	if b == nil {
		return 0
	}
	return b.size
}

package engine

import (
	"context"

	"github.com/sluice-dev/sluice"
)

// ServingRequest marks a small request in progress, as the engine's
// reads and small writes do (loadGC), until the function it returns is
// called.
func ServingRequest() (done func()) { return processLoadGC.serving() }

// RequestsOverlapped reports whether a small request started while
// another was in progress since it was last called, and clears that.
func RequestsOverlapped() bool { return processLoadGC.concurrent.Swap(false) }

// LostSince is lostSince, for tests.
func (e *Engine) LostSince(ctx context.Context, d *sluice.Database, cur *sluice.Schema, role sluice.Role, seq int64) (*Past, error) {
	return e.lostSince(ctx, d, cur, role, seq)
}

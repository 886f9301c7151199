package engine

import (
	"context"
	"slices"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schemacache"
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

// WaitForWriteBytes sets how long a write waits for the write budget
// (writeBudgetWait), so that a test of its refusal need not wait 10 s.
func (e *Engine) WaitForWriteBytes(d time.Duration) { e.writeBytes.wait = d }

// WriteBytes returns what writes hold of the write budget now, and the
// most they held at once.
func (e *Engine) WriteBytes() (held, peak int64) {
	e.writeBytes.mu.Lock()
	defer e.writeBytes.mu.Unlock()
	return e.writeBytes.all, e.writeBytes.peak
}

// KeepDigests makes the cache of version digests (digest.go) an empty one
// bounded to maxBytes (it keeps one digest at least), so that a test can
// tell whether a read walked versions: a walk leaves digests in it.
func (e *Engine) KeepDigests(maxBytes int) {
	e.digests = newSizedCache[schemacache.Key](digestEntries, maxBytes, e.digests.size)
}

// DigestsKept returns the number of digests the cache holds.
func (e *Engine) DigestsKept() int { return e.digests.lru.Len() }

// WalkBytes returns about the bytes the cached walks of schema versions
// hold (past.go).
func (e *Engine) WalkBytes() int {
	e.walks.mu.Lock()
	defer e.walks.mu.Unlock()
	return e.walks.bytes
}

// WalkOf walks the schema versions of d as a read as of commit seq, or a
// diff from it to commit toSeq, does for a reader with role
// (scanVersions), and returns the version in force at toSeq, counted
// from the one at seq, and the fields ("Class.field", sorted) the walk
// found protected from role since.
func (e *Engine) WalkOf(ctx context.Context, d *sluice.Database, cur *sluice.Schema, role sluice.Role, seq, toSeq int64) (at int, hidden []string, err error) {
	sc, err := e.scanVersions(ctx, d, cur, role, seq, toSeq)
	if err != nil {
		return 0, nil, err
	}
	for k := range sc.hidden {
		hidden = append(hidden, k.class+"."+k.field)
	}
	slices.Sort(hidden)
	return sc.at, hidden, nil
}

// DecodedJSONSize is decodedJSONSize, for tests.
func DecodedJSONSize(v any) int64 { return decodedJSONSize(v) }

// LimitWalks sets how long a shared walk of schema versions may run
// (walkTimeout), so that a test of its limit need not wait minutes.
func (e *Engine) LimitWalks(d time.Duration) { e.walkTimeout = d }

package engine

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/eventually"
)

// gcPercent returns the collector's current target.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// waitGCPercent waits, with a deadline, for the target to become want.
func waitGCPercent(t *testing.T, want int, what string) {
	t.Helper()
	eventually.True(t, 10*time.Second, fmt.Sprintf("%s: GOGC %d", what, want), func() bool { return gcPercent() == want })
}

// wantGCPercent fails the test unless the target is want now.
func wantGCPercent(t *testing.T, want int, when string) {
	t.Helper()
	if p := gcPercent(); p != want {
		t.Fatalf("%s: GOGC %d, want %d", when, p, want)
	}
}

// Not parallel: GOGC is process-wide.
func TestBulkGCRaisesTheTargetWhileWritesRun(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	g := &bulkGC{linger: time.Hour}
	g.begin(400)
	g.begin(400)
	wantGCPercent(t, 400, "during two writes")
	g.end(400)
	g.end(400)
	wantGCPercent(t, 400, "right after the writes (it lingers)")
	// A write starting while the target lingers keeps it raised, and
	// stops the pending restore.
	g.begin(400)
	g.linger = 10 * time.Millisecond
	g.end(400)
	waitGCPercent(t, 100, "after the linger")

	debug.SetGCPercent(800) // a higher target is kept
	g.begin(400)
	wantGCPercent(t, 800, "during a write, GOGC 800 before")
	g.end(400)
	wantGCPercent(t, 800, "after a write, GOGC 800 before")

	debug.SetGCPercent(100)
	g.begin(0)
	wantGCPercent(t, 100, "a write with percent 0")
	g.end(0)
}

// Not parallel: GOGC is process-wide.
func TestLoadGCRaisesTheTargetWhileCollectionsComeFast(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	g := &loadGC{bulk: &bulkGC{linger: 10 * time.Millisecond}, percent: 400, refs: 1}
	now := time.Now()
	g.last = now
	step := func(d time.Duration, live uint64) {
		now = now.Add(d)
		g.observe(now, live)
	}
	// fast makes collections 50 ms apart for the time it takes.
	fast := func(d time.Duration, live uint64) {
		for range d / (50 * time.Millisecond) {
			step(50*time.Millisecond, live)
		}
	}
	step(time.Second, 8<<20)
	wantGCPercent(t, 100, "after a collection a second after the one before")
	fast(time.Second, 8<<20)
	wantGCPercent(t, 100, "after a burst of a second")
	step(200*time.Millisecond, 8<<20)
	fast(3*time.Second, 100<<20)
	wantGCPercent(t, 100, "after fast collections of a large live heap")
	step(200*time.Millisecond, 8<<20)
	fast(2*time.Second, 8<<20)
	wantGCPercent(t, 400, "after two seconds of fast collections of a small live heap")
	step(400*time.Millisecond, 8<<20)
	wantGCPercent(t, 400, "after a slower one: still busy")
	step(50*time.Millisecond, 40<<20)
	waitGCPercent(t, 100, "after the live heap grew past the bound")
	step(200*time.Millisecond, 8<<20)
	fast(2*time.Second, 8<<20)
	wantGCPercent(t, 400, "busy again")
	step(2*time.Second, 8<<20)
	waitGCPercent(t, 100, "after a quiet spell")
}

// Not parallel: GOGC is process-wide. Concurrent small requests (reads,
// small writes) raise the target after a few fast collections, without
// the wait other bursts need; requests one at a time, or fast
// collections without requests, do not; nor do concurrent requests with
// a large live heap.
func TestLoadGCRaisesTheTargetSoonUnderConcurrentRequests(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	g := &loadGC{bulk: &bulkGC{linger: 10 * time.Millisecond}, percent: 400, refs: 1}
	now := time.Now()
	g.last = now
	// collect makes one collection 50 ms after the one before, after
	// requests: two at once when concurrent, else one after the other.
	collect := func(concurrent bool, live uint64) {
		if concurrent {
			done := g.serving()
			g.serving()()
			done()
		} else {
			g.serving()()
			g.serving()()
		}
		now = now.Add(50 * time.Millisecond)
		g.observe(now, live)
	}
	for range loadGCRequestRuns + 2 {
		collect(false, 8<<20)
	}
	wantGCPercent(t, 100, "after fast collections with requests one at a time")
	for range loadGCRequestRuns + 2 {
		collect(true, 40<<20)
	}
	wantGCPercent(t, 100, "after concurrent requests with a large live heap")
	now = now.Add(200 * time.Millisecond) // a pause: the runs start again
	g.observe(now, 8<<20)
	for range loadGCRequestRuns - 1 {
		collect(true, 8<<20)
	}
	wantGCPercent(t, 100, "before enough collections after concurrent requests")
	collect(true, 8<<20)
	wantGCPercent(t, 400, "after fast collections following concurrent requests")
	now = now.Add(2 * time.Second)
	g.observe(now, 8<<20)
	waitGCPercent(t, 100, "after a quiet spell")
	if n := g.requests.Load(); n != 0 {
		t.Fatalf("%d requests counted in progress after all ended", n)
	}
}

// TestLoadGCObservesCollections: while it has users, every collection is
// observed; after the last stops, none is.
func TestLoadGCObservesCollections(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := RaiseGCUnderLoad(400)
	g := &processLoadGC
	before := func() time.Time { g.mu.Lock(); defer g.mu.Unlock(); return g.last }
	t0 := before()
	eventually.True(t, 10*time.Second, "a collection observed", func() bool {
		runtime.GC()
		return before().After(t0)
	})
	stop()
	stop() // once
	g.mu.Lock()
	refs := g.refs
	g.mu.Unlock()
	if refs != 0 {
		t.Fatalf("%d users after stop", refs)
	}
	eventually.True(t, 10*time.Second, "the sentinel chain ended", func() bool {
		runtime.GC()
		g.mu.Lock()
		defer g.mu.Unlock()
		return !g.armed
	})
}

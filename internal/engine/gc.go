package engine

import (
	"runtime/debug"
	"sync"
	"time"
)

// bulkGC raises the garbage collector's target (GOGC) while large writes
// run, and puts it back a second after the last one ends.
//
// A 1,000-document write allocates about 3 MB (documents, rows, images) while
// the daemon's live heap is often a few MB. At the default GOGC of 100 the heap
// goal is then about 4 MB, so the collector runs once or twice per request, on
// the cores Postgres needs for the same request; a target of 400 during the
// write made 1,000-document requests markedly faster (docs/benchmarks.md,
// "Measured choices in the code"). It is raised only while large writes run,
// not for the whole process: a higher target lets garbage grow to several times
// the live heap, which a daemon holding thousands of streams would pay for in
// memory all the time.
type bulkGC struct {
	linger time.Duration // see bulkGCLinger

	mu      sync.Mutex
	running int  // large writes in progress
	raised  bool // the target is raised
	prev    int  // the target before it was raised
	// restore puts the target back bulkGCLinger after the last large
	// write ended, unless another one started since.
	restore *time.Timer
}

// bulkGCLinger is how long the target stays raised after the last large
// write: putting it back at once would start a collection at the end of
// every request (the heap is then far above the lower goal), slowing its
// response and the next request of a bulk import.
const bulkGCLinger = time.Second

// processGC counts the large writes of the whole process: GOGC is
// process-wide, so the count must be too (tests run several Engines in one
// process).
var processGC = bulkGC{linger: bulkGCLinger}

// begin raises the target to percent (unless it is 0, or the target is
// already higher or off) for a large write that is starting.
func (g *bulkGC) begin(percent int) {
	if percent == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running++
	if g.restore != nil {
		g.restore.Stop()
		g.restore = nil
	}
	if g.raised {
		return
	}
	prev := debug.SetGCPercent(percent)
	if prev < 0 || prev >= percent {
		debug.SetGCPercent(prev) // already off or higher: keep it
		return
	}
	g.prev, g.raised = prev, true
}

// end is called with the same percent when the write ends.
func (g *bulkGC) end(percent int) {
	if percent == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running--
	if g.running > 0 || !g.raised {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(g.linger, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.restore != t { // a write started since; stopping t lost the race
			return
		}
		debug.SetGCPercent(g.prev)
		g.raised, g.restore = false, nil
	})
	g.restore = t
}

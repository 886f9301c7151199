package engine

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
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

// loadGC raises the collector's target, through bulkGC, while the
// process allocates fast against a small live heap: under a steady load
// of small requests (lookups, filters, single writes) the live heap is a
// few MB, so at GOGC=100 the collector ran many times a second and took
// about a quarter of the daemon's CPU (docs/benchmarks.md, "Measured
// choices in the code"). It judges by the collections themselves:
// collections less than loadGCFast apart for loadGCSustain, with a live
// heap under loadGCMaxLive, raise the target; one loadGCQuiet or more
// after the one before, or a live heap that grew past loadGCMaxLive, puts
// it back (after bulkGC's linger). So the garbage it lets grow is at most
// a few times loadGCMaxLive, and only while the process is busy that
// long: a burst, such as a thousand streams opening at once, does not
// raise it (its garbage would stay resident), nor does a process holding
// many streams (a large live heap).
//
// Concurrent small requests raise it sooner: loadGCRequestRuns fast
// collections in a row, each after requests that overlapped (serving),
// are enough. A small write or a read leaves nothing resident, so the
// wait guards nothing there; with it, a burst of them shorter than
// loadGCSustain ran at the default target throughout (8 concurrent
// writers spent about a sixth more CPU per write, and the first two
// seconds of a run of lookups paid the same: docs/benchmarks.md,
// "Measured choices in the code"). The reads of streams count too (a live
// query's reads, a subscription's reads of referenced documents): each
// read leaves nothing resident either. What streams hold does, and it
// is what loadGCMaxLive bounds: a live heap past it puts the target back,
// however the target was raised.
type loadGC struct {
	bulk    *bulkGC
	percent int

	mu    sync.Mutex
	refs  int       // users (daemons) that asked for it
	armed bool      // a sentinel awaits the next collection
	last  time.Time // the end of the collection before
	// busySince is when the collections began to come less than
	// loadGCFast apart (zero: the last did not).
	busySince time.Time
	raised    bool
	live      []metrics.Sample
	// requestRuns counts the fast collections in a row that each
	// followed concurrent small requests.
	requestRuns int

	// requests counts the small requests in progress; concurrent is set
	// when one starts while another runs, and read (and cleared) at the
	// next collection.
	requests   atomic.Int32
	concurrent atomic.Bool
}

const (
	loadGCFast    = 100 * time.Millisecond
	loadGCSustain = 2 * time.Second
	loadGCQuiet   = time.Second
	loadGCMaxLive = 32 << 20
	// loadGCRequestRuns is how many fast collections in a row, each
	// after concurrent small requests, raise the target.
	loadGCRequestRuns = 3
)

// processLoadGC is process-wide, as GOGC is.
var processLoadGC = loadGC{bulk: &processGC, live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}

// RaiseGCUnderLoad sets the collector's target (as GOGC) while the
// process is busy with small requests (see loadGC), until the function it
// returns is called. The daemon calls it unless GOGC is set.
func RaiseGCUnderLoad(percent int) (stop func()) {
	g := &processLoadGC
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refs++
	g.percent = percent
	if !g.armed {
		g.armed = true
		g.last = time.Now()
		arm(g)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.refs--
			if g.refs == 0 && g.raised {
				g.raised = false
				g.bulk.end(g.percent)
			}
		})
	}
}

// gcSentinel is an object whose finalizer runs after a collection found it
// unreachable (it holds a pointer, so it is not batched with other tiny
// objects, which can delay its finalizer indefinitely).
type gcSentinel struct{ g *loadGC }

// arm makes g observe the next collection.
func arm(g *loadGC) {
	runtime.SetFinalizer(&gcSentinel{g: g}, func(s *gcSentinel) { s.g.collected() })
}

// collected runs after each collection while g has users.
func (g *loadGC) collected() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refs == 0 {
		g.armed = false
		return
	}
	metrics.Read(g.live)
	var live uint64
	if g.live[0].Value.Kind() == metrics.KindUint64 {
		live = g.live[0].Value.Uint64()
	}
	g.observe(time.Now(), live)
	arm(g)
}

// serving marks a small request in progress (a write that joins group
// commit, or a read) until the function it returns is called.
func (g *loadGC) serving() (done func()) {
	if g.requests.Add(1) > 1 {
		g.concurrent.Store(true)
	}
	return func() { g.requests.Add(-1) }
}

// observe judges a collection that ended at now leaving live bytes; the
// caller holds g.mu.
func (g *loadGC) observe(now time.Time, live uint64) {
	since := now.Sub(g.last)
	overlapped := g.concurrent.Swap(false)
	if since >= loadGCFast {
		g.busySince = time.Time{}
		g.requestRuns = 0
	} else {
		if g.busySince.IsZero() {
			g.busySince = g.last
		}
		if overlapped {
			g.requestRuns++
		} else {
			g.requestRuns = 0
		}
	}
	g.last = now
	busy := !g.busySince.IsZero() && (now.Sub(g.busySince) >= loadGCSustain || g.requestRuns >= loadGCRequestRuns)
	switch {
	case !g.raised && busy && live < loadGCMaxLive:
		g.raised = true
		g.bulk.begin(g.percent)
	case g.raised && (since >= loadGCQuiet || live >= loadGCMaxLive):
		g.raised = false
		g.bulk.end(g.percent)
	}
}

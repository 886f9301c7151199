package httpstream

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Watchdog bounds the writes of one HTTP/2 response without touching the
// stream's write deadline while they go well. Over HTTP/2 a deadline that
// passes resets the stream even while nothing is being written (an idle
// stream between heartbeats), so a deadline would have to be set before
// each write and cleared after it; net/http's HTTP/2 server does each
// through the connection's serve goroutine, which cost about a third
// more CPU per flush of a stream (docs/benchmarks.md, "Write deadlines
// over HTTP/2"). Instead each write notes when it started (Begin, End),
// and one timer per response, firing once per timeout while the response
// is idle, resets the stream once a write has been in progress for the
// timeout: it sets a deadline in the past, which the server acts on at
// once.
//
// Begin and End are called by whoever writes the response (not
// concurrently, like the response itself); the timer runs on a goroutine
// of its own. Stop must be called before the handler returns: the
// response may not be touched after that.
type Watchdog struct {
	rc      *http.ResponseController
	timeout time.Duration
	// start is the time at which the write in progress began, in
	// nanoseconds since base (monotonic), plus one; 0 when no write is in
	// progress.
	start atomic.Int64
	base  time.Time

	mu      sync.Mutex // held by the timer's check, and by Stop
	timer   *time.Timer
	stopped bool
}

// NewWatchdog returns a Watchdog of the HTTP/2 response w, which resets
// the stream once a write has been in progress for timeout. Its timer
// runs until Stop.
func NewWatchdog(w http.ResponseWriter, timeout time.Duration) *Watchdog {
	d := &Watchdog{rc: http.NewResponseController(w), timeout: timeout, base: time.Now()}
	d.mu.Lock()
	d.timer = time.AfterFunc(timeout, d.check)
	d.mu.Unlock()
	return d
}

// Begin notes that a write to the response starts now. It returns what
// End needs: a write made within another (a writer wrapping another, both
// watched) is timed from the outer write's start.
func (d *Watchdog) Begin() (outer int64) {
	outer = d.start.Load()
	if outer == 0 {
		d.start.Store(int64(time.Since(d.base)) + 1)
	}
	return outer
}

// End notes that the write that Begin returned outer for has returned.
func (d *Watchdog) End(outer int64) { d.start.Store(outer) }

// Stop stops the timer, waiting for a check in progress: once it returns,
// the Watchdog no longer touches the response. It may be called more
// than once.
func (d *Watchdog) Stop() {
	d.mu.Lock()
	d.stopped = true
	d.timer.Stop()
	d.mu.Unlock()
}

// check runs when the timer fires: it resets the stream if the write in
// progress began at least timeout ago, and otherwise rearms the timer
// for when it would (a whole timeout when no write is in progress).
func (d *Watchdog) check() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	now := time.Since(d.base) // before the load: waited is never overstated
	next := d.timeout
	if s := d.start.Load(); s != 0 {
		waited := now - time.Duration(s-1)
		if waited >= d.timeout {
			// A deadline already passed: net/http's HTTP/2 server resets
			// the stream at once (its onWriteTimeout), and the write
			// blocked on the client returns an error.
			d.stopped = true
			_ = d.rc.SetWriteDeadline(time.Unix(1, 0))
			return
		}
		next = d.timeout - waited
	}
	d.timer.Reset(next)
}

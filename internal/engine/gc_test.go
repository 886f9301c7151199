package engine

import (
	"fmt"
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

package engine

import (
	"runtime/debug"
	"testing"
	"time"
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
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: GOGC %d, want %d", what, gcPercent(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Not parallel: GOGC is process-wide.
func TestBulkGCRaisesTheTargetWhileWritesRun(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	g := &bulkGC{linger: time.Hour}
	g.begin(400)
	g.begin(400)
	if p := gcPercent(); p != 400 {
		t.Fatalf("during two writes: GOGC %d, want 400", p)
	}
	g.end(400)
	g.end(400)
	if p := gcPercent(); p != 400 {
		t.Fatalf("right after the writes: GOGC %d, want 400 until the linger ends", p)
	}
	// A write starting while the target lingers keeps it raised, and
	// stops the pending restore.
	g.begin(400)
	g.linger = 10 * time.Millisecond
	g.end(400)
	waitGCPercent(t, 100, "after the linger")

	debug.SetGCPercent(800) // a higher target is kept
	g.begin(400)
	if p := gcPercent(); p != 800 {
		t.Fatalf("GOGC was 800: %d during a write", p)
	}
	g.end(400)
	if p := gcPercent(); p != 800 {
		t.Fatalf("GOGC was 800: %d after a write", p)
	}

	debug.SetGCPercent(100)
	g.begin(0)
	if p := gcPercent(); p != 100 {
		t.Fatalf("percent 0 changed GOGC to %d", p)
	}
	g.end(0)
}

package engine

import (
	"runtime/debug"
	"testing"
)

// gcPercent returns the collector's current target.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestBulkGCRaisesTheTargetWhileWritesRun(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	g := &bulkGC{}
	g.begin(400)
	g.begin(400)
	if p := gcPercent(); p != 400 {
		t.Fatalf("during two writes: GOGC %d, want 400", p)
	}
	g.end(400)
	if p := gcPercent(); p != 400 {
		t.Fatalf("during one write: GOGC %d, want 400", p)
	}
	g.end(400)
	if p := gcPercent(); p != 100 {
		t.Fatalf("after the writes: GOGC %d, want 100 again", p)
	}

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

package stream

import "testing"

// TestParkerClosedAfterWait: once Close has waited for the parked
// streams, a stream that becomes ready only then (its handler was between
// its readiness frame and Serve when the hub closed) is not parked: the
// workers stop when Close returns, and a stream parked then would never
// write its end. It is served on its goroutine instead.
func TestParkerClosedAfterWait(t *testing.T) {
	p, err := newParker(&Server{}, 1)
	if err != nil {
		t.Skipf("no parker on this platform: %v", err)
	}
	defer p.stop()
	p.wait() // no stream parked: returns at once, and closes the parker
	// A stream with no HTTP response: parking it would fail on it, so
	// the parker must refuse before it looks.
	if p.park(&Stream{}) {
		t.Fatal("a stream was parked after the parker's wait")
	}
}

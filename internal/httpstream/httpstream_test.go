package httpstream

import (
	"testing"
	"time"
)

// TestPingDue: a stream that wrote within the interval gets no ping, and
// its timer is rearmed for the rest of the quiet spell; one quiet for the
// interval gets a ping.
func TestPingDue(t *testing.T) {
	tm := time.NewTimer(time.Hour)
	defer tm.Stop()
	if PingDue(tm, time.Minute, time.Hour) {
		t.Fatal("a ping for a stream that wrote a minute ago")
	}
	if !PingDue(tm, time.Hour, time.Hour) {
		t.Fatal("no ping for a stream quiet for the whole interval")
	}
	// Rearmed for the rest of the quiet spell: fires at once when none is left.
	PingDue(tm, time.Hour-time.Millisecond, time.Hour)
	select {
	case <-tm.C:
	case <-time.After(10 * time.Second):
		t.Fatal("the timer was not rearmed for the rest of the quiet spell")
	}
}

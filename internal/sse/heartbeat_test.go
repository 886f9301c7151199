package sse

import (
	"testing"
	"time"
)

// quietFramer is a framer that reports how long it has been idle and
// counts pings; nothing else of it is used.
type quietFramer struct {
	framer
	idle  time.Duration
	pings int
}

func (f *quietFramer) Idle() time.Duration { return f.idle }
func (f *quietFramer) ping()               { f.pings++ }
func (f *quietFramer) flush() error        { return nil }

// A heartbeat pings only a stream that wrote nothing for an interval: one
// that just delivered an event is alive, and a ping per stream per
// interval would cost about what an event does.
func TestHeartbeatOnlyAfterAQuietSpell(t *testing.T) {
	f := &quietFramer{}
	s := &session{st: f, heartbeat: time.Hour, hb: time.AfterFunc(time.Hour, func() {})}
	defer s.wrapUp()
	f.idle = time.Minute // wrote a minute ago
	if !s.heartbeatDue() || f.pings != 0 {
		t.Fatalf("a stream that wrote within the interval was pinged (%d)", f.pings)
	}
	f.idle = time.Hour
	if !s.heartbeatDue() || f.pings != 1 {
		t.Fatalf("a stream quiet for the interval got %d pings, want 1", f.pings)
	}
}

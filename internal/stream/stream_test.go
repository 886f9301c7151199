package stream

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

// quietSink reports how long it has been idle and counts pings; nothing
// else of it is used.
type quietSink struct {
	idle  time.Duration
	pings int
}

func (k *quietSink) Shared() bool             { return false }
func (k *quietSink) WriteFrames([]byte) error { return nil }
func (k *quietSink) WriteEvent(sluice.Event)  {}
func (k *quietSink) Spill() error             { return nil }
func (k *quietSink) Flush() error             { return nil }
func (k *quietSink) Ping()                    { k.pings++ }
func (k *quietSink) Idle() time.Duration      { return k.idle }
func (k *quietSink) End(error)                {}

// A heartbeat pings only a stream that wrote nothing for an interval: one
// that just delivered an event is alive, and a ping per stream per
// interval would cost about what an event does.
func TestHeartbeatOnlyAfterAQuietSpell(t *testing.T) {
	k := &quietSink{}
	s := &Stream{o: Options{Heartbeat: time.Hour}, sink: k, hb: time.AfterFunc(time.Hour, func() {})}
	defer s.hb.Stop()
	k.idle = time.Minute // wrote a minute ago
	if !s.heartbeat() || k.pings != 0 {
		t.Fatalf("a stream that wrote within the interval was pinged (%d)", k.pings)
	}
	k.idle = time.Hour
	if !s.heartbeat() || k.pings != 1 {
		t.Fatalf("a stream quiet for the interval got %d pings, want 1", k.pings)
	}
}

package stream

import (
	"testing"
	"testing/synctest"
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
func (k *quietSink) Refuse(error)             {}
func (k *quietSink) Fail(error)               {}
func (k *quietSink) Ready(uint64)             {}

// A heartbeat pings only a stream that wrote nothing for an interval: one
// that just delivered an event is alive, and a ping per stream per
// interval would cost about what an event does.
func TestHeartbeatOnlyAfterAQuietSpell(t *testing.T) {
	k := &quietSink{}
	s := &Stream{spec: Spec{Heartbeat: time.Hour}, sink: k, hb: time.AfterFunc(time.Hour, func() {})}
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

// The heartbeat timer fires after a quiet interval, in fake time: a stream
// that wrote nothing gets a ping when the interval has passed, not before.
func TestHeartbeatTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &clockSink{start: time.Now()}
		s := &Stream{spec: Spec{Heartbeat: 12 * time.Second}, sink: k, beat: make(chan struct{}, 1)}
		s.hb = time.AfterFunc(s.spec.Heartbeat, s.wake) // as Open starts it
		defer s.hb.Stop()
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if s.beatDue.Load() {
			t.Fatal("a heartbeat was due before the interval passed")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if !s.beatDue.Swap(false) || !s.heartbeat() || k.pings != 1 {
			t.Fatalf("after a quiet interval: due %v, pings %d, want a ping", s.beatDue.Load(), k.pings)
		}
		// The next beat comes a whole interval after the ping.
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if s.beatDue.Load() {
			t.Fatal("the next heartbeat came before an interval")
		}
	})
}

// clockSink is idle since its last ping (or its start), in the bubble's
// time.
type clockSink struct {
	quietSink
	start time.Time
}

func (k *clockSink) Ping()               { k.pings++; k.start = time.Now() }
func (k *clockSink) Idle() time.Duration { return time.Since(k.start) }

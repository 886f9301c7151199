// Package eventually waits, in tests, for a condition that nothing
// announces (a metric, a row, a process's state) with a deadline: the one
// polling loop the tests share, instead of a copy in each. Where an event
// can be waited on (a channel, a frame of a stream), tests wait on it.
package eventually

import (
	"testing"
	"time"
)

// interval is how often the condition is checked.
const interval = 10 * time.Millisecond

// True waits until cond returns true, checking it every few milliseconds,
// and fails tb (naming what it waited for) when it is still false after
// timeout.
func True(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(interval)
	}
}

// Nil waits until f returns nil, as True does, and fails tb with f's last
// error when it does not within timeout.
func Nil(tb testing.TB, timeout time.Duration, what string, f func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
	}
}

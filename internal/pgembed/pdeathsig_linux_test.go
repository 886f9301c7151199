package pgembed

import (
	"syscall"
	"testing"
	"time"
)

// TestServerStopsWhenOwnerKilled checks that on Linux the parent-death
// signal alone stops the server when its owner is SIGKILLed, without any
// later Start cleaning up.
func TestServerStopsWhenOwnerKilled(t *testing.T) {
	t.Parallel()
	serverPID := killedOwner(t, newDataDir(t))

	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for processAlive(serverPID) {
		select {
		case <-deadline.C:
			_ = syscall.Kill(serverPID, syscall.SIGQUIT) // don't leave it running
			t.Fatalf("postgres pid %d still alive 30s after its owner was killed", serverPID)
		case <-tick.C:
		}
	}
}

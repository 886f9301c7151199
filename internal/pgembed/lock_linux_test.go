package pgembed

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestLockFollowsReplacedDataDir: a Start waiting for the lock of a data
// dir that the first start replaces with its new cluster (createCluster's
// rename) ends up locking the new directory, not the replaced one, which
// would leave two owners.
func TestLockFollowsReplacedDataDir(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	first, err := lockDataDir(t.Context(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()

	type result struct {
		f   *os.File
		err error
	}
	waiting := make(chan result, 1)
	go func() {
		f, err := lockDataDir(t.Context(), dataDir)
		waiting <- result{f, err}
	}()
	waitOpened(t, dataDir, first)
	replacement := dataDir + ".initdb"
	if err := os.Mkdir(replacement, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rename(replacement, dataDir); err != nil {
		t.Fatal(err)
	}
	first.Close()

	r := <-waiting
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.f.Close()
	held, err := r.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	current, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(held, current) {
		t.Error("the lock is held on the replaced directory, want the one now at the data dir's path")
	}
}

// waitOpened waits until this process holds dir open on a descriptor other
// than other's: the waiting lockDataDir has opened it.
func waitOpened(t *testing.T, dir string, other *os.File) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		entries, _ := os.ReadDir("/proc/self/fd")
		for _, e := range entries {
			if e.Name() == strconv.Itoa(int(other.Fd())) {
				continue
			}
			if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == dir {
				return
			}
		}
		select {
		case <-deadline.C:
			t.Fatalf("nothing opened %s", dir)
		case <-tick.C:
		}
	}
}

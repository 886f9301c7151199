package pgembed

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// namePID rewrites dataDir's postmaster.pid (left by a server that
// stopped) to name pid, as it reads after a reboot that gave its pid to
// another process.
func namePID(t *testing.T, dataDir string, stale []byte, pid int) {
	t.Helper()
	_, rest, _ := bytes.Cut(stale, []byte("\n"))
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	if err := os.WriteFile(pidFile, append([]byte(strconv.Itoa(pid)+"\n"), rest...), 0o600); err != nil {
		t.Fatal(err)
	}
	if cred, err := serverCredential(); err != nil {
		t.Fatal(err)
	} else if cred != nil {
		if err := os.Chown(pidFile, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
}

// stoppedCluster makes a cluster in a new data dir and stops it, and
// returns the data dir and the postmaster.pid its server wrote.
func stoppedCluster(t *testing.T) (Options, []byte) {
	t.Helper()
	opts := testOptions(t, newDataDir(t))
	p := start(t, opts)
	stale, err := os.ReadFile(filepath.Join(opts.DataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	stop(t, p)
	return opts, stale
}

// parentOf returns the parent of pid (0 when it cannot be read, or is
// outside this PID namespace).
func parentOf(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	rp := bytes.LastIndexByte(stat, ')')
	if rp < 0 {
		return 0
	}
	f := bytes.Fields(stat[rp+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	return ppid
}

// childOf returns a child process of pid.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err == nil && parentOf(child) == pid {
			return child
		}
	}
	t.Fatalf("postgres pid %d has no child", pid)
	return 0
}

// TestStartLeavesOtherServersAlone: a postmaster.pid naming a live
// postgres process that is not the postmaster of its data directory
// (after a reboot, its pid went to another cluster's postmaster, or to a
// backend) is not taken for a leftover server: nothing is signalled
// (the other cluster was stopped with SIGINT, then SIGQUIT and SIGKILL).
func TestStartLeavesOtherServersAlone(t *testing.T) {
	t.Parallel()
	t.Run("another cluster's postmaster", func(t *testing.T) {
		t.Parallel()
		other := start(t, testOptions(t, newDataDir(t)))
		otherPID := other.PID()
		opts, stale := stoppedCluster(t)
		namePID(t, opts.DataDir, stale, otherPID)

		p := start(t, opts)
		if got := queryString(t, p.URL("postgres"), "SELECT 1::text"); got != "1" {
			t.Errorf("SELECT 1 = %q", got)
		}
		if other.PID() != otherPID || !processAlive(otherPID) {
			t.Fatalf("the other cluster's postmaster (pid %d) was stopped", otherPID)
		}
		if got := queryString(t, other.URL("postgres"), "SELECT 1::text"); got != "1" {
			t.Errorf("the other cluster: SELECT 1 = %q", got)
		}
	})
	t.Run("a backend", func(t *testing.T) {
		t.Parallel()
		other := start(t, testOptions(t, newDataDir(t)))
		backend := childOf(t, other.PID())
		opts, stale := stoppedCluster(t)
		namePID(t, opts.DataDir, stale, backend)

		start(t, opts)
		if !processAlive(backend) {
			t.Fatalf("the other cluster's backend (pid %d) was stopped", backend)
		}
	})
	t.Run("a backend of this data directory", func(t *testing.T) {
		t.Parallel()
		// A server left running on the data directory, whose
		// postmaster.pid names one of its backends: the backend is not
		// signalled, and Postgres refuses to start beside the server
		// (an operator decides).
		opts := testOptions(t, newDataDir(t))
		leftover := start(t, opts)
		stale, err := os.ReadFile(filepath.Join(opts.DataDir, "postmaster.pid"))
		if err != nil {
			t.Fatal(err)
		}
		leftover.stopSuper()
		<-leftover.superDone
		leftover.lock.Close()
		backend := childOf(t, leftover.PID())
		namePID(t, opts.DataDir, stale, backend)

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if p, err := Start(ctx, opts); err == nil {
			stop(t, p)
			t.Error("Start succeeded beside a running server, want Postgres' refusal")
		} else if !strings.Contains(err.Error(), "still in use") && !strings.Contains(err.Error(), "already exists") {
			t.Errorf("Start beside a running server = %v, want Postgres' refusal (its shared memory still in use, or a lock file)", err)
		}
		if !processAlive(backend) || !processAlive(leftover.PID()) {
			t.Fatalf("the running server (pid %d) or its backend (pid %d) was stopped", leftover.PID(), backend)
		}
	})
}

// TestStartRemovesZombiePIDFile: a postmaster.pid naming a zombie of the
// server's user (a postmaster that exited and that nobody reaped) does not
// block the start: Postgres would take the zombie for a live server
// ("lock file already exists").
func TestStartRemovesZombiePIDFile(t *testing.T) {
	t.Parallel()
	opts, stale := stoppedCluster(t)
	cred, err := serverCredential()
	if err != nil {
		t.Fatal(err)
	}
	// A child of this test process, run as the server's user, that is
	// never waited for until the test ends.
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Credential: cred}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	})
	waitZombie(t, pid)
	namePID(t, opts.DataDir, stale, pid)

	p := start(t, opts)
	if got := queryString(t, p.URL("postgres"), "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
}

// waitZombie waits until pid has exited and is not reaped.
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !isZombie(pid) {
		select {
		case <-deadline.C:
			t.Fatalf("pid %d did not become a zombie", pid)
		case <-tick.C:
		}
	}
}

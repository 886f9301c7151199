package pgembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// readPIDFile returns the postmaster pid and status line from
// dataDir/postmaster.pid, or pid 0 when there is no such file. The status
// is "starting", "ready" or "stopping" while a server runs.
func readPIDFile(dataDir string) (pid int, status string, err error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("read postmaster.pid: %w", err)
	}
	// Line 1 is the pid, line 8 the status (LOCK_FILE_LINE_PM_STATUS in
	// Postgres's pidfile.h).
	lines := strings.Split(string(b), "\n")
	pid, err = strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil {
		// Postgres writes the file in steps; a half-written file is not an
		// error yet.
		return 0, "", nil
	}
	if len(lines) >= 8 {
		status = strings.TrimSpace(lines[7])
	}
	return pid, status, nil
}

// stopLeftover stops a server still running on dataDir. Start calls it
// while holding the data dir lock, so such a server has no live owner: its
// Sluice died without the parent-death signal reaching it (or someone
// started it by hand). Only the postmaster of dataDir is signalled, never
// whatever process now has the pid postmaster.pid names.
func stopLeftover(ctx context.Context, dataDir string, logger *slog.Logger) error {
	pid, _, err := readPIDFile(dataDir)
	if err != nil || pid == 0 {
		return err
	}
	if !processAlive(pid) {
		if isZombie(pid) {
			// A postmaster that exited and was never reaped (its parent
			// is stuck, or a PID 1 that does not reap): Postgres would
			// take the zombie, which still answers kill(pid, 0), for a
			// live server and refuse to start ("lock file already
			// exists"). It holds nothing any more.
			logger.Info("removing postmaster.pid naming a zombie process", "pid", pid, "data_dir", dataDir)
			return removePIDFile(dataDir, pid)
		}
		// Postgres removes a stale pid file itself.
		logger.Debug("stale postmaster.pid", "pid", pid, "data_dir", dataDir)
		return nil
	}
	if !isPostmasterOf(pid, dataDir) {
		// The pid was reused (after a reboot, say): by an unrelated
		// process, or by a postgres process of another cluster, its
		// postmaster or a backend, which must not be stopped. Postgres
		// would refuse to start ("lock file already exists"); its own
		// checks (the socket's lock file, the shared memory) still guard
		// against a live server of this directory, so the file can go.
		logger.Info("removing postmaster.pid naming a process that is not this data directory's postmaster", "pid", pid, "data_dir", dataDir)
		return removePIDFile(dataDir, pid)
	}
	logger.Warn("stopping leftover postgres", "pid", pid, "data_dir", dataDir)
	steps := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{
		{syscall.SIGINT, 30 * time.Second},  // fast shutdown
		{syscall.SIGQUIT, 10 * time.Second}, // immediate shutdown
		{syscall.SIGKILL, 10 * time.Second},
	}
	for _, step := range steps {
		if err := syscall.Kill(pid, step.sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pgembed: stop leftover postgres (pid %d) on %s: %w", pid, dataDir, err)
		}
		gone, err := waitGone(ctx, pid, step.wait)
		if err != nil {
			return fmt.Errorf("pgembed: stop leftover postgres (pid %d): %w", pid, err)
		}
		if gone {
			// A killed server leaves its pid file, and if nobody reaps the
			// process, Postgres would take the zombie for a live server.
			return removePIDFile(dataDir, pid)
		}
	}
	return fmt.Errorf("pgembed: leftover postgres (pid %d) on %s survived SIGKILL", pid, dataDir)
}

// waitGone polls until pid has exited, wait has passed (false) or ctx ends.
func waitGone(ctx context.Context, pid int, wait time.Duration) (bool, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for processAlive(pid) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timer.C:
			return false, nil
		case <-tick.C:
		}
	}
	return true, nil
}

// removePIDFile removes dataDir/postmaster.pid if it still names pid.
func removePIDFile(dataDir string, pid int) error {
	current, _, err := readPIDFile(dataDir)
	if err != nil || current != pid {
		return err
	}
	if err := os.Remove(filepath.Join(dataDir, "postmaster.pid")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pgembed: remove stale postmaster.pid: %w", err)
	}
	return nil
}

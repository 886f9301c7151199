package pgembed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestRestartsAServerThatDied: a postmaster killed with SIGKILL is
// restarted, after its orphaned backends are ended, on the same data and
// socket.
func TestRestartsAServerThatDied(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, newDataDir(t))
	opts.RestartDelay = 10 * time.Millisecond
	// A commit must reach the WAL before it returns to survive the
	// server's crash.
	delete(opts.Settings, "synchronous_commit")
	p := start(t, opts)
	url := p.URL("postgres")
	exec1(t, url, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before the crash')")

	// A connection left open keeps a backend that outlives its postmaster
	// until it notices or is told.
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var backend int
	if err := conn.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}

	old := p.PID()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, time.Minute, "a restart", func() bool { return p.Restarts() == 1 })
	if p.PID() == old {
		t.Fatalf("the postmaster's pid is still %d after the restart", old)
	}
	if processAlive(backend) {
		t.Errorf("backend %d of the killed postmaster is still running", backend)
	}
	if got := queryString(t, url, "SELECT v FROM kept"); got != "before the crash" {
		t.Fatalf("after the restart: %q", got)
	}
	select {
	case <-p.Failed():
		t.Fatalf("Failed is closed after one restart: %v", p.Err())
	default:
	}
}

// TestGivesUpAfterMaxRestarts: a server that cannot come back is tried
// MaxRestarts times, then Failed is closed with the reason; Stop still
// returns, and releases the data directory.
func TestGivesUpAfterMaxRestarts(t *testing.T) {
	t.Parallel()
	dataDir := newDataDir(t)
	opts := testOptions(t, dataDir)
	opts.RestartDelay = 10 * time.Millisecond
	opts.MaxRestarts = 2
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Every later start fails on this setting.
	conf, err := os.OpenFile(filepath.Join(dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.WriteString("\nshared_buffers = 'not a size'\n"); err != nil {
		t.Fatal(err)
	}
	conf.Close()
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Failed():
	case <-time.After(time.Minute):
		t.Fatal("the supervisor did not give up within a minute")
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "3 times within") || !strings.Contains(err.Error(), "shared_buffers") {
		t.Fatalf("Err() = %v; want the count and the server's complaint", err)
	}
	if p.Restarts() != 0 {
		t.Errorf("Restarts() = %d, want 0", p.Restarts())
	}
	sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
	defer scancel()
	_ = p.Stop(sctx) // the last server's failed exit is its result
	lock, err := lockDataDir(sctx, dataDir)
	if err != nil {
		t.Fatalf("the data dir is still locked after Stop: %v", err)
	}
	lock.Close()
}

// TestNoRestartsWhenMaxRestartsIsNegative: the supervisor gives up at the
// first unexpected exit.
func TestNoRestartsWhenMaxRestartsIsNegative(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, newDataDir(t))
	opts.MaxRestarts = -1
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background()) //nolint:errcheck // the killed server's exit is its result
	pid := p.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Failed():
	case <-time.After(time.Minute):
		t.Fatal("Failed was not closed within a minute")
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "1 times within") {
		t.Fatalf("Err() = %v", err)
	}
	if p.PID() != pid {
		t.Fatalf("a server was started again (pid %d, was %d)", p.PID(), pid)
	}
}

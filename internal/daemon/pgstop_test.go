package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestEmbeddedPostgresStopFollowsShutdownTimeout: the embedded Postgres
// gets what the drain left of shutdown_timeout to stop (at least a few
// seconds for its checkpoint), not a fixed 30 s. A postmaster that does
// not answer (stopped with SIGSTOP) is forced out once that runs out, so
// a daemon with shutdown_timeout 1s exits within seconds; it took 35 s
// (30 s, then 5 s for the immediate shutdown) whatever shutdown_timeout
// said.
func TestEmbeddedPostgresStopFollowsShutdownTimeout(t *testing.T) {
	t.Parallel()
	// Short path, for the Postgres socket inside it.
	dir, err := os.MkdirTemp("", "sluice-pgstop-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // for Postgres run as its own user
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminPassword = dt.AdminPassword
	cfg.DataDir = dir // no database_url: the embedded Postgres
	cfg.ShutdownTimeout = time.Second
	d := daemon.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), daemon.Options{Version: "test", BcryptCost: 4})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Started():
	case err := <-done:
		t.Fatalf("daemon failed to start: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("daemon did not start within 2m")
	}

	pidFile, err := os.ReadFile(filepath.Join(dir, "pg", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	// Stopped, the postmaster takes no shutdown signal until it is
	// killed; its backends still serve the daemon's sessions.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	cancel()
	// The floor (3 s) plus the 5 s pgembed gives an immediate shutdown
	// before SIGKILL, with room for a busy machine; well under the 35 s
	// of a fixed 30 s.
	select {
	case <-done: // an error is expected: the stop was forced
	case <-time.After(20 * time.Second):
		start := time.Now()
		<-done
		t.Errorf("daemon with shutdown_timeout 1s and a Postgres that does not stop did not exit within 20s, but %v later", time.Since(start).Round(time.Second))
	}
}

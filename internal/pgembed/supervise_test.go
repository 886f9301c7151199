package pgembed

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// TestUpFollowsTheServer: Up is true once Start returns, false as soon as
// the supervisor sees the postmaster die (before any restart), and false
// after Stop. The death's FATAL lines (the backends ended by it) are not
// warnings: the supervisor reports the death itself.
func TestUpFollowsTheServer(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, newDataDir(t))
	opts.RestartDelay = time.Hour // no restart while the test looks
	logs := &levels{}
	opts.Logger = slog.New(logs)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Up() {
		t.Fatal("Up is false after Start")
	}
	// A session whose backend the death ends.
	conn, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, time.Minute, "Up false after the postmaster died", func() bool { return !p.Up() })
	if p.Restarts() != 0 {
		t.Fatal("restarted within the hour's delay")
	}
	// Stop reports how the dead server exited.
	if err := p.Stop(ctx); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Stop after the death: %v", err)
	}
	if p.Up() {
		t.Fatal("Up is true after Stop")
	}
	if w := logs.warnings("postgres"); len(w) > 0 {
		t.Fatalf("the server's lines relayed as warnings: %q", w)
	}
}

// TestStopWaitsForSessionsThenEndsThem: Stop asks for a smart shutdown,
// which a session that ended meanwhile does not disturb, and ends a
// session that stays open with a fast one, without a warning either way.
func TestStopWaitsForSessionsThenEndsThem(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, newDataDir(t))
	logs := &levels{}
	opts.Logger = slog.New(logs)
	p := start(t, opts)
	conn, err := pgx.Connect(t.Context(), p.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	stop(t, p)
	if !logs.has("FATAL:  terminating connection due to administrator command") {
		t.Fatal("the open session was not ended by the fast shutdown")
	}
	if w := logs.warnings(""); len(w) > 0 {
		t.Fatalf("warnings while stopping: %q", w)
	}
}

// levels is a slog handler that keeps each record's level, message and
// line attribute.
type levels struct {
	mu      sync.Mutex
	records []string
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levels) WithGroup(string) slog.Handler            { return l }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	line := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			line = a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, r.Level.String()+" "+r.Message+" "+line)
	l.mu.Unlock()
	return nil
}

// warnings returns the records at WARN or above whose message starts
// with msg.
func (l *levels) warnings(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		if (strings.HasPrefix(r, "WARN "+msg) || strings.HasPrefix(r, "ERROR "+msg)) && msg != "" || msg == "" && (strings.HasPrefix(r, "WARN") || strings.HasPrefix(r, "ERROR")) {
			out = append(out, r)
		}
	}
	return out
}

func (l *levels) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if strings.Contains(r, s) {
			return true
		}
	}
	return false
}

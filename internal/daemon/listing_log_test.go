package daemon_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// logCapture is a slog.Handler keeping every record's level and message.
type logCapture struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func (c logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c logCapture) WithGroup(string) slog.Handler            { return c }

func (c logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.recs = append(*c.recs, r.Clone())
	return nil
}

// find returns the records whose message starts with prefix.
func (c logCapture) find(prefix string) []slog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []slog.Record
	for _, r := range *c.recs {
		if strings.HasPrefix(r.Message, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// errors returns the records at level ERROR.
func (c logCapture) errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range *c.recs {
		if r.Level >= slog.LevelError {
			out = append(out, r.Message)
		}
	}
	return out
}

// startLogged starts a daemon as dt.Start does, logging to a capture,
// with opts applied to its configuration.
func startLogged(t *testing.T, opts ...func(*config.Config)) (*dt.Daemon, logCapture) {
	t.Helper()
	logs := logCapture{mu: new(sync.Mutex), recs: new([]slog.Record)}
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminPassword = dt.AdminPassword
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.DatabaseURL = pgtest.NewDatabase(t)
	for _, o := range opts {
		o(&cfg)
	}
	d := daemon.New(cfg, slog.New(logs), daemon.Options{Version: "test", BcryptCost: 4})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon exited with error: %v", err)
		}
	})
	select {
	case <-d.Started():
	case err := <-done:
		done <- err
		t.Fatalf("daemon failed to start: %v", err)
	}
	return &dt.Daemon{Daemon: d, URL: "http://" + d.Addr(), DatabaseURL: cfg.DatabaseURL}, logs
}

// TestListingLeftByItsClientIsNoError: a client that drops its connection
// in the middle of a document listing makes the daemon log that at Debug,
// not as an ERROR blaming statement_timeout: any client could fill the
// log with those. A listing that fails while its client is still there
// (here an operator cancels its statement) is still an ERROR.
func TestListingLeftByItsClientIsNoError(t *testing.T) {
	t.Parallel()
	d, logs := startLogged(t)
	d.CreateDatabase(t, "big", "type Item { text: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/big", itemsNDJSON(20000, 1000), "Content-Type", "application/x-ndjson")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+dt.AdminPassword))

	// Read the first 64 KiB, then reset the connection.
	for i := range 3 {
		conn, err := net.Dial("tcp", d.Addr())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /api/document/admin/big?type=Item HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n\r\n", basic)
		if _, err := io.ReadFull(bufio.NewReader(conn), make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		eventually.True(t, dt.StreamWait, "the abandoned listing is logged", func() bool {
			return len(logs.find("document listing")) == i+1
		})
	}
	for _, r := range logs.find("document listing") {
		if r.Level != slog.LevelDebug {
			t.Errorf("a listing its client left is logged at %s: %q", r.Level, r.Message)
		}
	}
	if e := logs.errors(); len(e) != 0 {
		t.Fatalf("listings their clients left logged errors: %q", e)
	}

	// An operator cancels the statement of a listing whose client reads.
	pg, err := pgx.Connect(context.Background(), d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	req, _ := http.NewRequest("GET", d.URL+"/api/document/admin/big?type=Item", nil)
	dt.Admin()(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	var pid int32
	eventually.True(t, dt.StreamWait, "the listing's statement runs", func() bool {
		// Only this one: a statement of a listing left above may still
		// be ending.
		var n int
		err := pg.QueryRow(context.Background(), `SELECT coalesce(min(pid), 0), count(*) FROM pg_stat_activity
			WHERE query LIKE '%"Item"%' AND state = 'active' AND pid <> pg_backend_pid()`).Scan(&pid, &n)
		return err == nil && n == 1
	})
	if _, err := pg.Exec(context.Background(), "SELECT pg_cancel_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("the listing whose statement was cancelled read as a whole answer")
	}
	eventually.True(t, dt.StreamWait, "the failed listing is logged", func() bool {
		return len(logs.find("document listing failed mid-stream")) == 1
	})
	if r := logs.find("document listing failed mid-stream")[0]; r.Level != slog.LevelError {
		t.Fatalf("a listing cancelled by an operator is logged at %s", r.Level)
	}
}

// TestStoppedWhileStartingIsNoFailure: a daemon stopped before it serves
// (a supervisor's SIGTERM while it migrates) returns nil, logging why at
// Info: it returned the stop's own error (context canceled, a statement
// cancelled), and sluice exited 1, a failure to the supervisor.
func TestStoppedWhileStartingIsNoFailure(t *testing.T) {
	t.Parallel()
	logs := logCapture{mu: new(sync.Mutex), recs: new([]slog.Record)}
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminPassword = dt.AdminPassword
	cfg.DatabaseURL = pgtest.NewDatabase(t)
	d := daemon.New(cfg, slog.New(logs), daemon.Options{Version: "test", BcryptCost: 4})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatalf("stopped while starting: %v, want nil", err)
	}
	if len(logs.find("stopped while starting")) != 1 {
		t.Error("the stop while starting is not logged")
	}
}

// Package daemontest starts a whole Sluice daemon in-process for end-to-end
// tests: real Postgres (from internal/pgtest), real HTTP on 127.0.0.1:0.
// A test package using it declares func TestMain(m *testing.M) { pgtest.Main(m) }.
package daemontest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// AdminPassword is the admin user's password in test daemons.
const AdminPassword = "test-admin-password"

// Daemon is a running test daemon.
type Daemon struct {
	*daemon.Daemon
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL string
	// DatabaseURL is the Postgres database the daemon uses; a second
	// daemon started with it shares the same data.
	DatabaseURL string

	cancel context.CancelFunc
	done   chan error
}

// Option adjusts a test daemon's configuration.
type Option func(*config.Config)

// WithDatabaseURL makes the daemon use an existing database (to share one
// between daemons, or to restart on the same data).
func WithDatabaseURL(url string) Option {
	return func(c *config.Config) { c.DatabaseURL = url }
}

// WithCORS sets the origins allowed to call with credentials (config key
// cors_origins).
func WithCORS(origins ...string) Option {
	return func(c *config.Config) { c.CORSOrigins = origins }
}

// Start starts a daemon on a fresh database (unless an option gives one) and
// stops it when the test ends. Passwords are hashed at bcrypt's least cost.
func Start(t testing.TB, opts ...Option) *Daemon {
	t.Helper()
	return StartWith(t, daemon.Options{Version: "test", BcryptCost: 4}, opts...)
}

// StartWith is Start with the daemon's own options (such as a bcrypt cost
// of real passwords' for a test of timing).
func StartWith(t testing.TB, dopts daemon.Options, opts ...Option) *Daemon {
	t.Helper()
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminPassword = AdminPassword
	cfg.ShutdownTimeout = 5 * time.Second
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = pgtest.NewDatabase(t)
	}
	level := slog.LevelWarn
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	d := daemon.New(cfg, logger, dopts)
	ctx, cancel := context.WithCancel(context.Background())
	td := &Daemon{Daemon: d, DatabaseURL: cfg.DatabaseURL, cancel: cancel, done: make(chan error, 1)}
	go func() { td.done <- d.Run(ctx) }()
	select {
	case <-d.Started():
	case err := <-td.done:
		cancel()
		t.Fatalf("daemon failed to start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("daemon did not start within 60s")
	}
	td.URL = "http://" + d.Addr()
	t.Cleanup(func() { td.Stop(t) })
	return td
}

// Stop shuts the daemon down gracefully and waits for it; it is idempotent.
func (d *Daemon) Stop(t testing.TB) {
	t.Helper()
	d.cancel()
	select {
	case err, ok := <-d.done:
		if !ok {
			return // stopped before
		}
		if err != nil {
			t.Errorf("daemon exited with error: %v", err)
		}
		close(d.done)
	case <-time.After(30 * time.Second):
		t.Error("daemon did not stop within 30s")
	}
}

// Response is a completed HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Auth sets credentials on a request.
type Auth func(*http.Request)

// Admin authenticates as the super user.
func Admin() Auth { return Basic("admin", AdminPassword) }

// Basic authenticates with a user name and password.
func Basic(user, password string) Auth {
	return func(r *http.Request) { r.SetBasicAuth(user, password) }
}

// Bearer authenticates with an API token.
func Bearer(token string) Auth {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// NoAuth sends no credentials.
func NoAuth() Auth { return func(*http.Request) {} }

// Do sends a request with body (a string, []byte or nil) and returns the
// whole response; header is name, value pairs (a name given twice is sent
// as two field lines). It fails the test on transport errors only.
func (d *Daemon) Do(t testing.TB, auth Auth, method, path string, body any, header ...string) Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		t.Fatalf("Do: unsupported body type %T", body)
	}
	req, err := http.NewRequest(method, d.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// MustDo is Do that fails the test unless the status is want.
func (d *Daemon) MustDo(t testing.TB, want int, auth Auth, method, path string, body any, header ...string) Response {
	t.Helper()
	r := d.Do(t, auth, method, path, body, header...)
	if r.Status != want {
		t.Fatalf("%s %s: status %d, want %d; body: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// CreateDatabase creates admin/<name> with the given schema SDL.
func (d *Daemon) CreateDatabase(t testing.TB, name, sdl string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"schema": sdl})
	d.MustDo(t, http.StatusCreated, Admin(), http.MethodPost, "/api/db/admin/"+name, body)
}

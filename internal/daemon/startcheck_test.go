package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestWrongFilesStopTheStartBeforePostgres: a webhook_secret_key_file
// that is no key, and a write_spool_dir that cannot hold files, stop the
// daemon before it touches Postgres, naming the setting. They were found
// after the migrations (and, on the embedded Postgres, initdb), and a
// first start printed the admin password it had made before failing, a
// password the next start does not print again (a review's find).
func TestWrongFilesStopTheStartBeforePostgres(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notAKey := filepath.Join(dir, "key")
	if err := os.WriteFile(notAKey, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		set  func(*config.Config)
		want string
	}{
		{"webhook key file", func(c *config.Config) { c.WebhookSecretKeyFile = notAKey }, "webhook_secret_key_file"},
		{"missing webhook key file", func(c *config.Config) { c.WebhookSecretKeyFile = filepath.Join(dir, "none") }, "webhook_secret_key_file"},
		{"spool dir", func(c *config.Config) { c.WriteSpoolDir = filepath.Join(dir, "none") }, "write_spool_dir"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := pgtest.NewDatabase(t)
			err := runWith(url, c.set)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v, want an error naming %s", err, c.want)
			}
			var made string
			if err := queryString(url, "SELECT count(*)::text FROM pg_namespace WHERE nspname = 'sluice'", &made); err != nil || made != "0" {
				t.Errorf("schema sluice made before the start failed: %q (%v)", made, err)
			}
		})
	}
}

// runWith runs a daemon on the database at url with the configuration
// set changes, for a test of a start that fails: it returns Run's error
// (nil if it stopped after a minute).
func runWith(url string, set func(*config.Config)) error {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DatabaseURL = url
	cfg.AdminPassword = dt.AdminPassword
	set(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return daemon.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), daemon.Options{BcryptCost: 4}).Run(ctx)
}

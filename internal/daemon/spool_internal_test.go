package daemon

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
)

// TestWriteSpoolDirectory: where large write bodies are read ahead, and
// what happens when Sluice cannot write there (a read-only root file
// system): a write_spool_dir set fails the start, naming it; one chosen
// turns reading ahead off, with a warning; the embedded Postgres's
// data_dir is chosen first. (Not parallel: it sets TMPDIR.)
func TestWriteSpoolDirectory(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := config.Default()
	cfg.DatabaseURL = "postgres://elsewhere/sluice"

	cfg.WriteSpoolDir = filepath.Join(t.TempDir(), "missing")
	if _, _, err := writeSpool(cfg, logger); err == nil || !strings.Contains(err.Error(), "write_spool_dir") {
		t.Errorf("a write_spool_dir that cannot be written: %v, want an error naming it", err)
	}

	cfg.WriteSpoolDir = ""
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	if dir, budget, err := writeSpool(cfg, logger); err != nil || budget != 0 || !strings.Contains(logs.String(), "write_spool_dir") {
		t.Errorf("no temporary directory: %q, budget %d, %v, logged %q; want reading ahead off, and a warning", dir, budget, err, logs.String())
	}

	cfg.DatabaseURL = ""
	cfg.DataDir = t.TempDir()
	if dir, budget, err := writeSpool(cfg, logger); err != nil || budget != cfg.WriteSpoolBytes || dir != filepath.Join(cfg.DataDir, "spool") {
		t.Errorf("with the embedded Postgres: %q, budget %d, %v; want data_dir/spool", dir, budget, err)
	}
}

package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/pgembed"
)

// cluster is the durable Postgres the benchmarks share; TestMain sets it.
var cluster *pgembed.Postgres

// clusterSettings are the server settings of the benchmarks' clusters,
// beyond pgembed's defaults (BenchmarkLiveQueries starts one of its own).
func clusterSettings() map[string]string {
	return map[string]string{"max_connections": "200", "shared_buffers": "256MB"}
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, err = pgembed.Start(ctx, pgembed.Options{
		DataDir:  filepath.Join(dir, "pg"),
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		Settings: clusterSettings(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: start postgres:", err)
		return 1
	}
	defer cluster.Stop(context.Background()) //nolint:errcheck
	return m.Run()
}

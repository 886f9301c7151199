package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
)

// TestTakenPortsFailBeforePostgres: a start whose listen or metrics_listen
// address is taken fails with the bind error before it reaches Postgres
// (which would run initdb, the migrations and make the admin user, showing
// its generated password on the one start it is shown).
func TestTakenPortsFailBeforePostgres(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() }) // after the parallel subtests
	cases := []struct {
		name                  string
		listen, metricsListen string
		want                  string
	}{
		{"listen", taken.Addr().String(), "", "listen on " + taken.Addr().String() + ": "},
		{"metrics_listen", "127.0.0.1:0", taken.Addr().String(), "listen on " + taken.Addr().String() + " (metrics_listen): "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.Listen, cfg.MetricsListen = tc.listen, tc.metricsListen
			cfg.DatabaseURL = "postgres://unused.invalid/sluice" // never reached: the ports are bound first
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err := daemon.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), daemon.Options{}).Run(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "address already in use") {
				t.Fatalf("Run: %v, want an error with %q and address already in use", err, tc.want)
			}
		})
	}
}

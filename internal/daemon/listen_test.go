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

// TestMetricsSettingsThatDoNothingAreRefused: with metrics_listen the
// API's listener no longer serves /metrics and the metrics listener
// serves it without credentials, so a metrics_token beside it authorized
// nothing, and metrics_allow_hosts without it checked nothing: each was
// ignored without a word, and an operator who set the token believed the
// metrics listener needed it. A start refuses them, before it reaches
// Postgres, naming the settings.
func TestMetricsSettingsThatDoNothingAreRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		set  func(*config.Config)
		want string
	}{
		{"metrics_token with metrics_listen", func(c *config.Config) {
			c.MetricsToken, c.MetricsListen = "0123456789abcdef-metrics", "127.0.0.1:0"
		}, "config: metrics_token is set, but so is metrics_listen, whose listener serves /metrics without credentials (the API's listener then serves none): the token would authorize nothing; unset one of them"},
		{"metrics_allow_hosts without metrics_listen", func(c *config.Config) {
			c.MetricsAllowHosts = []string{"sluice.internal"}
		}, "config: metrics_allow_hosts is set, but metrics_listen is not: it names the hosts the metrics listener answers, and there is none; set metrics_listen, or unset metrics_allow_hosts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.Listen = "127.0.0.1:0"
			cfg.DatabaseURL = "postgres://unused.invalid/sluice?connect_timeout=1" // never reached: the settings are checked first
			tc.set(&cfg)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err := daemon.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), daemon.Options{}).Run(ctx)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Run: %v\nwant %s", err, tc.want)
			}
		})
	}
}

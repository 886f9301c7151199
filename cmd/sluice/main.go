// Command sluice is the Sluice daemon: `sluice serve` runs it, `sluice
// migrate` applies its database migrations, `sluice healthcheck` tells
// whether a running daemon is ready, `sluice version` prints the build's
// version.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Sluice stores schema'd documents in Postgres and streams every committed change",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, logger, err := load(cmd)
			if err != nil {
				return err
			}
			ctx, hurry, stop := stopSignals(cmd.Context())
			defer stop()
			d := daemon.New(cfg, logger, daemon.Options{Version: version, Hurry: hurry, OnAdminPassword: func(p string) {
				showAdminPassword(os.Stderr, cfg.LogFormat, p)
			}})
			stopReload := reloadOnHangup(ctx, d, logger)
			defer stopReload()
			return d.Run(ctx)
		},
	}
	migrate := &cobra.Command{
		Use:   "migrate",
		Short: "Apply Sluice's database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, logger, err := load(cmd)
			if err != nil {
				return err
			}
			return daemon.Migrate(cmd.Context(), cfg, logger)
		},
	}
	versionCmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "sluice", version)
		},
	}
	var timeout time.Duration
	healthcheckCmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if the daemon at the configured listen address is ready (GET /readyz answers 200), else 1",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A timeout of 0 ended every check at once with "context
			// deadline exceeded", as if the daemon had not answered.
			if timeout <= 0 {
				return fmt.Errorf("healthcheck: --timeout %s: want a duration greater than zero, such as 5s", timeout)
			}
			// load, as serve: a misspelt SLUICE_ variable is warned
			// about here too, in the health log where an operator
			// looks when the check fails.
			cfg, _, err := load(cmd)
			if err != nil {
				return err
			}
			return healthcheck(cmd.Context(), cfg.Listen, cfg.TLSCertFile != "", timeout)
		},
	}
	config.RegisterFlags(serve.Flags())
	config.RegisterFlags(migrate.Flags())
	config.RegisterFlags(healthcheckCmd.Flags())
	healthcheckCmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	root.AddCommand(serve, migrate, healthcheckCmd, versionCmd)
	root.SetContext(context.Background())
	return root
}

// stopSignals returns a context that ends at the first SIGINT or SIGTERM
// (the graceful stop) and a channel closed at the second (the drain is cut
// short: an operator who asks twice does not want to wait out
// shutdown_timeout, as with Caddy or a Kubernetes controller). After the
// second, the signals are no longer caught: a third one kills the process
// at once, for a stop stuck past the drain. The returned function stops
// catching them.
func stopSignals(parent context.Context) (context.Context, <-chan struct{}, func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(parent)
	hurry := make(chan struct{})
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-sig:
			cancel()
		case <-quit:
			return
		}
		select {
		case <-sig:
			signal.Stop(sig)
			close(hurry)
		case <-quit:
		}
	}()
	return ctx, hurry, func() {
		signal.Stop(sig)
		close(quit)
		<-done
		cancel()
	}
}

// reloadOnHangup calls d.Reload on every SIGHUP (new TLS certificate, new
// JWT key set) until ctx ends or the returned function is called, which
// waits for a reload in progress.
func reloadOnHangup(ctx context.Context, d *daemon.Daemon, logger *slog.Logger) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				logger.Info("SIGHUP: reloading the TLS certificate and the JWT key set")
				if err := d.Reload(ctx); err != nil {
					logger.Error("reload; what failed stays as it was", "err", err)
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// load reads the configuration and builds the logger it asks for.
func load(cmd *cobra.Command) (config.Config, *slog.Logger, error) {
	cfg, err := config.Load(cmd.Flags(), os.LookupEnv)
	if err != nil {
		return cfg, nil, err
	}
	logger := newLogger(os.Stderr, cfg)
	for _, name := range config.UnknownEnv(os.Environ()) {
		logger.Warn("ignoring unknown environment variable", "name", name)
	}
	return cfg, logger, nil
}

// showAdminPassword shows the admin password generated on the first
// start. With log_format json it is a log record like the others (the
// password in its field), which a log pipeline reading JSON lines keeps;
// plain text among them was dropped or mangled. It is shown whatever
// log_level is: it is shown only once.
func showAdminPassword(w io.Writer, format config.LogFormat, password string) {
	if format == config.LogFormatJSON {
		slog.New(slog.NewJSONHandler(w, nil)).Warn("Generated password for user admin: it is shown only once. Set SLUICE_ADMIN_PASSWORD to choose one.", "user", "admin", "password", password)
		return
	}
	fmt.Fprintf(w, "\n  Generated password for user admin: %s\n  It is shown only once. Set SLUICE_ADMIN_PASSWORD to choose one.\n\n", password)
}

func newLogger(w io.Writer, cfg config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == config.LogFormatJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

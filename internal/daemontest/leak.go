package daemontest

import "go.uber.org/goleak"

// GoroutinesSince returns an error listing the goroutines started since
// base (goleak.IgnoreCurrent) that are still running, but for two kinds
// that belong to the daemon, not to any stream or request:
//
//   - pgx's background reader: a connection whose write was slow (15 ms,
//     easily reached on a loaded machine) starts one, and once stopped it
//     stays in its Read until the connection's next message arrives,
//     which for an idle pool connection may be never; one at most per
//     connection of the pool;
//   - the webhook deliverer's: it takes its lease when it can, and a
//     daemon on a loaded machine may take it (again) at any time, starting
//     the goroutines that deliver under it.
func GoroutinesSince(base goleak.Option) error {
	return goleak.Find(base, goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgconn/internal/bgreader.(*BGReader).bgRead"),
		goleak.IgnoreAnyFunction("github.com/sluice-dev/sluice/internal/webhook.(*manager).run"),
		goleak.IgnoreAnyFunction("github.com/sluice-dev/sluice/internal/webhook.(*manager).listen"),
		goleak.IgnoreAnyFunction("github.com/sluice-dev/sluice/internal/webhook.(*loop).start.func1"))
}

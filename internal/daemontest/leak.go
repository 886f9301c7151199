package daemontest

import "go.uber.org/goleak"

// GoroutinesSince returns an error listing the goroutines started since
// base (goleak.IgnoreCurrent) that are still running, but for pgx's
// background reader: a connection whose write was slow (15 ms, easily
// reached on a loaded machine) starts one, and once stopped it stays in
// its Read until the connection's next message arrives, which for an idle
// pool connection may be never. It belongs to the pool, one at most per
// connection, not to any stream.
func GoroutinesSince(base goleak.Option) error {
	return goleak.Find(base, goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgconn/internal/bgreader.(*BGReader).bgRead"))
}

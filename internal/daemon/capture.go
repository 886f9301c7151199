package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-dev/sluice/internal/postgres"
)

// captureRepairEvery is how often each replica looks for databases whose
// capture triggers an older Sluice made (postgres.RepairCapture). During
// a rolling upgrade an older replica makes its own triggers again when it
// starts, and whenever it changes a schema: they check less than this
// binary's (an older one knows no ref: items, say), and SQL writes would
// then store what the API refuses to read back and write. So they are
// weaker for at most this long (plus a lock timeout, when a transaction
// holds the tables). docs/operations.md says so; when nothing needs
// repair, a look costs one query.
const captureRepairEvery = 10 * time.Second

// repairCapture calls store.RepairCapture and store.RemoveForeign every
// captureRepairEvery until ctx ends. Both ran at start. RemoveForeign
// drops the triggers other roles made on Sluice's tables (which the
// tables' guard keeps from running: writes to such a table are refused
// meanwhile) and revokes the privileges that let them, granted since the
// last look: so a table granted with GRANT ALL is written again within
// this long.
func repairCapture(ctx context.Context, store *postgres.DB, logger *slog.Logger) {
	t := time.NewTicker(captureRepairEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		removeForeign(ctx, store, logger)
		n, err := store.RepairCapture(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Warn("repair the capture triggers an older sluice made", "err", err)
		}
		if n > 0 {
			logger.Warn("made again the capture triggers an older sluice replica had made, which check less than this one's: upgrade it", "databases", n)
		}
	}
}

// removeForeign calls store.RemoveForeign and logs what it removed.
func removeForeign(ctx context.Context, store *postgres.DB, logger *slog.Logger) {
	done, err := store.RemoveForeign(ctx)
	for _, stmt := range done {
		logger.Warn("removed what another postgres role attached to sluice's tables, or the privilege to attach it: grant other roles only USAGE on sluice's schemas and SELECT, INSERT, UPDATE, DELETE and TRUNCATE on their tables", "statement", stmt)
	}
	if err != nil && ctx.Err() == nil {
		logger.Warn("remove the triggers other postgres roles made on sluice's tables", "err", err)
	}
}

// warnOtherReach logs a warning for each role other than Sluice's that may
// read or write Sluice's own tables (postgres.OtherRolesReach): nothing
// Sluice grants lets it, and nothing Sluice revokes stops it, so the
// operator is told at each start.
func warnOtherReach(ctx context.Context, store *postgres.DB, logger *slog.Logger) {
	roles, err := store.OtherRolesReach(ctx)
	if err != nil {
		if ctx.Err() == nil {
			logger.Warn("look for postgres roles that may read sluice's own tables", "err", err)
		}
		return
	}
	for _, r := range roles {
		if r.Writes {
			logger.Warn("a postgres role may write sluice's own tables (schema sluice), whatever their grants: it can make any user sluice's super user and write the log; revoke pg_write_all_data (and any grant on schema sluice) from it", "role", r.Role)
		} else {
			logger.Warn("a postgres role may read sluice's own tables (schema sluice), whatever their grants: the password hashes and, unless webhook_secret_key_file is set, the key of the webhooks' signing secrets; revoke pg_read_all_data (and any grant on schema sluice) from it", "role", r.Role)
		}
	}
}

// warnSubscriptions logs a warning for each logical replication
// subscription of Sluice's Postgres database (postgres.Subscriptions):
// its worker fires no trigger, so the rows it applies to Sluice's tables
// are not in their log.
func warnSubscriptions(ctx context.Context, store *postgres.DB, logger *slog.Logger) {
	subs, err := store.Subscriptions(ctx)
	if err != nil {
		if ctx.Err() == nil {
			logger.Warn("look for logical replication subscriptions of sluice's postgres database", "err", err)
		}
		return
	}
	for _, s := range subs {
		logger.Warn("a logical replication subscription applies rows to sluice's postgres database: its worker fires no trigger, so the rows it writes to a database's tables are not in that database's log; drop it, or keep its publications off sluice's tables",
			"subscription", s.Name, "owner", s.Owner, "enabled", s.Enabled)
	}
}

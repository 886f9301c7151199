package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// accessVersionSQL is a scalar subquery giving the access log's version. A
// statement that reads commits selects it too, so both come from one
// snapshot: every access change committed before those commits is at or
// below the version read with them.
const accessVersionSQL = "(SELECT version FROM sluice.access_counter)"

// RecordAccess appends change c to the access log inside the transaction
// that makes it, and sets c.Version. The counter row's lock is held until
// COMMIT, so versions are gapless and follow commit order. Other processes
// are woken at once (NOTIFY is only sent at COMMIT; access changes are
// rare, so its cost does not matter here).
func (t *Tx) RecordAccess(ctx context.Context, c *sluice.AccessChange) error {
	if err := t.tx.QueryRow(ctx, "UPDATE sluice.access_counter SET version = version + 1 RETURNING version").Scan(&c.Version); err != nil {
		return mapError(err)
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO sluice.access_changes (version, kind, user_id, token_id, db_id, org, role)
		VALUES ($1, $2, NULLIF($3, 0), NULLIF($4, 0), NULLIF($5, 0), NULLIF($6, ''), $7)`,
		c.Version, string(c.Kind), c.UserID, c.TokenID, c.DatabaseID, c.Org, int16(c.Role))
	if err != nil {
		return mapError(err)
	}
	_, err = t.tx.Exec(ctx, "SELECT pg_notify("+channelSQL("$1")+", $2)", commitsChannel, AccessPayload)
	return mapError(err)
}

// AccessPayload is the NOTIFY payload that announces an access change.
const AccessPayload = "access"

// AccessVersion returns the access log's current version.
func (db *DB) AccessVersion(ctx context.Context) (int64, error) {
	var v int64
	err := db.pool.QueryRow(ctx, "SELECT "+accessVersionSQL).Scan(&v)
	return v, mapError(err)
}

// AccessChanges returns the access changes with versions in (after, upTo],
// oldest first. Versions are gapless; a result that does not start at
// after+1 means the ones before were pruned.
func (db *DB) AccessChanges(ctx context.Context, after, upTo int64) ([]sluice.AccessChange, error) {
	rows, err := db.pool.Query(ctx, `SELECT version, kind, coalesce(user_id, 0), coalesce(token_id, 0), coalesce(db_id, 0), coalesce(org, ''), coalesce(role, 0)
		FROM sluice.access_changes WHERE version > $1 AND version <= $2 ORDER BY version`, after, upTo)
	if err != nil {
		return nil, mapError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sluice.AccessChange, error) {
		var c sluice.AccessChange
		var kind string
		var role int16
		err := row.Scan(&c.Version, &kind, &c.UserID, &c.TokenID, &c.DatabaseID, &c.Org, &role)
		c.Kind, c.Role = sluice.AccessKind(kind), sluice.Role(role)
		return c, err
	})
	return out, mapError(err)
}

// accessRetention is how long access log rows are kept. Every process
// applies them within a poll interval; one that was cut off for longer
// finds a gap and re-checks all its streams.
const accessRetention = time.Hour

// pruneAccess removes access log rows older than accessRetention, keeping
// the newest.
func pruneAccess(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `DELETE FROM sluice.access_changes WHERE changed_at < now() - make_interval(secs => $1)
		AND version < `+accessVersionSQL, accessRetention.Seconds())
	return err
}

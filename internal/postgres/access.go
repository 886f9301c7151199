package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice"
)

// accessVersionSQL is a scalar subquery giving the access log's version. A
// statement that reads commits selects it too, so both come from one
// snapshot: every access change committed before those commits is at or
// below the version read with them.
const accessVersionSQL = "(SELECT version FROM sluice.access_counter)"

// changeAccess queues access change c, which recordAccess appends to the
// access log in the same transaction once the write's Before step is
// done: the log's counter row is the last lock an administrative change
// takes (lockorder.go).
func (t *Tx) changeAccess(c sluice.AccessChange) {
	t.access = append(t.access, c)
}

// recordAccess appends the access changes queued in the transaction to the
// access log, numbering them. The counter row's lock is held until
// COMMIT, so versions are gapless and follow commit order. Other processes
// are woken at once, by a NOTIFY sent once the transaction committed
// (transact), not in it: Postgres's queue of notifications is the
// cluster's, and any role that may connect can fill it (LISTEN, then stay
// in a transaction while it sends), after which every transaction that
// notifies fails at COMMIT: a revocation, a password or role change, a
// user's deletion failed with it. A notification is only a wake-up
// (listeners poll too): one lost delays the change's effect by a poll.
func (t *Tx) recordAccess(ctx context.Context) error {
	for _, c := range t.access[t.accessRecorded:] {
		var version int64
		if err := t.tx.QueryRow(ctx, "UPDATE sluice.access_counter SET version = version + 1 RETURNING version").Scan(&version); err != nil {
			return mapError(err)
		}
		_, err := t.tx.Exec(ctx, `INSERT INTO sluice.access_changes (version, kind, user_id, token_id, db_id, org, role)
		VALUES ($1, $2, NULLIF($3, 0), NULLIF($4, 0), NULLIF($5, 0), NULLIF($6, ''), $7)`,
			version, string(c.Kind), c.UserID, c.TokenID, c.DatabaseID, c.Org, int16(c.Role))
		if err != nil {
			return mapError(err)
		}
	}
	t.accessRecorded = len(t.access)
	return nil
}

// checkAccessRecorded fails a transaction about to commit with access
// changes queued after recordAccess ran: committed, they would change
// access without the log saying so, and no stream would see it.
func (t *Tx) checkAccessRecorded() error {
	if t.accessRecorded < len(t.access) {
		return fmt.Errorf("%d access changes made after the write's Before step are not in the access log", len(t.access)-t.accessRecorded)
	}
	return nil
}

// notifyAccess announces the access change that the transaction conn
// ran committed, best effort (see recordAccess).
func (db *DB) notifyAccess(ctx context.Context, conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "SELECT pg_notify("+channelSQL("$1")+", $2)", commitsChannel, AccessPayload); err != nil {
		db.logger.Warn("announce an access change (other processes see it at their next poll)", "err", err)
	}
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
// oldest first. Versions are gapless and unique: the result holds at most
// upTo-after changes, so callers bound what they read by the range, and a
// version of the range missing from it was pruned.
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

// AccessChangesFor calls fn with the access changes in (after, upTo] that
// may affect grant (sluice.AccessChange.Affects judges them), oldest
// first, until fn returns false. It reports whether the range is whole:
// false when changes in it were pruned before they were read, and then fn
// is not called.
//
// The changes that cannot affect grant are left in Postgres: a token of
// another, another user's password or role, another database or
// organization. A webhook waiting to retry reads the changes made while it
// waited (up to the log's hour of retention), and any user can make them
// (its own tokens) as often as it likes: read whole, for every retrying
// webhook, they cost memory in proportion to other users' churn (found by
// review: 118 MiB per webhook for 200,000 changes). What is passed to fn
// is read a row at a time; the gap is found by counting the rows of the
// range, in the same statement, not by reading them. The choice of rows
// is by the ids each kind of change names, a superset of what Affects
// takes: a kind this binary does not know is always passed.
func (db *DB) AccessChangesFor(ctx context.Context, after, upTo int64, grant *sluice.Grant, fn func(sluice.AccessChange) bool) (whole bool, err error) {
	u, d := grant.User, grant.Database
	rows, err := db.pool.Query(ctx, `WITH r AS (SELECT count(*) AS n FROM sluice.access_changes WHERE version > $1 AND version <= $2)
		SELECT r.n, c.version, c.kind, coalesce(c.user_id, 0), coalesce(c.token_id, 0), coalesce(c.db_id, 0), coalesce(c.org, ''), coalesce(c.role, 0)
		FROM r LEFT JOIN LATERAL (SELECT * FROM sluice.access_changes
			WHERE r.n = $2 - $1 AND version > $1 AND version <= $2 AND (
				(kind = $3 AND token_id = $4)
				OR (kind = ANY($5) AND user_id = $6)
				OR (kind = $7 AND db_id = $8)
				OR (kind = $9 AND org = ANY($10))
				OR kind <> ALL($11))
			ORDER BY version) c ON true`,
		after, upTo,
		string(sluice.AccessToken), grant.TokenID,
		[]string{string(sluice.AccessPassword), string(sluice.AccessUser), string(sluice.AccessRole)}, u.ID,
		string(sluice.AccessDatabase), d.ID,
		string(sluice.AccessOrganization), []string{d.Org, u.Org},
		[]string{string(sluice.AccessToken), string(sluice.AccessPassword), string(sluice.AccessUser), string(sluice.AccessRole), string(sluice.AccessDatabase), string(sluice.AccessOrganization)})
	if err != nil {
		return false, mapError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n int64
		var version *int64
		var kind *string
		var c sluice.AccessChange
		var role int16
		if err := rows.Scan(&n, &version, &kind, &c.UserID, &c.TokenID, &c.DatabaseID, &c.Org, &role); err != nil {
			return false, mapError(err)
		}
		if n != upTo-after {
			return false, nil
		}
		if version == nil {
			break // none may affect grant
		}
		c.Version, c.Kind, c.Role = *version, sluice.AccessKind(*kind), sluice.Role(role)
		if !fn(c) {
			break
		}
	}
	rows.Close()
	return true, mapError(rows.Err())
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

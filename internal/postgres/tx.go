package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Tx is the transaction of one DB.Write: what a WriteSpec's Before runs its
// statements in, so that they commit, or roll back, with the write's
// documents. A Tx is used by one goroutine, and only during the Before
// call it is given to.
type Tx struct {
	tx dbtx
	db *DB
	// committed is set once finish sent COMMIT and Postgres answered it.
	committed bool
}

// transact runs fn in one transaction on a pooled connection, in a BEGIN of
// its own rather than pgx's transaction type, so that fn may end the
// transaction itself by sending COMMIT in the same round trip as its last
// statements (finish). If fn returns nil without having done so, transact
// commits; on error it rolls back.
func (db *DB) transact(ctx context.Context, fn func(*Tx) error) error {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return mapError(err)
	}
	// Release closes a connection left inside a transaction or broken.
	defer conn.Release()
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return mapError(err)
	}
	t := &Tx{tx: conn, db: db}
	if err := fn(t); err != nil {
		if !t.committed {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return err
	}
	if t.committed {
		return nil
	}
	return commitTag(conn.Exec(ctx, "COMMIT"))
}

// commitTag checks the result of COMMIT: Postgres answers ROLLBACK, not an
// error, for a transaction that had failed.
func commitTag(tag pgconn.CommandTag, err error) error {
	if err == nil && tag.String() != "COMMIT" {
		err = fmt.Errorf("COMMIT answered %q", tag.String())
	}
	return mapError(err)
}

// errCommitFailed wraps an error of a COMMIT sent behind a commit's last
// statements: whether the transaction committed is not known, so group
// commit must not run its writes again as if it had not.
var errCommitFailed = errors.New("commit failed")

// AdvisoryLock takes a transaction-scoped advisory lock named key, waiting
// for other holders.
func (t *Tx) AdvisoryLock(ctx context.Context, key string) error {
	_, err := t.tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", key)
	return mapError(err)
}

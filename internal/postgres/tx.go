package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Tx is a storage transaction. Operations that must be atomic together
// (creating a database and recording it in _system, a schema change and its
// tables) run through the same Tx. A Tx is used by one goroutine.
type Tx struct {
	tx dbtx
	db *DB
	// committed is set once FinishCommit committed the transaction.
	committed bool
}

// InTx runs fn in one transaction, committing when fn returns nil and rolling
// back otherwise.
func (db *DB) InTx(ctx context.Context, fn func(*Tx) error) error {
	return db.inTx(ctx, func(tx pgx.Tx) error { return fn(&Tx{tx: tx, db: db}) })
}

// InCommitTx is InTx for a function that ends by committing the
// transaction itself with Tx.FinishCommit, in the same round trip as its
// last statements; if it returns nil without doing so, InCommitTx commits,
// and on error it rolls back, as InTx does.
func (db *DB) InCommitTx(ctx context.Context, fn func(*Tx) error) error {
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

// AdvisoryLock takes a transaction-scoped advisory lock named key, waiting
// for other holders.
func (t *Tx) AdvisoryLock(ctx context.Context, key string) error {
	_, err := t.tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", key)
	return mapError(err)
}

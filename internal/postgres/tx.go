package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Tx is a storage transaction. Operations that must be atomic together
// (creating a database and recording it in _system, a schema change and its
// tables) run through the same Tx. A Tx is used by one goroutine.
type Tx struct {
	tx pgx.Tx
	db *DB
}

// InTx runs fn in one transaction, committing when fn returns nil and rolling
// back otherwise.
func (db *DB) InTx(ctx context.Context, fn func(*Tx) error) error {
	return db.inTx(ctx, func(tx pgx.Tx) error { return fn(&Tx{tx: tx, db: db}) })
}

// AdvisoryLock takes a transaction-scoped advisory lock named key, waiting
// for other holders.
func (t *Tx) AdvisoryLock(ctx context.Context, key string) error {
	_, err := t.tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", key)
	return mapError(err)
}

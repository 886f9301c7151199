package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ExecForTest runs sql in the transaction (tests only).
func (t *Tx) ExecForTest(ctx context.Context, sql string) error {
	_, err := t.tx.Exec(ctx, sql)
	return err
}

// MigrateToForTest applies the migrations up to version target.
func (db *DB) MigrateToForTest(ctx context.Context, target int) (int, error) {
	return db.migrateTo(ctx, target)
}

// ExecDBForTest runs sql outside any transaction (tests only).
func (db *DB) ExecDBForTest(ctx context.Context, sql string, args ...any) error {
	_, err := db.pool.Exec(ctx, sql, args...)
	return err
}

// ShowForTest returns the value of setting name on a pooled connection.
func (db *DB) ShowForTest(ctx context.Context, name string) (string, error) {
	var v string
	err := db.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// ShowForTest returns the value of setting name on the listening
// connection.
func (l *Listener) ShowForTest(ctx context.Context, name string) (string, error) {
	var v string
	err := l.conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, mapError(err)
}

// SleepForTest runs pg_sleep(seconds) on a pooled connection: a statement
// that runs until it is cancelled or its time is up. It reports whether
// the connection was closed when the statement ended, rather than kept
// for the pool. Errors are mapped as every statement's are.
func (db *DB) SleepForTest(ctx context.Context, seconds float64) (closed bool, err error) {
	c, err := db.pool.Acquire(context.WithoutCancel(ctx))
	if err != nil {
		return false, err
	}
	defer c.Release()
	_, err = c.Exec(ctx, "SELECT pg_sleep($1)", seconds)
	return c.Conn().IsClosed(), mapError(err)
}

// ActiveForTest returns the pids of this database's backends running a
// statement that contains text, other than the one asking.
func (db *DB) ActiveForTest(ctx context.Context, text string) ([]int32, error) {
	rows, err := db.pool.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
		AND position($1 in query) > 0`, text)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int32])
}

// CancelGraceForTest is cancelGrace: how long a cancelled statement's
// connection waits for Postgres before it is closed.
const CancelGraceForTest = cancelGrace

// QueryRowForTest runs sql on the pool and scans its one row into dest.
func (db *DB) QueryRowForTest(ctx context.Context, sql string, dest ...any) error {
	return db.pool.QueryRow(ctx, sql).Scan(dest...)
}

// ReadableByForTest is readableBy: what a migration's header declares.
func ReadableByForTest(name string, version int, sql string) (int, error) {
	return readableBy(name, version, sql)
}

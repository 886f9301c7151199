package postgres

import "context"

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

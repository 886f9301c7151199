package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
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
// the connection was closed when the statement ended (before it went back
// to the pool), and the pid of its backend. Errors are mapped as every
// statement's are.
func (db *DB) SleepForTest(ctx context.Context, seconds float64) (closed bool, pid uint32, err error) {
	c, err := db.pool.Acquire(context.WithoutCancel(ctx))
	if err != nil {
		return false, 0, err
	}
	defer c.Release()
	_, err = c.Exec(ctx, "SELECT pg_sleep($1)", seconds)
	return c.Conn().IsClosed(), c.Conn().PgConn().PID(), mapError(err)
}

// BackendAliveForTest reports whether a backend of pid still runs.
func (db *DB) BackendAliveForTest(ctx context.Context, pid uint32) (bool, error) {
	var n int
	err := db.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&n)
	return n > 0, err
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

// ExplainDocumentsForTest returns the plan (EXPLAIN, COSTS OFF) of the
// statement Documents sends for these classes and page.
func (db *DB) ExplainDocumentsForTest(ctx context.Context, d *sluice.Database, classes []string, skip, count int64) (string, error) {
	q, args := documentsSQL(&sqlBuilder{db: d}, classes, skip, count)
	rows, err := db.pool.Query(ctx, "EXPLAIN (COSTS OFF) "+q, args...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// IndexesForTest returns the definitions of the indexes of class's table
// in database d, other than its primary key, sorted.
func (db *DB) IndexesForTest(ctx context.Context, d *sluice.Database, class string) ([]string, error) {
	rows, err := db.pool.Query(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2
		AND indexname <> $2 || '_pkey' ORDER BY indexdef`, schemaName(d.ID), class)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ColumnCollationForTest returns the collation of a column of class's
// table in database d ("" for the database's default).
func (db *DB) ColumnCollationForTest(ctx context.Context, d *sluice.Database, class, column string) (string, error) {
	var c string
	err := db.pool.QueryRow(ctx, `SELECT coalesce(collation_name, '') FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = $2 AND column_name = $3`, schemaName(d.ID), class, column).Scan(&c)
	return c, err
}

// RefIndexNameForTest returns the name of the backlink index of field of
// class's table.
func RefIndexNameForTest(class, field string) string { return refIndexName(class, field) }

// IndexValidForTest reports whether index name of database d exists and
// is valid (a concurrent build that failed leaves it invalid).
func (db *DB) IndexValidForTest(ctx context.Context, d *sluice.Database, name string) (exists, valid bool, err error) {
	err = db.pool.QueryRow(ctx, `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schemaName(d.ID), name).Scan(&valid)
	if err == pgx.ErrNoRows {
		return false, false, nil
	}
	return err == nil, valid, err
}

// MigrateWithForTest is Migrate with one more migration after this
// binary's, of sql (readable by this binary: an expand one).
func (db *DB) MigrateWithForTest(ctx context.Context, sql string) (int, error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, err
	}
	v := len(ms) + 1
	ms = append(ms, migration{version: v, name: fmt.Sprintf("%04d_test.sql", v), sql: sql, readableBy: len(ms)})
	return db.migrate(ctx, ms, v)
}

// RecordLevelForTest is the capture level a recorded capture names.
func RecordLevelForTest(record string) int { return recordLevel(record) }

// CaptureLevelForTest is this binary's capture level.
const CaptureLevelForTest = captureLevel

// DeadlockedForTest reports whether err is a write's that Postgres ended
// as one side of a deadlock.
func DeadlockedForTest(err error) bool { return deadlocked(err) }

// StoredReadForTest makes fn be told the rows and the bytes of text each
// read of RewriteStored holds.
func StoredReadForTest(fn func(rows, bytes int)) Option {
	return func(o *options) { o.storedRead = fn }
}

// PruneBatchForTest makes each transaction of a database's prune delete
// commits worth at most n rows (see pruneBatchRows).
func PruneBatchForTest(n int) Option {
	return func(o *options) { o.pruneBatch = n }
}

// HistoryScanRowsForTest makes a page of a document's history, and
// DocumentChangeAfter's each run, read at most n rows of the log (see
// HistoryScanRows).
func HistoryScanRowsForTest(n int) Option {
	return func(o *options) { o.historyScanRows = n }
}

// StoredBytesForTest is storedBytes, the most bytes of text a read of
// RewriteStored holds when it holds more than one row.
const StoredBytesForTest = storedBytes

// ReadBytesLeftForTest returns what ctx's LimitReads has left (it may be
// below 0 once a read passed it).
func ReadBytesLeftForTest(ctx context.Context) int64 {
	return readBudgetOf(ctx).left.Load()
}

// RefIndexReadForTest makes BuildReferenceIndexes call fn with each
// database's id once it read the database's schema, before it builds.
func RefIndexReadForTest(fn func(dbID int64)) Option {
	return func(o *options) { o.refIndexRead = fn }
}

// RefIndexLockWaitForTest makes BuildReferenceIndexes wait at most d for
// a lock (see refIndexLockTimeout).
func RefIndexLockWaitForTest(d time.Duration) Option {
	return func(o *options) { o.refIndexLockWait = d }
}

// IndexNameForTest returns the name of the @index on fields of class's
// table.
func IndexNameForTest(class string, fields ...string) string {
	return indexName(class, sluice.Index{Fields: fields})
}

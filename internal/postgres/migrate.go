package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/migrations"
)

type migration struct {
	version int
	name    string
	sql     string
	// readableBy is the oldest schema version a binary may know and still
	// run on the database once this migration is applied (its header
	// "-- sluice:readable-by N"; its own version without one). See
	// migrations/0010_rolling_upgrades.sql.
	readableBy int
}

// readableByHeader declares an expand migration: binaries that know at
// least its number of migrations may run beside it.
const readableByHeader = "-- sluice:readable-by "

// readableBy returns what the header of migration m says, or m's version.
func readableBy(name string, version int, sql string) (int, error) {
	for _, line := range strings.Split(sql, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), readableByHeader)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(rest))
		if err != nil || n < rollingSince || n > version {
			return 0, fmt.Errorf("migration %s: %s%s: want a schema version from %d to %d", name, readableByHeader, rest, rollingSince, version)
		}
		return n, nil
	}
	return version, nil
}

// rollingSince is the migration that brought readable_by: binaries that
// know fewer migrations never read it, and refuse a newer database.
const rollingSince = 10

func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_name.sql", e.Name())
		}
		body, err := fs.ReadFile(migrations.FS, e.Name())
		if err != nil {
			return nil, err
		}
		rb, err := readableBy(e.Name(), v, string(body))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(body), readableBy: rb})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.name, i+1)
		}
	}
	return out, nil
}

// LatestVersion returns the schema version this binary migrates to.
func LatestVersion() int {
	ms, err := loadMigrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// Migrate applies every migration the database lacks, each in one
// transaction with its version row, holding a lock (locks.go) so
// concurrent starts apply each migration once. A database migrated by a newer binary
// is refused unless every migration this one lacks says it may run beside
// them (readable_by, see migrations/0010_rolling_upgrades.sql): then
// nothing is applied. It refuses a database that is Sluice's as another
// Postgres role. Then it gives every database's tables the capture
// triggers their schema asks for, unless a newer Sluice made them
// (capture.go). It returns the number of migrations applied.
func (db *DB) Migrate(ctx context.Context) (int, error) {
	n, err := db.migrateTo(ctx, LatestVersion())
	if err != nil {
		return n, err
	}
	role, err := db.checkWriterRole(ctx)
	if err != nil {
		return n, err
	}
	_, err = db.ensureCapture(ctx, role, true)
	return n, err
}

// migrateTo is Migrate up to version target (tests start older schemas).
func (db *DB) migrateTo(ctx context.Context, target int) (int, error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, err
	}
	return db.migrate(ctx, ms, target)
}

// migrate applies migrations ms up to version target. Each migration's
// waits for table locks are bounded by lockTimeout: many take an ACCESS
// EXCLUSIVE lock (ALTER TABLE), which queues behind every transaction
// using the table, and every write on the table, this replica's and the
// older ones' still serving, queues behind it. One that times out is
// rolled back, its locks released, and tried again (retryLocked, logging
// the sessions it waited for) until ctx ends.
func (db *DB) migrate(ctx context.Context, ms []migration, target int) (int, error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	// Migrations are exempt from statement_timeout: one may rewrite a
	// large table, and a replica starting meanwhile waits for the lock.
	// The session's default comes back before the connection returns to
	// the pool (deferred first, so it runs after the unlock).
	defer conn.Exec(context.WithoutCancel(ctx), "RESET statement_timeout") //nolint:errcheck // a broken connection is not reused
	if _, err := conn.Exec(ctx, "SET statement_timeout = 0"); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	if err := checkEncoding(ctx, conn); err != nil {
		return 0, err
	}
	if err := ensureLocks(ctx, conn); err != nil {
		return 0, fmt.Errorf("migrate: make schema sluice and its locks' table: %w", err)
	}
	release, err := db.holdLock(ctx, lockMigrate)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	defer release()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS sluice.schema_migrations (
			version integer PRIMARY KEY,
			name text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, fmt.Errorf("migrate: create version table: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM sluice.schema_migrations").Scan(&current); err != nil {
		return 0, fmt.Errorf("migrate: read version: %w", err)
	}
	if current > len(ms) {
		// A newer binary migrated the database: this one may run beside
		// it (a rolling upgrade) only if every migration it lacks was an
		// expand one.
		readable := current
		if current >= rollingSince {
			if err := conn.QueryRow(ctx, "SELECT readable_by FROM sluice.schema_migrations WHERE version = $1", current).Scan(&readable); err != nil {
				return 0, fmt.Errorf("migrate: read readable_by: %w", err)
			}
		}
		if readable > len(ms) {
			return 0, fmt.Errorf("the database is at schema version %d, which needs a sluice binary that knows at least %d, but this one only knows %d: upgrade sluice", current, readable, len(ms))
		}
		db.logger.Warn("the database was migrated by a newer sluice; this binary runs beside it (a rolling upgrade): upgrade it too",
			"schema_version", current, "readable_by", readable, "known", len(ms))
		return 0, nil
	}
	readable := 0
	if current >= rollingSince {
		if err := conn.QueryRow(ctx, "SELECT readable_by FROM sluice.schema_migrations WHERE version = $1", current).Scan(&readable); err != nil {
			return 0, fmt.Errorf("migrate: read readable_by: %w", err)
		}
	}
	applied := 0
	for _, m := range ms[current:max(current, target)] {
		readable = max(readable, m.readableBy)
		err := db.retryLocked(ctx, "migration "+m.name, func() error {
			return db.namingBlockers(ctx, conn.Conn().PgConn().PID(), func() error {
				return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					if err := setLockTimeout(ctx, tx); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, m.sql); err != nil {
						return err
					}
					if m.version < rollingSince {
						_, err := tx.Exec(ctx, "INSERT INTO sluice.schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name)
						return err
					}
					_, err := tx.Exec(ctx, "INSERT INTO sluice.schema_migrations (version, name, readable_by) VALUES ($1, $2, $3)", m.version, m.name, readable)
					return err
				})
			})
		})
		if err != nil {
			return applied, fmt.Errorf("migrate: apply %s: %w", m.name, err)
		}
		db.logger.Info("applied migration", "version", m.version, "name", m.name)
		applied++
	}
	return applied, nil
}

// checkEncoding returns an error unless the database is encoded in UTF8,
// before Sluice makes or reads anything there. Sluice's text is UTF-8
// (the API refuses anything else), and its checks of what other roles
// write in SQL rely on Postgres refusing what is not: under SQL_ASCII,
// Postgres checks no byte of the text it stores, and a role granted
// writes stored ids and strings that are not UTF-8, which Sluice read
// with U+FFFD in their place (two documents whose ids differ in such a
// byte were listed with one id, and the API could reach neither by it).
// Under another encoding (LATIN1…), Postgres refuses the API's text that
// the encoding lacks.
func checkEncoding(ctx context.Context, q querier) error {
	var enc, name string
	if err := q.QueryRow(ctx, "SELECT current_setting('server_encoding'), current_database()").Scan(&enc, &name); err != nil {
		return fmt.Errorf("read the database's encoding: %w", err)
	}
	if enc == "UTF8" {
		return nil
	}
	why := "Postgres would refuse the API's text that " + enc + " lacks"
	if enc == "SQL_ASCII" {
		why = "Postgres would take text that is not UTF-8 from any role writing in SQL"
	}
	return fmt.Errorf("database %s is encoded in %s: Sluice needs one encoded in UTF8 (under %s, %s): "+
		"make one with CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0, and restore a dump of this one into it",
		pgx.Identifier{name}.Sanitize(), enc, enc, why)
}

// SchemaVersion returns the migration version the database is at (0 when
// Sluice never ran on it).
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var exists bool
	if err := db.pool.QueryRow(ctx, "SELECT to_regclass('sluice.schema_migrations') IS NOT NULL").Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v int
	err := db.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM sluice.schema_migrations").Scan(&v)
	return v, err
}

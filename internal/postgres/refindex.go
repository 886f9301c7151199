package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice"
)

// BuildReferenceIndexes builds the backlink indexes (refIndexSQL) that
// the tables of existing databases lack, and returns how many it built.
// Tables get them with their class; this is for tables made before Sluice
// made them, and for an index whose concurrent build was interrupted
// (Postgres keeps it, invalid: it is dropped and built again).
//
// Why not a migration: which text columns hold references is known only
// from each database's schema (SDL), not from the catalog. Why not in the
// foreground at start, as capture triggers are made: building an index
// inside a transaction blocks writes to its table while it is built,
// which on a large table would stop writes during every replica's start
// of an upgrade. So the daemon runs this in the background once it
// serves: each index is built with CREATE INDEX CONCURRENTLY, which lets
// reads and writes go on; until it is built, a backlink of that table
// reads the table. Processes take turns under a lock (locks.go), so the
// second to start finds the work done. It stops when ctx ends (an index
// left half-built is finished by the next start).
func (db *DB) BuildReferenceIndexes(ctx context.Context) (int, error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return 0, mapError(err)
	}
	defer conn.Release()
	// Exempt from statement_timeout, as migrations are: building an
	// index of a large table takes as long as it takes. Its waits are
	// bounded (refIndexLockTimeout). The session's defaults come back
	// before the connection returns to the pool.
	defer conn.Exec(context.WithoutCancel(ctx), "RESET statement_timeout; RESET lock_timeout") //nolint:errcheck // a broken connection is not reused
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET statement_timeout = 0; SET lock_timeout = %d", db.opts.refIndexLockWait.Milliseconds())); err != nil {
		return 0, mapError(err)
	}
	release, err := db.holdLock(ctx, lockReferenceIndexes)
	if err != nil {
		return 0, err
	}
	defer release()

	// The ids first, and each database's schema when its turn comes:
	// holding every schema at once would size this by the databases.
	rows, err := conn.Query(ctx, "SELECT id FROM sluice.databases ORDER BY id")
	if err != nil {
		return 0, mapError(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, mapError(err)
	}
	built := 0
	var standIns []error
	for _, id := range ids {
		// A schema change of the database between the read of its
		// schema and a build (a column retyped or dropped, a table
		// dropped) fails that build; the database is done again with
		// its new schema, and the others still get theirs.
		for try := 1; ; try++ {
			n, version, standIn, err := db.buildReferenceIndexesOf(ctx, conn, id)
			built += n
			if standIn != nil {
				standIns = append(standIns, fmt.Errorf("backlink indexes of database %d: %w", id, standIn))
			}
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return built, err
			}
			now, ok, verr := schemaVersionOf(ctx, conn, id)
			if verr != nil {
				return built, verr
			}
			if !ok {
				break // deleted meanwhile
			}
			if now == version {
				return built, err
			}
			if try == refIndexTries {
				standIns = append(standIns, fmt.Errorf("backlink indexes of database %d: its schema changed during each of %d tries; the next start builds them: %w", id, try, err))
				break
			}
		}
	}
	return built, errors.Join(standIns...)
}

// refIndexTries bounds how many times BuildReferenceIndexes tries a
// database whose schema changes while it builds.
const refIndexTries = 3

// schemaVersionOf returns database id's schema version, and false when
// the database is gone.
func schemaVersionOf(ctx context.Context, conn *pgxpool.Conn, id int64) (int, bool, error) {
	var v int
	err := conn.QueryRow(ctx, "SELECT schema_version FROM sluice.commit_counters WHERE db_id = $1", id).Scan(&v)
	if err == pgx.ErrNoRows {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, mapError(err)
	}
	return v, true, nil
}

// buildReferenceIndexesOf builds the backlink indexes that database id's
// tables lack (BuildReferenceIndexes), and returns how many it built and
// the schema version it read (0 when the database is gone). standIn is
// why it built none when a relation of another role's stands in for one
// (checkDatabaseSchema).
func (db *DB) buildReferenceIndexesOf(ctx context.Context, conn *pgxpool.Conn, id int64) (built, version int, standIn, err error) {
	var sdl string
	err = conn.QueryRow(ctx, `SELECT d.schema_sdl, c.schema_version FROM sluice.databases d
		JOIN sluice.commit_counters c ON c.db_id = d.id WHERE d.id = $1`, id).Scan(&sdl, &version)
	if err == pgx.ErrNoRows {
		return 0, 0, nil, nil // deleted meanwhile
	}
	if err != nil {
		return 0, 0, nil, mapError(err)
	}
	s, err := parseStored(id, sdl)
	if err != nil {
		return 0, version, nil, err
	}
	if hook := db.opts.refIndexRead; hook != nil {
		hook(id)
	}
	// A relation of another role's named as an index would be taken
	// for it by IF NOT EXISTS (checkDatabaseSchema): that database
	// waits for a superuser to drop it; the others are built.
	if err := checkDatabaseSchema(ctx, conn, id); err != nil {
		return 0, version, err, nil
	}
	// The valid flag of each index of the database's tables.
	valid := map[string]bool{}
	rows, err := conn.Query(ctx, `SELECT c.relname, i.indisvalid FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1`, schemaName(id))
	if err != nil {
		return 0, version, nil, mapError(err)
	}
	for rows.Next() {
		var name string
		var ok bool
		if err := rows.Scan(&name, &ok); err != nil {
			rows.Close()
			return 0, version, nil, mapError(err)
		}
		valid[name] = ok
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, version, nil, mapError(err)
	}
	for _, name := range s.Order {
		c := s.Classes[name]
		if c.Kind != sluice.KindDocument {
			continue
		}
		for _, f := range refIndexed(c) {
			ix := refIndexName(c.Name, f.Name)
			ok, exists := valid[ix]
			if exists && ok {
				continue
			}
			stmts := []string{refIndexSQL(id, c, f, true)}
			if exists {
				stmts = append([]string{"DROP INDEX CONCURRENTLY IF EXISTS " + ident(schemaName(id)) + "." + ident(ix)}, stmts...)
			}
			var err error
			for _, stmt := range stmts {
				if _, err = conn.Exec(ctx, stmt); err != nil {
					break
				}
			}
			if gone(err) {
				continue // the table or column went with a schema change meanwhile
			}
			if isLockTimeout(err) {
				// Not mapError's Conflict, which would not say what
				// it waited for.
				return built, version, nil, fmt.Errorf("backlink index %s of database %d: waited longer than %s for the transactions older than the build (any role's, such as one left open) to end; the next start builds it again: %w", ix, id, db.opts.refIndexLockWait, err)
			}
			if err != nil {
				return built, version, nil, fmt.Errorf("backlink index %s of database %d: %w", ix, id, mapError(err))
			}
			built++
			db.logger.Info("built a backlink index", "database", id, "class", c.Name, "field", f.Name)
		}
	}
	return built, version, nil, nil
}

// refIndexLockTimeout bounds each wait of BuildReferenceIndexes for a
// lock. CREATE INDEX CONCURRENTLY waits for every transaction of the
// database whose snapshot is older than its build, any role's, holding
// meanwhile a lock on the table that a schema change of its database
// waits for: one role's idle transaction (REPEATABLE READ, or one that
// stays open) held the build, and that database's schema changes (503
// after statement_timeout), for as long as it liked. Past the timeout
// the build stops (its index left invalid), with a warning in the log;
// the next start builds it again, and until then backlinks of that table
// read the table.
const refIndexLockTimeout = 30 * time.Second

// gone reports whether err says a table or column no longer exists.
func gone(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "42703" || pe.Code == "3F000")
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Replicas take turns at what one of them must do alone (migrating,
// bootstrapping, building backlink indexes) under row locks on
// sluice.locks, one row per such task. Only Sluice's role may lock its
// rows: no other role has a privilege on the table, nor USAGE on schema
// sluice (migration 14). Advisory locks, which Sluice used before, live
// in one space shared by every role that may connect to the database,
// and pg_locks shows every key held: any such role could take the keys
// and stop replicas from starting.
//
// The table is made before migrations run (as sluice.schema_migrations
// is), since the first lock taken is the migrations' own.

// Names of the rows of sluice.locks.
const (
	lockMigrate          = "migrate"
	lockBootstrap        = "bootstrap"
	lockReferenceIndexes = "reference_indexes"
)

// schemaSQL makes schema sluice, owned by Sluice's role, unless it
// exists.
const schemaSQL = `CREATE SCHEMA IF NOT EXISTS sluice AUTHORIZATION CURRENT_USER`

// locksSQL makes sluice.locks with its rows, unless they exist.
const locksSQL = `CREATE TABLE IF NOT EXISTS sluice.locks (name text PRIMARY KEY);
INSERT INTO sluice.locks (name) VALUES ('migrate'), ('bootstrap'), ('reference_indexes') ON CONFLICT DO NOTHING`

// ensureLocks makes schema sluice, checks that Sluice's role owns it and
// all it holds (checkOwnSchema: a schema another role made beforehand is
// refused before Sluice runs anything of it, a trigger on sluice.locks
// say), then makes sluice.locks and its rows. No other role may create in
// a schema Sluice's role owns, so nothing can be added between the check
// and the rest. Replicas starting together on a new database may both
// make the schema or the table: the one that loses fails on a unique
// index of the catalog, and tries again, finding them.
func ensureLocks(ctx context.Context, q querier) error {
	for attempt := 1; ; attempt++ {
		_, err := q.Exec(ctx, schemaSQL)
		if err == nil {
			if err := checkOwnSchema(ctx, q, "sluice"); err != nil {
				return err
			}
			_, err = q.Exec(ctx, locksSQL)
		}
		var pe *pgconn.PgError
		if err == nil || attempt == 5 || !errors.As(err, &pe) || (pe.Code != "23505" && pe.Code != "42P06" && pe.Code != "42P07") {
			return err
		}
	}
}

// holdLock waits for the row lock name of sluice.locks and holds it, in a
// transaction of its own on a connection of its own, until release is
// called, or until that connection ends (the process died): work done
// meanwhile on other connections, in transactions of their own or in
// none (CREATE INDEX CONCURRENTLY), is done by one replica at a time.
// Neither the wait nor the holding is bounded by the session's timeouts.
func (db *DB) holdLock(ctx context.Context, name string) (release func(), err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, mapError(err)
	}
	// The simple protocol (no parameters; name is Sluice's own): a
	// statement of the extended protocol would leave its portal, and the
	// portal's snapshot, open until the transaction ends, and CREATE INDEX
	// CONCURRENTLY waits for every older snapshot.
	tag, err := conn.Exec(ctx, "BEGIN; SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0; "+
		"SELECT name FROM sluice.locks WHERE name = "+quoteLiteral(name)+" FOR UPDATE")
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("sluice.locks has no row %q", name)
	}
	if err != nil {
		conn.Release() // closed: it may be inside the transaction
		return nil, fmt.Errorf("take the lock %q: %w", name, mapError(err))
	}
	return func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		conn.Release()
	}, nil
}

// LockBootstrap takes, in t's transaction, the lock that serializes the
// bootstraps of replicas starting together, waiting for the transaction
// that holds it.
func (t *Tx) LockBootstrap(ctx context.Context) error {
	var name string
	return mapError(t.tx.QueryRow(ctx, "SELECT name FROM sluice.locks WHERE name = $1 FOR UPDATE", lockBootstrap).Scan(&name))
}

// lockTimeout bounds each wait for a table lock of the statements that
// change Sluice's own tables or a database's: outside a request
// (migrations, making capture triggers), and in one (a schema change or
// a database's deletion, see LockForSchemaChange). They take ACCESS EXCLUSIVE locks, which
// wait for every transaction using the table, and every statement that
// asks for the table after them, writes included, queues behind them:
// without a bound one long transaction (a report, a forgotten psql
// session) would stop every write on the table for as long as it lasts,
// on every replica. With it, they give up after lockTimeout and are tried
// again (retryLocked), or the request answers that it could not have its
// locks (boundLockWaits), and the writes queued behind them go on
// meanwhile.
const lockTimeout = 2 * time.Second

// setLockTimeout sets lockTimeout for the rest of q's transaction.
func setLockTimeout(ctx context.Context, q querier) error {
	_, err := q.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", lockTimeout.Milliseconds()))
	return err
}

// isLockTimeout reports whether err is Postgres' lock_not_available
// (lock_timeout ran out, or NOWAIT), as the driver's error or as mapError
// shows it.
func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "55P03"
	}
	ce, ok := errors.AsType[concurrentError](err)
	return ok && ce.code == "55P03"
}

// retryLocked runs fn (a transaction that calls setLockTimeout) until it
// ends otherwise than by a lock timeout, waiting between tries (100 ms,
// doubled up to 5 s: the writes that queued behind its locks run
// meanwhile), and logging each timeout as a warning, with the sessions it
// waited for (namingBlockers). It gives up when ctx ends.
func (db *DB) retryLocked(ctx context.Context, what string, fn func() error) error {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if !isLockTimeout(err) {
			return err
		}
		db.logger.Warn(what+" waits for locks other sessions hold; trying again", "attempt", attempt, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// namingBlockers runs fn, a transaction on the backend pid, and when it
// fails for a lock timeout adds to its error the sessions that blocked
// it: what an operator needs to end the wait.
func (db *DB) namingBlockers(ctx context.Context, pid uint32, fn func() error) error {
	names, err := db.watchBlockers(ctx, pid, fn)
	if isLockTimeout(err) && len(names) > 0 {
		return fmt.Errorf("%w; waiting for %s", err, strings.Join(names, ", "))
	}
	return err
}

// watchBlockers runs fn, a transaction on the backend pid, and returns
// with its error the sessions that blocked it, if it was blocked. They
// are read once, on a connection of the pool, halfway through
// lockTimeout (when fn still runs), so a quick fn costs nothing.
func (db *DB) watchBlockers(ctx context.Context, pid uint32, fn func() error) ([]string, error) {
	watchCtx, stop := context.WithCancel(ctx)
	found := make(chan []string, 1)
	go func() {
		var names []string
		defer func() { found <- names }()
		t := time.NewTimer(lockTimeout / 2)
		defer t.Stop()
		select {
		case <-watchCtx.Done():
			return
		case <-t.C:
		}
		rows, err := db.pool.Query(watchCtx, `SELECT format('pid %s (application %L, user %L, %s, transaction started %s)',
				pid, application_name, usename, state, date_trunc('second', xact_start))
			FROM pg_stat_activity WHERE pid = ANY (pg_blocking_pids($1)) ORDER BY pid`, int32(pid))
		if err != nil {
			return
		}
		names, _ = pgx.CollectRows(rows, pgx.RowTo[string])
	}()
	err := fn()
	stop()
	return <-found, err
}

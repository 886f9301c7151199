package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/sluice-dev/sluice"
)

// Heads returns the head of every database's commit log, and the access
// log's version, from one snapshot: one cheap read of the counter rows, for
// the change feed's periodic poll.
func (db *DB) Heads(ctx context.Context) ([]sluice.Head, int64, error) {
	return db.heads(ctx, nil)
}

// HeadsOf is Heads of the databases ids only (none: the access log's
// version alone): one notification's worth, not every database's.
func (db *DB) HeadsOf(ctx context.Context, ids []int64) ([]sluice.Head, int64, error) {
	if ids == nil {
		ids = []int64{}
	}
	return db.heads(ctx, ids)
}

// heads reads the heads of the databases ids (nil: all) and the access
// log's version.
func (db *DB) heads(ctx context.Context, ids []int64) ([]sluice.Head, int64, error) {
	// The union's first row carries the access version (id 0 is no
	// database), so there is a row even without databases.
	q := `SELECT 0, '', ` + accessVersionSQL + `, 0
		UNION ALL
		SELECT d.id, d.epoch, c.last_seq, c.pruned_seq
		FROM sluice.databases d JOIN sluice.commit_counters c ON c.db_id = d.id`
	var args []any
	if ids != nil {
		q += ` WHERE d.id = ANY($1)`
		args = append(args, ids)
	}
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, 0, mapError(err)
	}
	defer rows.Close()
	var out []sluice.Head
	var access int64
	for rows.Next() {
		var h sluice.Head
		if err := rows.Scan(&h.DatabaseID, &h.Epoch, &h.LastSeq, &h.PrunedSeq); err != nil {
			return nil, 0, mapError(err)
		}
		if h.DatabaseID == 0 {
			access = h.LastSeq
			continue
		}
		out = append(out, h)
	}
	return out, access, mapError(rows.Err())
}

// ResetConnections closes the pool's idle connections, and those in use
// once released, so that the statements after it run on new ones: the
// change feed's way to tell connections Postgres ended (which fail as an
// unreachable server does, each once) from an outage.
func (db *DB) ResetConnections() { db.pool.Reset() }

// listenerName is the application_name of listening connections, so that
// operators (and TerminateListeners) can tell them apart.
const listenerName = "sluice changefeed"

// Listener is a dedicated connection listening on the commits channel
// (notify.go). It is not safe for concurrent use: one goroutine owns it.
type Listener struct {
	conn *pgx.Conn
}

// Listen opens a dedicated connection to the server db is connected to and
// starts listening on the commits channel. Close it when done.
func (db *DB) Listen(ctx context.Context) (*Listener, error) {
	conn, _, err := db.listenConn(ctx, listenerName, commitsChannel)
	if err != nil {
		return nil, err
	}
	return &Listener{conn: conn}, nil
}

// listenConn opens a dedicated connection named appName to the server db
// is connected to, listening on the channels whose sluice.settings keys
// are keys, and returns it with their names.
func (db *DB) listenConn(ctx context.Context, appName string, keys ...string) (*pgx.Conn, []string, error) {
	cfg, err := pgx.ParseConfig(db.ConnString())
	if err != nil {
		return nil, nil, fmt.Errorf("parse database url: %w", err)
	}
	db.opts.configure(&cfg.Config, appName)
	cfg.RuntimeParams["application_name"] = appName
	// A listener's backend is idle while Wait blocks: there is no
	// statement for a cancel request to cancel, so configure's watcher
	// would only wait out cancelGrace before closing the connection, and
	// every shutdown took 5 s longer. Its statements (LISTEN) are instant,
	// so a context that ends sets the socket's deadline at once.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	if err := db.opts.checkUp(); err != nil {
		return nil, nil, fmt.Errorf("connect for listen: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connect for listen: %w", err)
	}
	names := make([]string, len(keys))
	for i, key := range keys {
		err := conn.QueryRow(ctx, "SELECT "+channelSQL("$1"), key).Scan(&names[i])
		if err == nil {
			// The LISTEN is run inside a DO block that reads the name,
			// not sent as "LISTEN <name>": pg_stat_activity shows the
			// text of an idle connection's last statement, to any role
			// granted pg_monitor or pg_read_all_stats, and a listener is
			// idle for as long as it listens. key is one of Sluice's
			// constants (notify.go), never a client's.
			// pg_stat_statements, with track = all, records the LISTEN
			// nested in the block with its text, for the same roles to
			// read: the block turns its tracking of utility statements
			// off for its own transaction first. Only a superuser may
			// (the setting is a superuser's): as another role the LISTEN
			// is recorded (docs/security.md says so).
			_, err = conn.Exec(ctx, `DO $$BEGIN
				BEGIN
					PERFORM pg_catalog.set_config('pg_stat_statements.track_utility', 'off', true);
				EXCEPTION WHEN insufficient_privilege THEN NULL;
				END;
				EXECUTE format('LISTEN %I', `+channelSQL(quoteLiteral(key))+`);
			END$$`)
		}
		if err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			return nil, nil, fmt.Errorf("listen on the %s: %w", strings.ReplaceAll(key, "_", " "), err)
		}
	}
	return conn, names, nil
}

// Wait blocks until a notification arrives and returns the id of the
// database that committed. A payload that is not a database id gives 0. It
// returns an error when ctx ends or the connection fails; the Listener is
// then unusable.
func (l *Listener) Wait(ctx context.Context) (int64, error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return 0, err
	}
	id, _ := strconv.ParseInt(n.Payload, 10, 64)
	return id, nil
}

// Close closes the connection.
func (l *Listener) Close(ctx context.Context) error { return closeListener(ctx, l.conn) }

// closeListener closes a listening connection, after it stops listening:
// a notification the server sends while the connection closes makes its
// backend fail writing it, and log "connection to client lost". After a
// Wait that ctx ended (a deadline, which leaves the connection usable)
// the UNLISTEN also reads whatever the server sent meanwhile; on a
// connection that failed it fails at once.
func closeListener(ctx context.Context, conn *pgx.Conn) error {
	uctx, cancel := context.WithTimeout(ctx, time.Second)
	_, _ = conn.Exec(uctx, "UNLISTEN *")
	cancel()
	return conn.Close(ctx)
}

// TerminateListeners ends every listening connection of every daemon on
// this database (they reconnect) and returns how many it ended. It exists
// for failure tests and for operators.
func (db *DB) TerminateListeners(ctx context.Context) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, listenerName).Scan(&n)
	return n, mapError(err)
}

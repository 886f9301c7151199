package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schemacache"
)

// querier is satisfied by a pool, a connection and a transaction, so helpers
// compose inside a caller's transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DB is the storage handle. It is safe for concurrent use.
type DB struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	opts   options
	uids   uidPool
	maps   typeMaps
	groups groups // group commit, by database (group.go)
	// keyUses bounds each user's Idempotency-Keys (idempotency_bound.go).
	keyUses keyUses
	// versions and parsed hold what is known of databases' schema
	// versions (versions.go).
	versions versionLists
	parsed   *schemacache.Cache
	// shares counts the connections each user's requests hold (share.go).
	shares *userShares
	// superseded holds, by commit uid, the changes of large commits
	// that a later change of the same document follows (supersede.go).
	superseded supersededCache
	// role is Sluice's Postgres role (capture.go), read once.
	roleMu sync.Mutex
	role   string
}

// DefaultStatementTimeout is the statement timeout of a DB opened without
// the StatementTimeout option; it matches the statement_timeout setting's
// default.
const DefaultStatementTimeout = 30 * time.Second

// cancelGrace is how long a statement whose context ended may take to
// stop after Postgres was asked to cancel it, before its connection is
// closed: Postgres checks for a cancel request often, so this is only
// reached when it cannot be reached at all.
const cancelGrace = 5 * time.Second

type options struct {
	statementTimeout time.Duration
	// idleInTxTimeout is idle_in_transaction_session_timeout (see
	// IdleInTransactionTimeout); 0: none.
	idleInTxTimeout time.Duration
	onCommit        func(*sluice.Commit) // see OnCommit
	up              func() bool          // see Up
	owner           Owner                // see Owners
	// connectTimeout, when not 0, bounds each connection attempt: the
	// connection string set none (see defaultConnectTimeout).
	connectTimeout time.Duration
	// batchLockWait is batchLockWait, longer in tests that must not
	// depend on how fast a loaded machine releases a lock.
	batchLockWait time.Duration
	// storedRead, when not nil, is told the rows and the bytes of text
	// each read of RewriteStored holds (tests: StoredReadForTest).
	storedRead func(rows, bytes int)
	// pruneBatch is pruneBatchRows, smaller in tests that prune a few
	// commits in several batches.
	pruneBatch int
	// refIndexLockWait is refIndexLockTimeout, shorter in tests.
	refIndexLockWait time.Duration
	// refIndexRead, when not nil, is called by BuildReferenceIndexes
	// once it read a database's schema, before it builds (tests: a
	// schema change made right then).
	refIndexRead func(dbID int64)
	// historyScanRows is HistoryScanRows, smaller in tests that read a
	// document's history in several runs of the log.
	historyScanRows int
}

// Option adjusts how Open connects.
type Option func(*options)

// StatementTimeout sets Postgres' statement_timeout on every connection:
// any statement running longer is cancelled by Postgres and its request
// fails with an Unavailable error. Zero means no limit.
func StatementTimeout(d time.Duration) Option {
	return func(o *options) { o.statementTimeout = d }
}

// IdleInTransactionTimeout sets Postgres' idle_in_transaction_session_timeout
// on every connection: a transaction whose connection sends
// nothing for longer (its process frozen, or cut off from Postgres while
// its TCP connection stays up) is ended by Postgres, its session closed,
// and the locks it held are let go. It must be longer than any wait of
// Sluice's own between two statements of a transaction (the daemon derives
// it from the settings that bound those waits). Zero, the default, means
// no limit. The transactions of the locks that make replicas
// take turns (holdLock) are exempt.
func IdleInTransactionTimeout(d time.Duration) Option {
	return func(o *options) { o.idleInTxTimeout = d }
}

// Up makes every new connection fail at once, as unavailable, while up
// reports false: the daemon's embedded Postgres says so while a
// supervised restart is under way, and connecting then only fills the
// server's log with its refusals.
func Up(up func() bool) Option {
	return func(o *options) { o.up = up }
}

// errNotUp is the error of a connection refused by the Up function.
var errNotUp = errors.New("the database server is restarting")

// checkUp returns an unavailable error when the Up function (if any)
// reports false.
func (o options) checkUp() error {
	if o.up == nil || o.up() {
		return nil
	}
	return &unavailableError{err: errNotUp}
}

// Open connects to the Postgres server at url and checks that it answers.
// Every connection it opens (the pool's and Listen's) runs with JIT
// compilation off and a statement timeout (DefaultStatementTimeout unless
// an Option says otherwise), and a statement whose context ends is
// cancelled on the server, not only abandoned by the client. Each attempt
// to connect to a host fails after 10 s unless url (or PGCONNECT_TIMEOUT)
// sets connect_timeout. It logs the hosts, database and user it connects
// to (never the password).
func Open(ctx context.Context, url string, logger *slog.Logger, opts ...Option) (*DB, error) {
	o := options{statementTimeout: DefaultStatementTimeout, batchLockWait: batchLockWait, pruneBatch: pruneBatchRows, refIndexLockWait: refIndexLockTimeout, historyScanRows: HistoryScanRows}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, parseURLError(err)
	}
	if cfg.MaxConns < 16 {
		cfg.MaxConns = 16
	}
	if !setsConnectTimeout(url, os.LookupEnv) {
		o.connectTimeout = defaultConnectTimeout
	}
	o.configure(&cfg.ConnConfig.Config, "sluice")
	logger.Info("connecting to postgres", "hosts", strings.Join(hosts(&cfg.ConnConfig.Config), ","),
		"database", cfg.ConnConfig.Database, "user", cfg.ConnConfig.User, "connect_timeout", cfg.ConnConfig.ConnectTimeout,
		"idle_in_transaction_session_timeout", o.idleInTxTimeout)
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error { return o.checkUp() }
	cfg.PrepareConn = notCancelled
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	n := int(cfg.MaxConns)
	shares := userShares{max: n / 4, total: n - n/8, owner: o.owner, held: map[int64]int{}}
	return &DB{pool: pool, logger: logger, opts: o, versions: newVersionLists(), parsed: schemacache.New(parsedEntries, parsedBytes), shares: &shares}, nil
}

// configure sets what every connection of Sluice runs with.
//
// JIT is off: Sluice's statements are short or bounded, so compiling them
// with LLVM only adds latency, and a backend inside JIT compilation ignores
// cancel and terminate requests (an outside tester saw one run on for
// minutes after its client left).
//
// A context that ends sends Postgres a cancel request. pgx's default only
// sets a deadline on the socket, and the backend runs on until it next
// writes to it, which for a long sort or scan is when it is done. The
// connection is then not used again (markCancels, notCancelled).
//
// The search path is pg_catalog alone (pg_temp last, never first): Sluice
// names its own tables and functions with their schemas, and among the
// functions and operators on the path Postgres picks the one whose
// argument types match best, in whatever schema. With public on the path,
// a role that may create there (every role, on a database made before
// Postgres 15) could define unnest(text[]) or to_jsonb of a table's row
// type, and Sluice's statements would run it as Sluice's role, the capture
// off. The settings that shape values as text (numbers, times, intervals)
// are fixed too, whatever the database's or role's defaults say: images
// are JSON rendered by Postgres, and Sluice parses them.
func (o options) configure(cfg *pgconn.Config, appName string) {
	cfg.RuntimeParams["jit"] = "off"
	cfg.RuntimeParams["search_path"] = "pg_catalog, pg_temp"
	cfg.RuntimeParams["extra_float_digits"] = "3"
	cfg.RuntimeParams["TimeZone"] = "UTC"
	cfg.RuntimeParams["DateStyle"] = "ISO"
	cfg.RuntimeParams["IntervalStyle"] = "postgres"
	// Sluice's own writes record themselves; the capture triggers skip
	// them by this setting (capture.go).
	cfg.RuntimeParams[writerSetting] = "on"
	cfg.RuntimeParams["statement_timeout"] = millis(o.statementTimeout)
	// A transaction left idle by a replica frozen (SIGSTOP, a paused VM)
	// or cut off keeps its locks until its connection ends, and the
	// kernel of a stopped process still answers TCP keepalives: a schema
	// change's, holding a database's counter row and tables, made every
	// other replica's writes of the database fail after statement_timeout
	// for as long as that replica slept.
	// Set even when 0, as statement_timeout is: the waits it must stay
	// above are Sluice's, whatever the server's default says.
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = millis(o.idleInTxTimeout)
	if o.connectTimeout > 0 {
		cfg.ConnectTimeout = o.connectTimeout
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = appName
	}
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		sent := new(atomic.Bool)
		c.CustomData()[cancelledKey] = sent
		return markCancels{&pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelGrace}, sent}
	}
}

// millis returns d as a Postgres setting in milliseconds, at least 1 when
// d is positive (0 would mean no limit).
func millis(d time.Duration) string {
	ms := d.Milliseconds()
	if d > 0 && ms == 0 {
		ms = 1
	}
	return strconv.FormatInt(ms, 10)
}

// A cancel request reaches Postgres on a connection of its own, and the
// backend it names may get it after the statement it was sent for has
// ended: it then cancels whatever that backend runs next. pgx waits 100
// ms before the connection is used again, which a loaded machine outran:
// a request on a reused connection failed with its statement "cancelled
// by an operator". A connection a cancel request was sent for is closed
// instead of being handed out again (the pool's PrepareConn,
// notCancelled), and the pool takes or opens another. (The check is made
// on acquiring, not on releasing: pgx runs an AfterRelease hook in a
// goroutine of its own on every release, and returns the connection to
// the pool only once it has run.)

// cancelledKey names, in a connection's CustomData, the flag set once a
// statement's context ended while it ran (pgx then sends the cancel
// request, unless the statement ends first).
const cancelledKey = "sluice.cancelled"

// markCancels is pgx's cancel-request handler, which also sets the
// connection's flag.
type markCancels struct {
	*pgconn.CancelRequestContextWatcherHandler
	sent *atomic.Bool
}

func (h markCancels) HandleCancel(ctx context.Context) {
	h.sent.Store(true)
	h.CancelRequestContextWatcherHandler.HandleCancel(ctx)
}

// notCancelled is the pool's PrepareConn: it hands a connection out
// unless a statement's context ended while it ran there (false destroys
// the connection, and the pool tries another).
func notCancelled(_ context.Context, c *pgx.Conn) (bool, error) {
	sent, ok := c.PgConn().CustomData()[cancelledKey].(*atomic.Bool)
	return !ok || !sent.Load(), nil
}

// Close closes every connection. It waits for connections in use.
func (db *DB) Close() { db.pool.Close() }

// Ping reports whether Postgres answers.
func (db *DB) Ping(ctx context.Context) error { return db.pool.Ping(ctx) }

// ConnString returns the connection string the pool was opened with, for
// components that need a dedicated connection (the change feed's LISTEN).
func (db *DB) ConnString() string { return db.pool.Config().ConnString() }

// Connections returns the most connections to Postgres db holds at once,
// each a file descriptor: its pool's and the two it listens on (Listen,
// for the change feed, and the webhook deliverer's).
func (db *DB) Connections() int { return int(db.pool.Config().MaxConns) + 2 }

// inTx runs fn in a transaction, committing when it returns nil.
func (db *DB) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return mapError(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return mapError(tx.Commit(ctx))
}

// CreateDatabaseIfMissing creates the Postgres database name (used for the
// embedded server, where Sluice owns the cluster).
func (db *DB) CreateDatabaseIfMissing(ctx context.Context, name string) error {
	var exists bool
	if err := db.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := db.pool.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// uidBlock is how many commit uids a process draws from Postgres at a time.
// A uid only joins a commit to its changes and document rows (it is not an
// order: the sequence number is), so gaps and uids used out of order are
// harmless, and drawing them ahead saves each commit a round trip.
const uidBlock = 64

// uidPool holds commit uids drawn from sluice.commit_uid_seq and not used
// yet.
type uidPool struct {
	mu   sync.Mutex
	free []int64
}

// takeUIDs returns n unused commit uids, drawing more through q when the
// pool runs short.
func (db *DB) takeUIDs(ctx context.Context, q querier, n int) ([]int64, error) {
	p := &db.uids
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) < n {
		rows, err := q.Query(ctx, "SELECT nextval('sluice.commit_uid_seq') FROM generate_series(1, $1)", n-len(p.free)+uidBlock)
		if err != nil {
			return nil, mapError(err)
		}
		more, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, mapError(err)
		}
		p.free = append(p.free, more...)
	}
	out := append([]int64(nil), p.free[:n]...)
	p.free = p.free[n:]
	return out, nil
}

// writerRole returns Sluice's Postgres role, the one the capture triggers
// skip (capture.go).
func (db *DB) writerRole(ctx context.Context) (string, error) {
	db.roleMu.Lock()
	defer db.roleMu.Unlock()
	if db.role == "" {
		if err := db.pool.QueryRow(ctx, "SELECT value FROM sluice.settings WHERE key = 'writer_role'").Scan(&db.role); err != nil {
			return "", fmt.Errorf("read Sluice's role: %w", mapError(err))
		}
	}
	return db.role, nil
}

// parseURLError is the error of a database URL that does not parse,
// without the URL: pgx quotes it with its password hidden as best it can,
// which a URL it cannot parse defeats (password = x, with spaces, was
// shown whole; an unescaped @ showed what followed it). It names the
// setting as the configuration's own errors do ("config: <key>: …"): the
// URL is only ever the database_url setting's.
func parseURLError(err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return fmt.Errorf("config: database_url: %w", err)
	}
	why := pe.Error()
	if i := strings.LastIndex(why, "`: "); i >= 0 {
		why = why[i+len("`: "):]
	} else {
		why = "not a connection string pgx reads"
	}
	return fmt.Errorf("config: database_url: cannot be parsed (the value is not shown: it may hold a password): %s", why)
}

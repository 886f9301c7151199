package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice"
)

// A read answers the position it reflects: every statement of one read
// (a GraphQL query's fields and the documents they reference, a REST
// listing, a page of history) runs in one REPEATABLE READ snapshot, which
// also reads the database's commit counter. Since a commit increments the
// counter as its last statement before COMMIT, the snapshot holds exactly
// the commits up to the counter's value: a client that subscribes from
// that position receives exactly the commits the read did not see.
//
// A Snapshot begins with its first statement, sent with BEGIN and the
// counter's read in one round trip (a pgx batch); the ROLLBACK that ends
// it is one more (Close). A read that said its first statement is its
// only one (OneStatement) needs no transaction: one statement sees one
// snapshot of the database, whatever the isolation level, so the
// counter is read in the statement itself (oneStatementSQL), which costs
// Postgres one statement instead of four, in one round trip.

// Snapshot reads database d in one snapshot. Pass it down with
// WithSnapshot: the DB's read methods for d then run in it. It is used by
// one goroutine at a time; Close it.
type Snapshot struct {
	db   *DB
	d    *sluice.Database
	conn *pgxpool.Conn
	// head is the counter's value in the snapshot, once begun; access
	// the access version it sees (AccessVersion); headStamp the stamp of
	// commit head (zero: none, or not stamped), read with the counter.
	head, access int64
	headStamp    sluice.Stamp
	begun        bool
	// one: the first statement is the only one (OneStatement); ended: it
	// was, and the snapshot is over.
	one, ended bool
	// asOf, when set, is the past its reads read (SetAsOf).
	asOf *AsOf
	// release gives back conn's count among its user's (share.go).
	release func()
}

// OneStatement tells s that its first statement will be its only one, so
// that it ends with it, in the same round trip. A second statement fails.
func (s *Snapshot) OneStatement() { s.one = true }

// Snapshot returns a snapshot of database d, which begins with its first
// statement.
func (db *DB) Snapshot(d *sluice.Database) *Snapshot { return &Snapshot{db: db, d: d} }

type snapshotKey struct{}

// WithSnapshot returns ctx carrying s: reads of s's database through the
// DB with that context run in s.
func WithSnapshot(ctx context.Context, s *Snapshot) context.Context {
	return context.WithValue(ctx, snapshotKey{}, s)
}

// reader returns what reads of database dbID run on: the snapshot ctx
// carries for it, or the pool.
func (db *DB) reader(ctx context.Context, dbID int64) querier {
	if s, ok := ctx.Value(snapshotKey{}).(*Snapshot); ok && s.d.ID == dbID && s.db == db {
		return s
	}
	return db.pool
}

// classReader returns what a read of d's class tables, built for schema
// version d.SchemaVersion, runs on: the snapshot ctx carries for d, or a
// snapshot of that one statement (the same one round trip). Either checks
// the schema version the statement was built for (see Snapshot.begin), so
// no read decodes a table through another version of its schema.
func (db *DB) classReader(ctx context.Context, d *sluice.Database) querier {
	if s, ok := ctx.Value(snapshotKey{}).(*Snapshot); ok && s.d.ID == d.ID && s.db == db {
		return s
	}
	s := db.Snapshot(d)
	s.OneStatement()
	return s
}

// Position returns the position the snapshot reflects: the end of the
// newest commit it sees (or of commit 0, before any), tagged with the
// commit's stamp (sluice.Position.Tag) as the write's position of that
// commit is, so that a stream resumed from it after a failover that lost
// that commit, once another took its number, ends with Gone. The stamp is
// the counter row's copy (counterSQL); a commit made by a binary of
// earlier migrations left none, and its position has no tag. ok is false
// until the snapshot has begun (nothing was read).
func (s *Snapshot) Position() (p sluice.Position, ok bool) {
	p = sluice.Position{Epoch: s.d.Epoch, Seq: s.head, Index: sluice.WholeCommit}
	if !s.headStamp.IsZero() {
		p.Tag = s.headStamp.Tag()
	}
	return p, s.begun
}

// counterSQL reads database $n's counter row as a snapshot begins: the
// commit counter, the access version, the schema version, and the uid and
// time of the newest commit (null when none, or when the commit that
// advanced last_seq did not stamp the row: stamped_seq is another's),
// which tag the snapshot's Position. Every statement that advances
// last_seq stamps the row with its newest commit's uid and committed_at
// (migration 34): tagging reads no other row, where finding the commit's
// row by its key cost a lookup by id 4-14% more of Postgres' CPU.
func counterSQL(n int) string {
	return "SELECT h.last_seq, " + accessVersionSQL + " AS access, h.schema_version," +
		" CASE WHEN h.stamped_seq = h.last_seq THEN h.last_uid END, h.last_committed_at" +
		" FROM sluice.commit_counters h WHERE h.db_id = $" + strconv.Itoa(n)
}

// setHead records the counter row a snapshot began with (counterSQL).
func (s *Snapshot) setHead(head, access int64, uid *int64, at *time.Time) {
	s.head, s.access, s.begun = head, access, true
	if uid != nil && at != nil {
		s.headStamp = sluice.Stamp{UID: *uid, Time: *at}
	}
}

// AccessVersion returns the access version the snapshot sees (0 until it
// has begun). What it read may have been written after every access
// change up to that version: a stream hands it on only once those
// changes are applied to it (changefeed.Hub.SyncAccess), as it does with
// the commits it follows.
func (s *Snapshot) AccessVersion() int64 { return s.access }

// Failed reports whether the snapshot's transaction can run no more
// statements: one of them failed, which ends a transaction in Postgres
// (every later one fails, "current transaction is aborted"), or its
// connection broke (a statement cancelled by its context), or its first
// statement failed, which closed it (a statement after would begin
// another transaction, a later state than what was read in this one).
func (s *Snapshot) Failed() bool {
	if !s.begun || s.ended {
		return false
	}
	if s.conn == nil {
		return true
	}
	c := s.conn.Conn()
	return c.IsClosed() || c.PgConn().TxStatus() == 'E'
}

// Close ends the snapshot and gives its connection back.
func (s *Snapshot) Close() {
	if s.conn == nil {
		return
	}
	// A read-only transaction commits nothing: ROLLBACK ends it, even
	// after a failed statement. A connection left broken is closed by
	// Release.
	_, _ = s.conn.Exec(context.Background(), "ROLLBACK")
	s.conn.Release()
	s.conn = nil
	s.release()
}

// begin sends sql with BEGIN and the counter's read, and returns the
// results of sql; the caller closes them before anything else is sent.
func (s *Snapshot) begin(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	conn, release, err := s.db.acquire(ctx)
	if err != nil {
		return nil, err
	}
	s.conn, s.release = conn, release
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	b.Queue(counterSQL(1), s.d.ID)
	b.Queue(sql, args...)
	if s.one {
		b.Queue("ROLLBACK")
	}
	br := conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, mapError(err)
	}
	var head, access int64
	var version int
	var uid *int64
	var at *time.Time
	if err := br.QueryRow().Scan(&head, &access, &version, &uid, &at); err != nil {
		_ = br.Close()
		if err == pgx.ErrNoRows {
			return nil, sluice.Errorf(sluice.CodeNotFound, "database %s does not exist", s.d.Path())
		}
		return nil, mapError(err)
	}
	if s.d.SchemaVersion != 0 && version != s.d.SchemaVersion {
		// The statement was built for another schema version: whatever
		// it answers (an error, or values of columns that changed type)
		// is not this snapshot's.
		_ = br.Close()
		return nil, schemaChanged(s.d)
	}
	s.setHead(head, access, uid, at)
	return br, nil
}

// errSecondStatement is the error of a statement after the only one.
var errSecondStatement = errors.New("snapshot: a statement after the one it was told would be its only one")

// Query runs a query in the snapshot.
func (s *Snapshot) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if s.ended {
		return nil, errSecondStatement
	}
	if s.conn != nil {
		return s.conn.Query(ctx, sql, args...)
	}
	if s.one {
		return s.queryOne(ctx, sql, args)
	}
	br, err := s.begin(ctx, sql, args)
	if err != nil {
		s.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		s.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br, s: s}, nil
}

// QueryRow runs a query of one row in the snapshot.
func (s *Snapshot) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := s.Query(ctx, sql, args...)
	return &firstRow{rows: rows, err: err}
}

// Exec runs a statement in the snapshot (reads use Query).
func (s *Snapshot) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if s.conn != nil {
		return s.conn.Exec(ctx, sql, args...)
	}
	if s.ended {
		return pgconn.CommandTag{}, errSecondStatement
	}
	br, err := s.begin(ctx, sql, args)
	if err != nil {
		s.Close()
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	s.endBatch(br)
	return tag, err
}

// endBatch reads the rest of the first statement's batch: the ROLLBACK
// of a snapshot of one statement, which ends it.
func (s *Snapshot) endBatch(br pgx.BatchResults) {
	if s.one {
		_, err := br.Exec()
		_ = br.Close()
		s.ended = true
		if err != nil {
			// Not known to be out of its transaction: closed, not reused.
			_ = s.conn.Conn().Close(context.Background())
		}
		s.conn.Release()
		s.conn = nil
		s.release()
		return
	}
	_ = br.Close()
}

// batchRows are the rows of a snapshot's first statement: closing them
// closes the batch they came in.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	s      *Snapshot
	closed bool
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.s.endBatch(r.br)
}

// firstRow is a pgx.Row read from rows.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r *firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	r.rows.Close()
	return r.rows.Err()
}

// oneStatementSQL returns the statement that reads, in one statement,
// database $n's counter row (counterSQL: the commit counter, the access
// version, the schema version, the newest commit's stamp: $n is the
// parameter after sql's n-1) and sql's rows: first a row of the
// counter's headColumns columns (sql's columns null, of
// their types: the LEFT JOIN of sql kept to no row, which Postgres plans
// as an empty relation without reading anything), then sql's rows, the
// counter's columns null. A UNION ALL runs its branches in order (it is
// never a Parallel Append here: the counter's branch has no partial
// path), so the counter's row comes first, and sql's rows keep their
// order. Measured with pgbench against the transaction it replaces
// (BEGIN, the counter's read, sql, ROLLBACK, pipelined), Postgres spends
// a fifth less on a lookup by id and about a tenth more on a page of
// 1,000 (the rows pass one more node); the counter's values on every row
// instead cost a page 40% more.
func oneStatementSQL(sql string, n int) string {
	return "SELECT h.*, q.* FROM (" + counterSQL(n) +
		") h LEFT JOIN (SELECT * FROM (" + sql + ") q WHERE false) q ON true UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, q.* FROM (" + sql + ") q"
}

// queryOne runs sql as the snapshot's only statement (see
// oneStatementSQL), and returns its rows without the counter's columns.
func (s *Snapshot) queryOne(ctx context.Context, sql string, args []any) (pgx.Rows, error) {
	s.ended = true
	conn, release, err := s.db.acquire(ctx)
	if err != nil {
		return nil, err
	}
	r, err := conn.Query(ctx, oneStatementSQL(sql, len(args)+1), append(args[:len(args):len(args)], s.d.ID)...)
	if err != nil {
		conn.Release()
		release()
		return nil, err // as the statement's own errors are, mapped by the caller
	}
	// The connection is held while the rows are read (a listing streams
	// them to its client): it goes back, with its count, when they end.
	rows := &sharedRows{Rows: r, conn: conn, release: release}
	var head, access, uid *int64
	var version *int
	var at *time.Time
	if rows.Next() {
		dest := make([]any, len(rows.FieldDescriptions()))
		dest[0], dest[1], dest[2], dest[3], dest[4] = &head, &access, &version, &uid, &at
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, mapError(err)
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	if head == nil || access == nil || version == nil {
		// No counter row (the first row is the counter's, or there is
		// none): the database is gone.
		rows.Close()
		return nil, sluice.Errorf(sluice.CodeNotFound, "database %s does not exist", s.d.Path())
	}
	if s.d.SchemaVersion != 0 && *version != s.d.SchemaVersion {
		// Built for another schema version: its rows are not this
		// snapshot's (see begin).
		rows.Close()
		return nil, schemaChanged(s.d)
	}
	s.setHead(*head, *access, uid, at)
	return &oneRows{Rows: rows}, nil
}

// oneRows are the rows of a snapshot's only statement (oneStatementSQL)
// after the counter's, without the counter's columns.
type oneRows struct {
	pgx.Rows
	dest []any
}

// headColumns is the number of columns oneStatementSQL puts before the
// statement's own.
const headColumns = 5

func (r *oneRows) Scan(dest ...any) error {
	r.dest = r.dest[:0]
	for range headColumns {
		r.dest = append(r.dest, nil)
	}
	r.dest = append(r.dest, dest...)
	return r.Rows.Scan(r.dest...)
}

func (r *oneRows) FieldDescriptions() []pgconn.FieldDescription {
	if f := r.Rows.FieldDescriptions(); len(f) >= headColumns {
		return f[headColumns:]
	}
	return nil
}

func (r *oneRows) Values() ([]any, error) {
	v, err := r.Rows.Values()
	if err != nil || len(v) < headColumns {
		return nil, err
	}
	return v[headColumns:], nil
}

func (r *oneRows) RawValues() [][]byte {
	if v := r.Rows.RawValues(); len(v) >= headColumns {
		return v[headColumns:]
	}
	return nil
}

package postgres

import (
	"context"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txConn is the connection of a Tx: a pooled connection whose BEGIN is
// sent with the transaction's first statements rather than on its own. A
// group-commit batch of inserts has no statement whose answer it needs
// before its last round trip (documents, commit rows and COMMIT, see
// finish), so its whole transaction is that one round trip; a BEGIN of
// its own was a second one on every batch's path, about a fifth of a
// batch's time (docs/benchmarks.md, "Measured choices in the code").
type txConn struct {
	conn *pgxpool.Conn
	// begin is the statement that starts the transaction until it is
	// sent, then "".
	begin string
}

// started reports whether the transaction's BEGIN was sent: otherwise
// nothing was, and there is nothing to end.
func (c *txConn) started() bool { return c.begin == "" }

// start sends BEGIN on its own, for a statement that cannot carry it.
func (c *txConn) start(ctx context.Context) error {
	if c.started() {
		return nil
	}
	sql := c.begin
	c.begin = ""
	_, err := c.conn.Exec(ctx, sql)
	return err
}

func (c *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := c.start(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return c.conn.Exec(ctx, sql, args...)
}

func (c *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	return c.conn.Query(ctx, sql, args...)
}

// QueryRow sends BEGIN, when it was not sent yet, in the same round trip
// (a large write's first statement is a QueryRow, checkSchema).
func (c *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.started() {
		return c.conn.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return batchRow{c.SendBatch(ctx, b)}
}

// batchRow is the row of a batch's only statement.
type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyStream runs sql, a COPY … FROM STDIN, with r's bytes.
func (c *txConn) copyStream(ctx context.Context, r io.Reader, sql string) error {
	if err := c.start(ctx); err != nil {
		return err
	}
	_, err := c.conn.Conn().PgConn().CopyFrom(ctx, r, sql)
	return err
}

// SendBatch sends b, after BEGIN when it was not sent yet. Its results
// are b's: BEGIN's answer is read before the first of them.
func (c *txConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if c.started() {
		return c.conn.SendBatch(ctx, b)
	}
	// A new list, not b's: its caller may still hold b.
	qs := make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)
	qs = append(append(qs, &pgx.QueuedQuery{SQL: c.begin}), b.QueuedQueries...)
	withBegin := &pgx.Batch{QueuedQueries: qs}
	c.begin = ""
	return &begunResults{BatchResults: c.conn.SendBatch(ctx, withBegin)}
}

// begunResults are the results of a batch sent after BEGIN: the first
// call reads BEGIN's answer and, if it is an error, answers with it.
type begunResults struct {
	pgx.BatchResults
	read bool
}

func (r *begunResults) begin() error {
	if r.read {
		return nil
	}
	r.read = true
	_, err := r.BatchResults.Exec()
	return err
}

func (r *begunResults) Exec() (pgconn.CommandTag, error) {
	if err := r.begin(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.BatchResults.Exec()
}

func (r *begunResults) Query() (pgx.Rows, error) {
	if err := r.begin(); err != nil {
		return nil, err
	}
	return r.BatchResults.Query()
}

func (r *begunResults) QueryRow() pgx.Row {
	if err := r.begin(); err != nil {
		return errRow{err}
	}
	return r.BatchResults.QueryRow()
}

func (r *begunResults) Close() error {
	err := r.begin()
	if cerr := r.BatchResults.Close(); err == nil {
		err = cerr
	}
	return err
}

// errRow is a pgx.Row that fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

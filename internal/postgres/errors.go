package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
)

// errNotFound marks a missing row; callers turn it into a message that names
// what was missing.
var errNotFound = errors.New("not found")

// mapError maps pgx and Postgres errors to domain errors. *sluice.Error values
// pass through. Everything else keeps its detail for the log and is shown to
// clients as an internal error by the HTTP layer.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	var se *sluice.Error
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return errNotFound
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if unreachable(err) {
		return &unavailableError{err: err}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40P01", "40001": // deadlock_detected, serialization_failure
			return sluice.Errorf(sluice.CodeConflict, "the request conflicted with a concurrent write; retry it")
		case "42P01": // undefined_table: a cached database was deleted or re-created
			return sluice.Errorf(sluice.CodeConflict, "the database changed concurrently (deleted, re-created or its schema changed); retry")
		case "57014": // query_canceled
			return fmt.Errorf("query canceled: %w", err)
		}
	}
	return err
}

// ErrUnavailable is the client-facing error for a Postgres server that
// cannot be reached (or is shutting down or starting): every request
// answers it with 503 and Retry-After, and streams end with it.
var ErrUnavailable = sluice.Errorf(sluice.CodeUnavailable, "the database server is unavailable; retry shortly (streams: reconnect, resuming from the last event id)")

// unavailableError keeps the driver's error for the log while showing
// clients ErrUnavailable.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return "postgres unavailable: " + e.err.Error() }
func (e *unavailableError) Unwrap() []error {
	return []error{ErrUnavailable, e.err}
}

// unreachable reports whether err says the server cannot be reached, the
// connection broke, or the server is shutting down or starting: failures
// of the infrastructure, not of the statement.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-57P03: admin shutdown,
		// crash shutdown, cannot connect now.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var oe *net.OpError
	if errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	// pgconn reports a connection that died under an earlier statement as
	// "conn closed" without a typed error.
	return strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "closed pool")
}

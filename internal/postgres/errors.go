package postgres

import (
	"context"
	"errors"
	"fmt"

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

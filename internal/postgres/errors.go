package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"unicode/utf8"

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
		if msg, ok := refusalMessage(pe.Code); ok {
			return &refusedError{shown: &sluice.Error{Code: sluice.CodeUnavailable, Message: msg}, err: err}
		}
		switch pe.Code {
		case "40P01", "40001", "55P03": // deadlock_detected, serialization_failure, lock_not_available
			return concurrentError{sluice.Errorf(sluice.CodeConflict, "the request conflicted with a concurrent write; retry it"), pe.Code}
		case "42P01": // undefined_table: a cached database was deleted or re-created
			return sluice.Errorf(sluice.CodeConflict, "the database changed concurrently (deleted, re-created or its schema changed); retry")
		case "SLFT1": // sluice.refuse_foreign_triggers (migration 29)
			// Another role made a trigger on the table, which must not
			// run as Sluice: the write is refused until RemoveForeign
			// drops it, within seconds. The role and trigger go to the
			// log, not to the client.
			return &refusedError{shown: &sluice.Error{Code: sluice.CodeUnavailable, Message: "a table of this database holds a trigger another Postgres role made, which Sluice removes within seconds: retry"}, err: err}
		case "57014": // query_canceled
			// Sluice cancels a statement itself only when the request's
			// context ended: then the client is gone, and a caller that
			// still logs this error checks its context first (the REST
			// listing logs it at Debug). Otherwise it ran past
			// statement_timeout, or an operator cancelled it: the request
			// may succeed when retried, or with a higher limit. The
			// log keeps Postgres' own words, which tell the two apart.
			return &refusedError{shown: &sluice.Error{Code: sluice.CodeUnavailable, Message: "the database cancelled a statement of this request: it ran longer than statement_timeout allows, or an operator cancelled it"}, err: err}
		}
		if isIndexRowTooLarge(pe) {
			// "index row size 9016 exceeds btree version 4 maximum 2704
			// for index …": the index is one of @index, named after its
			// class and fields.
			return sluice.Errorf(sluice.CodeInvalid, "a value is too large for an index declared with @index (%s): an indexed value may take at most about 2,700 bytes, after compression", pe.Message)
		}
		if msg, ok := inputErrorMessage(pe.Code); ok {
			// Only what a client sent can cause these: Sluice's own
			// values are valid. Callers check text before it reaches SQL
			// (checkText); this is the last line of defence.
			return sluice.Errorf(sluice.CodeInvalid, "%s (SQLSTATE %s)", msg, pe.Code)
		}
	}
	return err
}

// isIndexRowTooLarge reports whether pe is Postgres's refusal of a
// btree index entry larger than a third of a page ("index row size 9016
// exceeds btree version 4 maximum 2704 for index …").
func isIndexRowTooLarge(pe *pgconn.PgError) bool {
	return pe.Code == "54000" && strings.HasPrefix(pe.Message, "index row")
}

// errConcurrent matches the error of a statement that Postgres ended
// because of other transactions rather than its own contents: a deadlock,
// a serialization failure, or a row lock a batch waited for longer than
// it may (lock_timeout, lockorder.go) that another transaction held. The same
// statements may succeed when run again: a group-commit batch runs again
// on it (commitBatch).
var errConcurrent = errors.New("conflicted with a concurrent write")

type concurrentError struct {
	err  *sluice.Error
	code string // its SQLSTATE
}

// deadlocked reports whether err is a write's that Postgres ended as one
// side of a deadlock (40P01): the same write run again may well commit,
// unlike one that waited lock_timeout for a lock held elsewhere.
func deadlocked(err error) bool {
	ce, ok := errors.AsType[concurrentError](err)
	return ok && ce.code == "40P01"
}

func (e concurrentError) Error() string        { return e.err.Error() }
func (e concurrentError) Unwrap() error        { return e.err }
func (e concurrentError) Is(target error) bool { return target == errConcurrent }

// ErrSchemaChanged matches the error of a read or a write prepared for a
// schema version of its database that is no longer the current one: a
// schema change committed meanwhile, on this replica or another. It is a
// Conflict; the engine reads the schema again and runs the request once
// more when it can.
var ErrSchemaChanged = errors.New("schema changed")

// schemaChanged returns the ErrSchemaChanged error of a request prepared
// for database d at d.SchemaVersion.
func schemaChanged(d *sluice.Database) error {
	return schemaChangedError{sluice.Errorf(sluice.CodeConflict, "the schema of %s changed while the request ran; retry it", d.Path())}
}

type schemaChangedError struct{ err *sluice.Error }

func (e schemaChangedError) Error() string        { return e.err.Error() }
func (e schemaChangedError) Unwrap() error        { return e.err }
func (e schemaChangedError) Is(target error) bool { return target == ErrSchemaChanged }

// unavailableError keeps the driver's error for the log while showing
// clients sluice.ErrStorageUnavailable.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return "postgres unavailable: " + e.err.Error() }
func (e *unavailableError) Unwrap() []error {
	return []error{sluice.ErrStorageUnavailable, e.err}
}

// refusedError is a statement the server refused for a state of its own
// that outlasts the request (it takes no writes, a resource ran out), or
// one that gave up waiting for locks other sessions hold
// (boundLockWaits): clients are shown shown, an Unavailable error that
// says which, and the log the server's error.
type refusedError struct {
	shown *sluice.Error
	err   error
}

func (e *refusedError) Error() string   { return e.shown.Message + ": " + e.err.Error() }
func (e *refusedError) Unwrap() []error { return []error{e.shown, e.err} }

// refusalMessage returns the message shown for a SQLSTATE that says the
// server cannot take the statement now, whatever the statement: a
// read-only server (default_transaction_read_only, which managed services
// turn on when the disk is nearly full, or a standby) or a resource run
// out (class 53). Those are 503s, not 500s: the client may retry, and
// reads may still work.
func refusalMessage(code string) (string, bool) {
	switch {
	case code == "25006": // read_only_sql_transaction
		return "the database server takes no writes now: it is read-only (default_transaction_read_only is on, as managed services set it when the disk is nearly full, or it is a standby); reads still work; retry the write later", true
	case code == "53100": // disk_full
		return "the database server's disk is full; retry the write once there is room", true
	case code == "53200": // out_of_memory
		return "the database server is out of memory; retry shortly", true
	case code == "53300": // too_many_connections
		return "the database server has no connection to spare (max_connections); retry shortly", true
	case strings.HasPrefix(code, "53"): // insufficient_resources
		return fmt.Sprintf("the database server ran out of a resource (SQLSTATE %s); retry shortly", code), true
	}
	return "", false
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
		// crash shutdown, cannot connect now; 25P03: the session was
		// ended for idling in its transaction longer than
		// idle_in_transaction_session_timeout (the process was frozen
		// or cut off: IdleInTransactionTimeout).
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "25P03"
	}
	var oe *net.OpError
	if errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	// pgconn reports a connection that died under an earlier statement as
	// "conn closed" without a typed error.
	return strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "closed pool")
}

// inputErrorMessage returns the message shown for a SQLSTATE that only
// input from a client can cause. Postgres' own message is not shown: it may
// quote SQL or internal names.
func inputErrorMessage(code string) (string, bool) {
	switch code {
	case "22021": // character_not_in_repertoire
		return `the request holds text that is not valid UTF-8 or contains a NUL character (\u0000)`, true
	case "22P05": // untranslatable_character
		return `the request holds a JSON value Postgres cannot store, such as \u0000`, true
	case "22P02": // invalid_text_representation
		return "the request holds a value that is not valid for its field", true
	case "22003": // numeric_value_out_of_range
		return "the request holds a number out of range for its field", true
	case "22007", "22008": // invalid_datetime_format, datetime_field_overflow
		return "the request holds an invalid or out of range date or time", true
	case "2201B": // invalid_regular_expression
		return "the request holds an invalid regular expression", true
	case "22025", "22019": // invalid_escape_sequence, invalid_escape_character
		return "the request holds an invalid escape sequence", true
	case "54000": // program_limit_exceeded, e.g. an index entry too large
		return "the request holds a value too large for the database", true
	case "54001": // statement_too_complex (stack depth)
		return "the request is too complex for the database to evaluate", true
	}
	return "", false
}

// checkText returns a CodeInvalid error naming what unless s can be a
// Postgres text value: valid UTF-8 without NUL characters. Untrusted strings
// (names, ids, commit messages) are checked before they reach SQL, where
// they would fail the statement and, inside a shared transaction, the
// requests that share it.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return sluice.Errorf(sluice.CodeInvalid, "%s %s is not valid UTF-8", what, quote(s))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return sluice.Errorf(sluice.CodeInvalid, `%s %s contains a NUL character (\u0000)`, what, quote(s))
	}
	return nil
}

// quote quotes s for an error message (invalid bytes as escapes),
// shortened so that a huge input does not make a huge message.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q…", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

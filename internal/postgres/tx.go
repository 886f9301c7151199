package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
)

// Tx is the transaction of one DB.Write: what a WriteSpec's Before runs its
// statements in, so that they commit, or roll back, with the write's
// documents. A Tx is used by one goroutine, and only during the Before
// call it is given to.
type Tx struct {
	tx *txConn
	db *DB
	// committed is set once finish sent COMMIT and Postgres answered it.
	committed bool
	// batch is set in the transaction of a group-commit batch, whose
	// documents' statements wait for a lock at most batchLockWait
	// (lockorder.go).
	batch bool
	// lockPatienceEnds is when the transaction's steps bounded by
	// boundLockWaits stop trying again, set by the first of them.
	lockPatienceEnds time.Time
	// access holds the access changes made in the transaction
	// (changeAccess), recorded after the write's Before step
	// (recordAccess); once the transaction committed, they are
	// announced (notifyAccess).
	access []sluice.AccessChange
	// accessRecorded counts the changes of access recorded so far.
	accessRecorded int
}

// transact runs fn in one transaction on a pooled connection, with a
// BEGIN of its own rather than pgx's transaction type: it goes with fn's
// first statements (txConn), and fn may end the transaction itself by
// sending COMMIT in the same round trip as its last statements (finish).
// If fn returns nil without having done so, transact commits; on error it
// rolls back.
func (db *DB) transact(ctx context.Context, fn func(*Tx) error) error {
	conn, release, err := db.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	// Release closes a connection left inside a transaction or broken.
	defer conn.Release()
	t := &Tx{tx: &txConn{conn: conn, begin: "BEGIN"}, db: db}
	if err := fn(t); err != nil {
		if !t.committed && t.tx.started() {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return err
	}
	if !t.committed && t.tx.started() {
		if err := t.checkAccessRecorded(); err != nil {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
			return err
		}
		if err := commitResult(conn.Exec(ctx, "COMMIT")); err != nil {
			return err
		}
	}
	if len(t.access) > 0 {
		db.notifyAccess(ctx, conn)
	}
	return nil
}

// errReplayed ends the transaction of an idempotent write whose key was
// recorded by an earlier write: it rolls back what it began, which is
// nothing.
var errReplayed = errors.New("idempotency key replayed")

// commitResult checks the result of COMMIT: Postgres answers ROLLBACK, not
// an error, for a transaction that had failed; a connection lost before
// the answer leaves the outcome unknown (sentCommit).
func commitResult(tag pgconn.CommandTag, err error) error {
	if err == nil && tag.String() != "COMMIT" {
		return fmt.Errorf("COMMIT answered %q", tag.String())
	}
	if err != nil && lostAtCommit(err) {
		return &outcomeError{err: err}
	}
	return mapError(err)
}

// sentCommit maps err, the error of a statement sent in the same round
// trip as COMMIT and ahead of it, with mapErr, unless the connection was
// lost: Postgres answers statements in order, so its error to one of them
// means that COMMIT did not run (a connection it ends with such an error,
// as when it shuts down, included); but a connection lost without an
// answer may have carried the whole round trip, COMMIT included.
func sentCommit(mapErr func(error) error, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) && lostAtCommit(err) {
		return fmt.Errorf("%w: %w", errCommitFailed, &outcomeError{err: err})
	}
	return mapErr(err)
}

// lostAtCommit reports whether err, the answer to COMMIT or to a
// statement sent with it, leaves unknown whether Postgres committed: the
// connection broke, or the server ended it (shutting down: it may have
// committed first), or this process gave up waiting (the context).
//
// An error pgconn says is safe to retry came before anything was sent
// (a pooled connection found dead as the round trip was written, or a
// context done before it): COMMIT did not reach Postgres. With BEGIN sent
// with a write's statements (txConn), a group-commit batch's first round
// trip is its COMMIT's, so that is where a dead connection shows.
func lostAtCommit(err error) bool {
	if pgconn.SafeToRetry(err) {
		return false
	}
	return unreachable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// outcomeError keeps the driver's error for the log while showing clients
// sluice.ErrOutcomeUnknown.
type outcomeError struct{ err error }

func (e *outcomeError) Error() string { return "commit outcome unknown: " + e.err.Error() }
func (e *outcomeError) Unwrap() []error {
	return []error{sluice.ErrOutcomeUnknown, e.err}
}

// errCommitFailed wraps an error of a COMMIT sent behind a commit's last
// statements, or of a round trip that carried COMMIT and lost its
// connection: whether the transaction committed is not known, so group
// commit must not run its writes again as if it had not.
var errCommitFailed = errors.New("commit failed")

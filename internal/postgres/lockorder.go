package postgres

import (
	"fmt"
	"time"
)

// Locks of administrative changes. Sluice's own rows are locked in one
// order by every transaction that locks more than one of them, so that
// two changes wait for each other instead of deadlocking (Postgres
// breaks a deadlock after deadlock_timeout by failing one side, a 409
// "retry" for what is, to its users, two ordinary changes):
//
//  1. a database's class tables, its counter row (sluice.commit_counters),
//     then its row (sluice.databases), with what its deletion deletes
//     (its webhooks, its roles); a grant takes a key share of the
//     database's row first, then of the user's (Tx.SetRole);
//  2. webhooks' rows;
//  3. users' rows, with what a user's deletion deletes (its tokens,
//     roles, stream tickets), an organization's users in name order;
//  4. the organization's row;
//  5. the access log's counter row (sluice.access_counter), taken once a
//     write's Before step is done, whatever it changed (Tx.recordAccess,
//     called by DB.write);
//  6. _system's documents, then its counter row, with the commit
//     (Tx.finish).
//
// A step may be left out, never taken after a later one. An
// organization's deletion deletes its databases, then its users, then
// its row, in one transaction. It took the access log's counter row with
// its first database or user, and deadlocked with a password change,
// a token's revocation, a role's grant or a database's creation of
// another member, which held the member's row (or its token's, or a key
// share of it) and then waited for that counter row; with a webhook's
// creation by a member, which held the member's row and waited for the
// counter row of a database the deletion had deleted; and with a grant
// of a role on such a database, whose foreign keys took a key share of
// the user's row before the database's (TestAdministrativeWritesTakeLocksInOneOrder).
//
// Row locks in a group-commit batch. A write locks its documents in one
// order, class name then id (Writer.lock), so that two writes of
// overlapping documents wait for each other instead of deadlocking. A
// batch is one transaction that locks the documents of its commits one
// commit after another: as a whole it does not lock in that order, and
// every write of its database queued on this process waits for it.
//
// So a batch waits for a lock its documents' statements ask for at most
// batchLockWait (lock_timeout, set with the batch's first statements and
// set back before its counter row, Tx.batch). A document another
// transaction holds longer (a large write still reading its body, a write
// of another client of Postgres, an uncommitted insert of the same id)
// fails that statement (lock_not_available, an errConcurrent): the batch
// runs again with one savepoint per commit (commitBatch), and a commit
// that fails so again leaves the batch: once the batch is done, it runs
// alone, on its own request's goroutine and outside the queue, and waits
// for its locks as a write alone does (DB.commitAlone). The batch and the
// writes queued behind it go on. A commit that leaves the batch commits
// after the batch's, as if it had been queued after them: no request of
// it has been answered, so no client can have seen it before them.
//
// It waited for a lock without a bound when it held only the locks of the
// commit that asked, or for documents after every one it held: no
// deadlock, but the whole database's queue waited behind one document
// held elsewhere (TestGroupCommitDoesNotWaitForALockHeldElsewhere). It
// then asked for every row lock without waiting (NOWAIT): another
// process's batch holds its documents until its COMMIT, about a
// millisecond, and each such document failed the whole optimistic run, so
// a document written hot from two replicas halved grouped writes'
// throughput (docs/benchmarks.md); and an insert, which cannot be asked
// for without waiting, still waited without a bound for another
// transaction's uncommitted insert of the same id. A wait cycle of
// batches' row locks lasts at most batchLockWait; a deadlock Postgres
// reports (40P01, an errConcurrent) makes the commit leave the batch too,
// and a commit alone that Postgres ends as deadlocked runs once or twice
// more before it answers 409.

// batchLockWait bounds each wait for a lock of a group-commit batch's
// document statements: long enough to wait out another batch's COMMIT
// (a millisecond or two; the batch holds its documents until then), short
// enough that a document held long elsewhere holds the database's queue
// up at most that long in each run of the batch (the optimistic one, and
// the one with savepoints that its commit then leaves).
const batchLockWait = 100 * time.Millisecond

// setBatchLockWait returns the statement setting the wait (the DB's
// batchLockWait) for the rest of a batch's transaction;
// resetBatchLockWait sets lock_timeout back to the connection's own
// setting (Sluice sets none: the server's, the role's or the database's),
// for the counter row, waited for as a write alone waits for it.
func (db *DB) setBatchLockWait() string {
	return fmt.Sprintf("SET LOCAL lock_timeout = %d", db.opts.batchLockWait.Milliseconds())
}

const resetBatchLockWait = "SET LOCAL lock_timeout TO DEFAULT"

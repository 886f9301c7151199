package postgres

// Row locks in a group-commit batch. A write locks its documents in one
// order, class name then id (Writer.lock), so that two writes of
// overlapping documents wait for each other instead of deadlocking. A
// batch is one transaction that locks the documents of its commits one
// commit after another: as a whole it does not lock in that order, and
// every write of its database queued on this process waits for it.
//
// So a batch never waits for a row lock: it asks for every one without
// waiting (NOWAIT, Tx.batch). A document another transaction holds (a
// large write still reading its body, another process's batch, a write
// of another client of Postgres) fails that statement (lock_not_available,
// an errConcurrent): the batch runs again with one savepoint per commit
// (commitBatch), and a commit that fails so again leaves the batch: once
// the batch is done, it runs alone, on its own request's goroutine and
// outside the queue, and waits for its locks as a write alone does
// (DB.commitAlone). The batch and the writes queued behind it go on. A
// commit that leaves the batch commits after the batch's, as if it had
// been queued after them: no request of it has been answered, so no
// client can have seen it before them.
//
// It waited for a lock when it held only the locks of the commit that
// asked, or for documents after every one it held: no deadlock, but the
// whole database's queue waited behind one document held elsewhere
// (TestGroupCommitDoesNotWaitForALockHeldElsewhere). A batch that waits for
// no row lock cannot close a cycle of row locks either. An insert still
// waits for another transaction's insert of the same id (it locks nothing
// beforehand, so it cannot be asked for without waiting); a deadlock
// Postgres reports then (40P01, an errConcurrent) makes the commit leave
// the batch too, and a commit alone that Postgres ends as deadlocked runs
// once or twice more before it answers 409.

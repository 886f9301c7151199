package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// Group commit. Concurrent writes to one database that allow it
// (WriteSpec.Group) share one Postgres transaction: each is still a commit
// of its own (its own changes, its own sequence number, in the order they
// were queued), but the batch pays for one counter-row lock and one WAL
// flush instead of one each, which is what serialized concurrent writers:
// each held the counter row's lock until its own COMMIT was durable
// (docs/benchmarks.md, "Measured choices in the code").
//
// There is no timer: whoever finds no batch running leads one with what is
// queued, and hands leadership to the next queued writer once everything
// its own batch sent before COMMIT has answered (its commit rows, and the
// idempotency keys recorded behind them), so no request serves others for
// long. Postgres answers a pipeline's statements together, after its last
// one (COMMIT), so in practice that is once the COMMIT is durable, and
// batches follow one another (a traced run: none of 799 batches started
// before the one before it was done). Handing the lead on as soon as
// COMMIT was sent made batches overlap, without measurably more
// throughput (docs/benchmarks.md, "Where a concurrent single-document
// write's time goes").
//
// A batch takes in the writes queued while its leader prepared its own
// before sending its commit rows; one that starts while the one
// before it is still waiting for its COMMIT sends its writes at once,
// waits for that COMMIT, and then takes in the writes queued meanwhile.
// Batches grow larger, and concurrent writers' throughput with them
// (figures in docs/benchmarks.md, "Measured choices in the code").
//
// A batch first runs without savepoints: a savepoint makes Postgres open a
// subtransaction for each commit, which costs more than the commit's own
// statements. If any commit of it fails, the whole transaction is rolled
// back and the batch runs again with one savepoint per commit, so that the
// failure stays that commit's own. If that run fails as a whole too (a
// statement sent with the commit rows: the schema changed, Postgres ended
// the batch as deadlocked), its transaction rolled back, and the errors
// its commits got were worked out against the commits before them, now
// undone: those commits run alone (below), so that none is answered an
// error of a transaction that never happened.
//
// A batch never runs again once it has handed the lead on. The next batch
// then writes its documents and waits, in Go, for this one to be done
// (topUp); run again, this one could wait in Postgres for a document the
// next one has locked or inserted: a wait cycle Postgres cannot see, which
// held both until statement_timeout ended it (a key that could not be
// recorded did that, when the lead passed on at the commit rows). So the
// lead passes on only after the last statement whose error runs the batch
// again: what is left then is COMMIT's answer, and a batch whose COMMIT
// failed never runs again (errCommitFailed: it may have committed).
// Waiting for the next batch to be done before running again cannot work
// (that one waits for this one), and failing the batch's writes with a
// "retry" would fail writes that did nothing wrong.
//
// A batch waits for a lock on its documents at most batchLockWait: a
// commit whose document another transaction holds longer leaves the batch
// and, once the batch is done, commits alone, outside the queue, waiting
// for its locks as a write alone does (lockorder.go). Its commit then
// follows the batch's, as if it had been queued after them.

// maxBatch caps the commits of one batch.
const maxBatch = 64

// job is one grouped commit, from DB.Write to its answer.
type job struct {
	spec WriteSpec
	lead chan struct{} // closed when this job's goroutine must lead a batch
	done chan struct{} // closed once commit or err is set

	// leave is closed instead of done when the job left its batch (a
	// document it locks is held elsewhere): its own goroutine then runs
	// alone, and closes done.
	leave chan struct{}
	// alone, set when the job leaves its batch, commits it alone
	// (DB.commitAlone), setting commit or err.
	alone func(ctx context.Context, j *job)

	commit *sluice.Commit
	err    error
	// replayed is set when the job's idempotency key was recorded by an
	// earlier write: commit is that write's, and the job wrote nothing.
	replayed bool
}

func newJob(spec WriteSpec) *job {
	return &job{spec: spec, lead: make(chan struct{}), done: make(chan struct{}), leave: make(chan struct{})}
}

// wait waits until j is done, running it alone first if it left its
// batch.
func (j *job) wait(ctx context.Context) {
	select {
	case <-j.done:
	case <-j.leave:
		j.alone(ctx, j)
		close(j.done)
	}
}

// version is the schema version the job's documents were validated with:
// only jobs of one version share a transaction, since the commit row is
// checked against it.
func (j *job) version() int { return j.spec.Database.SchemaVersion }

// groups holds the group-commit queue of each database that has commits
// queued or running; a database's entry goes once its last batch is done.
type groups struct {
	mu   sync.Mutex // taken before a group's own mu
	byDB map[int64]*group
}

// group is the group-commit queue of one database.
type group struct {
	mu    sync.Mutex
	queue []*job
	// leading is set while a goroutine leads a batch, or has been handed
	// the lead (the first job of queue).
	leading bool
	// inflight is closed when the batch started last is done (committed
	// or failed).
	inflight chan struct{}
}

// batchRunner commits one batch of a group: DB.commitBatch, or a fake in
// the unit tests of the queue. It runs batch in one transaction, with the
// jobs it takes in from g once prev (the batch before, or nil) is done;
// calls handoff once the next batch may start (at the latest, its caller
// does when it returns); and returns every job it ran, each with its
// commit or err set, or with alone set if it left the batch.
type batchRunner func(ctx context.Context, g *group, batch []*job, prev <-chan struct{}, handoff func()) []*job

// commit runs j as one commit of its database, batched with concurrent
// ones, and returns once j's commit or err is set. The batch runs detached
// from ctx: a client that goes away must not roll back the other writers'
// work. A job that leaves its batch runs alone under ctx, as a write that
// never joined one does: its client gone, it stops waiting for its locks.
func (gs *groups) commit(ctx context.Context, j *job, run batchRunner) {
	g, lead := gs.join(j)
	gs.await(ctx, g, j, lead, run)
}

// join queues j on its database's group and reports whether j's goroutine
// must lead a batch (no batch is running).
func (gs *groups) join(j *job) (*group, bool) {
	id := j.spec.Database.ID
	gs.mu.Lock()
	if gs.byDB == nil {
		gs.byDB = map[int64]*group{}
	}
	g := gs.byDB[id]
	if g == nil {
		g = &group{}
		gs.byDB[id] = g
	}
	g.mu.Lock()
	gs.mu.Unlock()
	defer g.mu.Unlock()
	g.queue = append(g.queue, j)
	lead := !g.leading
	g.leading = true
	return g, lead
}

// await waits until j is done, leading a batch when j's turn comes (or at
// once when lead is set), and running j alone if it left its batch. A
// batch's connection is not counted for the user whose write leads: the
// batch is many users' (share.go); j run alone is the user's own.
func (gs *groups) await(ctx context.Context, g *group, j *job, lead bool, run batchRunner) {
	if !lead {
		select {
		case <-j.done:
		case <-j.leave:
		case <-j.lead:
			lead = true
		}
	}
	if lead {
		gs.lead(shared(context.WithoutCancel(ctx)), g, j.spec.Database.ID, run)
	}
	j.wait(ctx)
}

// lead commits one batch of g: the jobs at the head of its queue that can
// share a transaction, the leader's own first. It passes the lead on once
// the batch holds the counter row's lock (see the top of this file for
// when that is known), so that a next batch can write its documents while
// this one waits for its COMMIT to be durable; the next batch's own
// counter update then waits for this COMMIT, which keeps the order.
func (gs *groups) lead(ctx context.Context, g *group, id int64, run batchRunner) {
	g.mu.Lock()
	batch := g.take(maxBatch, g.queue[0].version())
	prev := g.inflight
	mine := make(chan struct{})
	g.inflight = mine
	g.mu.Unlock()
	var once sync.Once
	handoff := func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(g.queue) > 0 {
				close(g.queue[0].lead)
			} else {
				g.leading = false
			}
		})
	}
	// The jobs are answered before the next batch, waiting for this one
	// (prev), takes in the jobs queued meanwhile: their writers' next
	// requests can then be among them.
	for _, j := range run(ctx, g, batch, prev, handoff) {
		if j.alone != nil {
			close(j.leave) // its goroutine runs it alone, after this batch
		} else {
			close(j.done)
		}
	}
	close(mine)
	handoff()
	gs.forget(id, g, mine)
}

// forget drops g, the group of database id, once it is idle: no job
// queued, no lead handed on, and no batch started after the one whose
// inflight channel is last.
func (gs *groups) forget(id int64, g *group, last chan struct{}) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if gs.byDB[id] == g && len(g.queue) == 0 && !g.leading && g.inflight == last {
		delete(gs.byDB, id)
	}
}

// take removes from the head of the queue the jobs that can share one
// transaction: at most n, validated against the given schema version. The
// caller holds g.mu.
func (g *group) take(n int, version int) []*job {
	k := 0
	for k < len(g.queue) && k < n && g.queue[k].version() == version {
		k++
	}
	batch := append([]*job(nil), g.queue[:k]...)
	g.queue = append(g.queue[:0], g.queue[k:]...)
	return batch
}

var (
	// errRetryIsolated says a commit of an optimistic batch failed.
	errRetryIsolated = errors.New("a commit of the batch failed; run it again with savepoints")
	errAllFailed     = errors.New("every commit of the batch failed")
)

// commitBatch is the batchRunner of a DB: it runs the batch optimistically,
// and once more with savepoints if any of it failed, or waited too long for
// a document locked by another transaction; a commit that does so with
// savepoints leaves the batch, to commit alone once it is done
// (lockorder.go). It calls the OnCommit function with each commit made.
func (db *DB) commitBatch(ctx context.Context, g *group, batch []*job, prev <-chan struct{}, handoff func()) []*job {
	// Once the next batch may start, this one must not run again: it
	// would take its locks beside that one's, which waits for this one
	// (see the top of this file). finish hands on once only COMMIT's
	// answer is left, whose failure is not run again either; handed keeps
	// every run again below to before that.
	handed := false
	handOff := func() {
		handed = true
		handoff()
	}
	err := db.runBatch(ctx, &batch, g, prev, handOff, true)
	conflicted := func() bool {
		return !handed && errors.Is(err, errConcurrent) && !errors.Is(err, errCommitFailed)
	}
	if !handed && errors.Is(err, errRetryIsolated) || conflicted() {
		err = db.runBatch(ctx, &batch, nil, nil, handOff, true)
		if err != nil && !handed && !errors.Is(err, errAllFailed) && !errors.Is(err, errCommitFailed) {
			// The run with savepoints failed as a whole, so its
			// transaction rolled back: a commit's own error (a
			// duplicate id, a stale precondition, a key held) was
			// worked out against the commits before it, which are not
			// there any more, and may be false (a commit told that a
			// document another one inserted exists). Those commits
			// run alone, where their errors are their own. (With
			// errCommitFailed, the batch may have committed, with
			// those errors.)
			for _, j := range batch {
				if j.err != nil && !j.replayed {
					j.alone = db.commitAlone
				}
			}
		}
	}
	if conflicted() {
		// With savepoints too, a statement sent with the commit rows
		// (whose commit is not known) conflicted: each commit not
		// answered by its key leaves the batch.
		for _, j := range batch {
			if !j.replayed {
				j.alone = db.commitAlone
			}
		}
		err = nil
	}
	for _, j := range batch {
		if j.replayed || j.alone != nil {
			continue // answered by its key, or to run alone
		}
		if err != nil && j.err == nil {
			j.err, j.commit = err, nil
		}
		if j.err == nil {
			db.committed(j.commit)
		}
	}
	return batch
}

// commitAlone commits j in a transaction of its own, outside its group's
// queue, waiting for its row locks as a write alone does: a job that left
// its batch. A commit alone can still be one side of a deadlock with
// another process's write (two writes creating the same missing documents
// in other orders: an insert cannot be asked for without waiting);
// Postgres ends one side, which runs once or twice more before it answers
// 409.
func (db *DB) commitAlone(ctx context.Context, j *job) {
	for attempt := 0; ; attempt++ {
		// An error the job had (from a batch rolled back, or the try
		// before) is not its answer: this try's is, also when it fails
		// before the job runs (no connection, BEGIN refused).
		j.err = nil
		one := []*job{j}
		err := db.runBatch(ctx, &one, nil, nil, func() {}, false)
		if err != nil && !errors.Is(err, errAllFailed) && j.err == nil && !j.replayed {
			j.err = err
		}
		if attempt < 2 && deadlocked(j.err) {
			continue
		}
		break
	}
	switch {
	case j.err != nil:
		j.commit = nil
	case !j.replayed:
		db.committed(j.commit)
	}
}

// runBatch runs the batch in one transaction; inBatch makes it wait for
// each lock its documents' statements ask for at most batchLockWait
// (lockorder.go), which a job run alone (commitAlone) does not. Without savepoints (g not nil), the first
// failing job fails the attempt with errRetryIsolated (for a batch of one,
// with the job's own error), or, failing on a lock another transaction
// holds, with that errConcurrent; and the batch takes in the jobs queued
// on g by the time prev is done, adding them to *batch. With savepoints (g
// nil), a failing job is rolled back alone and keeps its error in j.err;
// one that fails on a lock another transaction holds, in a batch, leaves
// it (j.alone set).
func (db *DB) runBatch(ctx context.Context, batch *[]*job, g *group, prev <-chan struct{}, handoff func(), inBatch bool) error {
	jobs := *batch
	savepoints := g == nil
	return db.transact(ctx, func(tx *Tx) error {
		tx.batch = inBatch
		var committed []*job
		var writers []*Writer
		// claimed holds the idempotency keys the batch's jobs hold: a
		// second job of the batch with one of them is still running in
		// effect (its lock is this transaction's own, so it would not
		// say so).
		claimed := map[idempotencyName]bool{}
		// run runs job j with its Writer w. A job refused by its
		// idempotency key, or answered by it, writes nothing and leaves
		// the transaction as it was.
		run := func(j *job, w *Writer, i int) error {
			j.err, j.replayed, j.alone = nil, false, nil
			if k := j.spec.Idempotency; k != nil {
				name := idempotencyName{k.UserID, k.Key}
				if claimed[name] {
					j.err = errKeyInFlight
					return nil
				}
				first, refused, err := tx.claim(ctx, j.spec.Database, k, true)
				switch {
				case err != nil:
					return err
				case refused != nil:
					j.err = refused
					return nil
				case first != nil:
					j.commit, j.replayed = first, true
					return nil
				}
				claimed[name] = true
				w.key = k
			}
			if !savepoints {
				// The job's statements stay queued and go with the
				// batch's commit rows in one round trip (finish).
				if err := w.write(ctx, j.spec.Documents); err != nil {
					if errors.Is(err, errConcurrent) {
						return err // not the job's doing: the batch runs again
					}
					if len(*batch) == 1 {
						j.err = err
						return err
					}
					return errRetryIsolated
				}
			} else {
				failed, err := w.isolated(ctx, fmt.Sprintf("w%d", i), j.spec.Documents)
				if err != nil {
					return err
				}
				if inBatch && errors.Is(failed, errConcurrent) {
					// Not the job's doing: it leaves the batch, and
					// waits for what it locks alone, after it.
					j.alone = db.commitAlone
					return nil
				}
				if failed != nil {
					j.err = failed
					return nil
				}
			}
			committed = append(committed, j)
			writers = append(writers, w)
			return nil
		}
		ws, err := tx.newWriters(ctx, specs(jobs), &pipeline{})
		if err != nil {
			return err
		}
		if inBatch {
			// Before the batch's first document statement, in its round
			// trip (lockorder.go); finish sets it back before the
			// counter row.
			ws[0].queue(db.setBatchLockWait())
			if savepoints {
				// isolated drops what is queued when a commit fails
				// before sending anything: send it now, one round trip
				// more on this path, which already takes one a commit.
				if err := ws[0].flush(ctx); err != nil {
					return err
				}
			}
		}
		for i, j := range jobs {
			if err := run(j, ws[i], i); err != nil {
				return err
			}
		}
		if !savepoints {
			more, mws, err := topUp(ctx, tx, g, prev, ws[0], maxBatch-len(jobs))
			// The jobs taken join the batch before any runs, whatever
			// happens next: the retry, or the answer to every job of the
			// batch, must include them.
			*batch = append(*batch, more...)
			if err != nil {
				return err
			}
			for i, j := range more {
				if err := run(j, mws[i], len(jobs)+i); err != nil {
					return err
				}
			}
		}
		if len(committed) == 0 {
			return errAllFailed // or answered by their keys
		}
		// The commit rows and COMMIT go with the jobs' last statements;
		// the lead passes on once only COMMIT's answer is left.
		commits, err := tx.finish(ctx, writers, handoff)
		if err != nil {
			if !savepoints && len(*batch) > 1 && !errors.Is(err, errCommitFailed) && !errors.Is(err, errConcurrent) {
				return errRetryIsolated // which job failed is not known yet
			}
			return err
		}
		for i, j := range committed {
			j.commit = commits[i]
		}
		return nil
	})
}

// isolated runs write with w inside a savepoint named name. If write or
// its statements fail, it rolls the transaction back to the savepoint and
// returns their error as failed, so that the failure stays this commit's
// own; err is an error that leaves the transaction unusable. The
// savepoint is sent on its own, and its release with the commit's own
// statements: two round trips per commit. Sent with them, the savepoint
// ran after the statements the connection had not prepared yet were
// prepared (pgx prepares a batch's new statements first, and a failed
// batch's statements are new again), so a prepare that failed (on a lock
// timeout: a table held by a schema change) left no savepoint to roll
// back to, and the whole batch failed with "savepoint does not exist".
func (w *Writer) isolated(ctx context.Context, name string, write func(context.Context, *Writer) error) (failed, err error) {
	sp := pgx.Identifier{name}.Sanitize()
	w.queue("SAVEPOINT " + sp)
	if err := w.flush(ctx); err != nil {
		return nil, err
	}
	failed = w.write(ctx, write)
	if failed == nil {
		w.queue("RELEASE SAVEPOINT " + sp)
		failed = w.Flush(ctx)
	}
	if failed == nil {
		return nil, nil
	}
	// What is still queued is this commit's alone (the commits before it
	// sent theirs): drop it. Roll back whatever was sent since the
	// savepoint: a statement sent outside the queue may have failed too.
	w.pending.reset()
	w.deferred, w.deferredBytes = nil, 0
	_, err = w.t.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+sp)
	return failed, mapError(err)
}

// topUp waits until prev (the previous batch) is done, having sent the
// statements queued so far so that Postgres runs them meanwhile, and then
// takes up to n jobs of w's schema version queued on g since the batch
// began, with Writers for them sharing w's pending statements. The jobs
// taken are returned even with an error.
func topUp(ctx context.Context, tx *Tx, g *group, prev <-chan struct{}, w *Writer, n int) ([]*job, []*Writer, error) {
	if prev != nil {
		select {
		case <-prev:
		default:
			if err := w.Flush(ctx); err != nil {
				return nil, nil, errRetryIsolated // which job failed is not known
			}
			<-prev
		}
	}
	g.mu.Lock()
	more := g.take(n, w.d.SchemaVersion)
	g.mu.Unlock()
	if len(more) == 0 {
		return nil, nil, nil
	}
	ws, err := tx.newWriters(ctx, specs(more), w.pending)
	return more, ws, err
}

// specs returns the jobs' specs.
func specs(jobs []*job) []*WriteSpec {
	out := make([]*WriteSpec, len(jobs))
	for i, j := range jobs {
		out[i] = &j.spec
	}
	return out
}

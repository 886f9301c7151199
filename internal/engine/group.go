package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// Group commit. Concurrent small writes to one database share one Postgres
// transaction: each is still a commit of its own (its own changes, its own
// sequence number, in the order they were queued), but the batch pays for
// one counter-row lock and one WAL flush instead of one each, which is what
// serialized concurrent writers (DESIGN.md, "Measured costs"). Each write
// runs inside a savepoint, so one failing write never affects another.
//
// There is no timer: whoever finds no batch running leads one with what is
// queued, and hands leadership to the next queued writer when its own
// batch is done, so no request serves others for long.
//
// A batch that starts while the one before it is still waiting for its
// COMMIT sends its writes at once, waits for that COMMIT, and then takes in
// the writes queued meanwhile before sending its own commit rows: the
// previous batch's writers, answered by then, are usually among them. With
// 8 concurrent writers, batches grew from 3.9 to 4.9 writes on average
// (eight became the commonest size) and the benchmark's throughput by about
// a sixth (docs/benchmarks.md).

// groupMax is the largest request, in documents, that joins group commit;
// larger ones run in a transaction of their own. maxBatch caps a batch.
const (
	groupMax = 100
	maxBatch = 64
)

type job struct {
	d     *sluice.Database
	s     *sluice.Schema
	apply func(context.Context, *postgres.Writer) error
	meta  postgres.CommitMeta

	lead chan struct{} // closed when this job's goroutine must lead a batch
	done chan struct{} // closed when commit or err is set

	commit *sluice.Commit
	err    error
}

type committer struct {
	mu      sync.Mutex
	queue   []*job
	leading bool
	// inflight is closed when the batch started last is done (committed
	// or failed).
	inflight chan struct{}
}

func (e *Engine) committer(dbID int64) *committer {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.committers[dbID]
	if !ok {
		c = &committer{}
		e.committers[dbID] = c
	}
	return c
}

// groupCommit runs apply as one commit of database d, batched with
// concurrent ones. It returns once the commit is durable or failed. The
// batch runs detached from ctx: a client that goes away must not roll back
// the other writers' work.
func (e *Engine) groupCommit(ctx context.Context, d *sluice.Database, s *sluice.Schema, meta postgres.CommitMeta, apply func(context.Context, *postgres.Writer) error) (*sluice.Commit, error) {
	if err := meta.Check(); err != nil {
		return nil, err // it would fail the whole batch's commit rows
	}
	j := &job{d: d, s: s, apply: apply, meta: meta, lead: make(chan struct{}), done: make(chan struct{})}
	c := e.committer(d.ID)
	c.mu.Lock()
	c.queue = append(c.queue, j)
	if c.leading {
		c.mu.Unlock()
		select {
		case <-j.done:
			return j.commit, j.err
		case <-j.lead:
		}
	} else {
		c.leading = true
		c.mu.Unlock()
	}
	// This goroutine leads: commit one batch (which holds its own job,
	// at the head of the queue) and pass the lead on as soon as the batch
	// holds the counter-row lock, so the next batch writes its documents
	// while this one waits for its COMMIT to be durable. The next batch's
	// own counter update then waits for this COMMIT: order is kept.
	c.mu.Lock()
	batch := takeBatch(&c.queue, maxBatch, c.queue[0].d.SchemaVersion)
	prev := c.inflight
	mine := make(chan struct{})
	c.inflight = mine
	c.mu.Unlock()
	var once sync.Once
	handoff := func() {
		once.Do(func() {
			c.mu.Lock()
			if len(c.queue) > 0 {
				close(c.queue[0].lead)
			} else {
				c.leading = false
			}
			c.mu.Unlock()
		})
	}
	e.commitBatch(context.WithoutCancel(ctx), c, batch, prev, handoff)
	close(mine)
	handoff()
	<-j.done
	return j.commit, j.err
}

// takeBatch removes from the queue's head the jobs that can share one
// transaction: at most n, validated against the given schema version (a
// commit is checked against the version its documents were validated
// with).
func takeBatch(queue *[]*job, n int, version int) []*job {
	q := *queue
	k := 0
	for k < len(q) && k < n && q[k].d.SchemaVersion == version {
		k++
	}
	batch := append([]*job(nil), q[:k]...)
	*queue = append(q[:0], q[k:]...)
	return batch
}

var errAllFailed = errors.New("every write of the batch failed")

// commitBatch commits the batch's jobs, and those it takes in from the
// queue once prev (the previous batch, or nil) is done, in one transaction,
// and calls handoff once their sequence numbers are allocated (it may not
// call it at all on failure; the caller does then).
func (e *Engine) commitBatch(ctx context.Context, c *committer, batch []*job, prev <-chan struct{}, handoff func()) {
	// Optimistically, the batch runs without savepoints: a savepoint makes
	// Postgres open a subtransaction for each job, which costs more than
	// the job's own statements. If any job fails, the whole transaction is
	// rolled back and the batch runs again with one savepoint per job, so
	// that the failure stays that job's own.
	err := e.runBatch(ctx, &batch, c, prev, handoff)
	if errors.Is(err, errRetryIsolated) {
		err = e.runBatch(ctx, &batch, nil, nil, handoff)
	}
	for _, j := range batch {
		if err != nil && j.err == nil {
			j.err = err
			j.commit = nil
		}
		if j.err == nil {
			e.onCommit(j.commit)
		}
		close(j.done)
	}
}

// errRetryIsolated says a job of an optimistic batch failed.
var errRetryIsolated = errors.New("a write of the batch failed; run it again with savepoints")

// runBatch runs the batch in one transaction. Without savepoints (c not
// nil), the first failing job fails the attempt with errRetryIsolated (for
// a batch of one, with the job's own error), and the batch takes in the
// jobs queued on c by the time prev is done, adding them to *batch. With
// savepoints (c nil), a failing job is rolled back alone and keeps its
// error in j.err.
func (e *Engine) runBatch(ctx context.Context, batch *[]*job, c *committer, prev <-chan struct{}, handoff func()) error {
	jobs := *batch
	savepoints := c == nil
	d, s := jobs[0].d, jobs[0].s
	var committed []*job
	var writers []*postgres.Writer
	var metas []postgres.CommitMeta
	return e.store.InCommitTx(ctx, func(tx *postgres.Tx) error {
		committed, writers, metas = committed[:0], writers[:0], metas[:0]
		// add runs job j with its Writer w.
		add := func(j *job, w *postgres.Writer, i int) error {
			j.err = nil
			if !savepoints {
				// The job's statements stay queued and go with the
				// batch's commit row in one round trip (Tx.Finish).
				if err := j.apply(ctx, w); err != nil {
					if len(*batch) == 1 {
						j.err = err
						return err
					}
					return errRetryIsolated
				}
			} else {
				// The savepoint and its release travel with the job's own
				// statements: one round trip per job.
				sp := fmt.Sprintf("w%d", i)
				w.Savepoint(sp)
				err := j.apply(ctx, w)
				if err == nil {
					w.Release(sp)
					err = w.Flush(ctx)
				}
				if err != nil {
					j.err = err
					return tx.RollbackTo(ctx, sp)
				}
			}
			committed = append(committed, j)
			writers = append(writers, w)
			metas = append(metas, j.meta)
			return nil
		}
		ws, err := tx.NewWriters(ctx, d, s, len(jobs))
		if err != nil {
			return err
		}
		for i, j := range jobs {
			if err := add(j, ws[i], i); err != nil {
				return err
			}
		}
		if !savepoints {
			more, mws, err := topUp(ctx, tx, c, prev, ws[0], d.SchemaVersion, maxBatch-len(jobs))
			if err != nil {
				return err
			}
			for i, j := range more {
				*batch = append(*batch, j)
				if err := add(j, mws[i], len(jobs)+i); err != nil {
					return err
				}
			}
		}
		if len(committed) == 0 {
			return errAllFailed
		}
		// The commit rows and COMMIT go with the jobs' last statements;
		// the lead passes on as soon as the counter row is locked.
		commits, err := tx.FinishCommit(ctx, writers, metas, handoff)
		if err != nil {
			if !savepoints && len(*batch) > 1 && !errors.Is(err, postgres.ErrCommitFailed) {
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

// topUp waits until prev (the previous batch) is done, having sent the
// statements queued so far so that Postgres runs them meanwhile, and then
// takes up to n jobs of the given schema version queued on c since the
// batch began, with Writers in w's transaction for them.
func topUp(ctx context.Context, tx *postgres.Tx, c *committer, prev <-chan struct{}, w *postgres.Writer, version, n int) ([]*job, []*postgres.Writer, error) {
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
	c.mu.Lock()
	more := takeBatch(&c.queue, n, version)
	c.mu.Unlock()
	if len(more) == 0 {
		return nil, nil, nil
	}
	ws, err := tx.AddWriters(ctx, w, len(more))
	return more, ws, err
}

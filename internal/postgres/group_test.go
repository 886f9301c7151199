package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

// The queue of group commit, with a fake batchRunner: which jobs share a
// batch, when the next batch starts, what it waits for.

// wait is how long a test waits for something that should happen at once.
const wait = 30 * time.Second

// fakeBatch is one call of fakeRunner: the test inspects it and decides
// when it hands the lead on and when it returns.
type fakeBatch struct {
	batch   []*job
	prev    <-chan struct{}
	handoff func()
	release chan struct{} // closed by the test: the batch returns
}

// fakeRunner returns a batchRunner that sends each batch to the test
// and, once the test releases it, marks every job committed.
func fakeRunner(batches chan<- *fakeBatch) batchRunner {
	return func(_ context.Context, _ *group, batch []*job, prev <-chan struct{}, handoff func()) []*job {
		b := &fakeBatch{batch: batch, prev: prev, handoff: handoff, release: make(chan struct{})}
		batches <- b
		<-b.release
		for _, j := range batch {
			j.commit = &sluice.Commit{Message: j.spec.Meta.Message}
		}
		return batch
	}
}

// fakeJob is a job for database 1 at schema version, named name.
func fakeJob(name string, version int) *job {
	return newJob(WriteSpec{Database: &sluice.Database{ID: 1, SchemaVersion: version}, Meta: CommitMeta{Message: name}})
}

// submit queues j and runs it in a goroutine; the returned channel is
// closed once j is answered. It also reports whether j leads.
func submit(gs *groups, j *job, run batchRunner) (<-chan struct{}, bool) {
	g, lead := gs.join(j)
	done := make(chan struct{})
	go func() {
		defer close(done)
		gs.await(context.Background(), g, j, lead, run)
	}()
	return done, lead
}

func nextBatch(t *testing.T, batches <-chan *fakeBatch) *fakeBatch {
	t.Helper()
	select {
	case b := <-batches:
		return b
	case <-time.After(wait):
		t.Fatal("no batch started")
		return nil
	}
}

func names(jobs []*job) string {
	s := ""
	for i, j := range jobs {
		if i > 0 {
			s += ","
		}
		s += j.spec.Meta.Message
	}
	return s
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(wait):
		t.Fatalf("%s: still waiting", what)
	}
}

// TestGroupQueue follows one database's queue: the first job leads a batch
// of its own; jobs queued meanwhile make the next batch, which starts once
// the first hands the lead on (before it is done) and sees the first
// batch as the one to wait for; a job of another schema version waits for
// a batch of its own; and the database's entry goes when all is done.
func TestGroupQueue(t *testing.T) {
	t.Parallel()
	var gs groups
	batches := make(chan *fakeBatch)
	run := fakeRunner(batches)

	aDone, lead := submit(&gs, fakeJob("a", 1), run)
	if !lead {
		t.Fatal("the first job does not lead")
	}
	first := nextBatch(t, batches)
	if names(first.batch) != "a" || first.prev != nil {
		t.Fatalf("first batch %s (prev %v), want a with nothing before it", names(first.batch), first.prev)
	}
	var done []<-chan struct{}
	for _, name := range []string{"b", "c", "d"} {
		d, lead := submit(&gs, fakeJob(name, 1), run)
		if lead {
			t.Fatalf("%s leads while a batch runs", name)
		}
		done = append(done, d)
	}
	eDone, _ := submit(&gs, fakeJob("e", 2), run)

	// The first batch holds the counter row: the next one starts while
	// the first waits for its COMMIT, and must wait for that.
	first.handoff()
	second := nextBatch(t, batches)
	if names(second.batch) != "b,c,d" {
		t.Fatalf("second batch %s, want b,c,d", names(second.batch))
	}
	if second.prev == nil || closed(second.prev) {
		t.Fatal("the second batch does not see the first as running")
	}
	close(first.release)
	waitClosed(t, aDone, "job a")
	waitClosed(t, second.prev, "the first batch's inflight channel")

	second.handoff()
	third := nextBatch(t, batches)
	if names(third.batch) != "e" {
		t.Fatalf("third batch %s, want e (another schema version)", names(third.batch))
	}
	close(third.release)
	close(second.release)
	for _, d := range append(done, eDone) {
		waitClosed(t, d, "a job")
	}
	gs.mu.Lock()
	left := len(gs.byDB)
	gs.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d groups left after every job is done", left)
	}
}

// TestGroupQueueCapsBatches queues more jobs than a batch holds while one
// runs: they make two batches, in order.
func TestGroupQueueCapsBatches(t *testing.T) {
	t.Parallel()
	var gs groups
	batches := make(chan *fakeBatch)
	run := fakeRunner(batches)
	submit(&gs, fakeJob("first", 1), run)
	first := nextBatch(t, batches)
	var done []<-chan struct{}
	for i := range maxBatch + 5 {
		d, _ := submit(&gs, fakeJob(fmt.Sprint(i), 1), run)
		done = append(done, d)
	}
	close(first.release) // returning hands the lead on too
	second := nextBatch(t, batches)
	close(second.release)
	third := nextBatch(t, batches)
	close(third.release)
	if len(second.batch) != maxBatch || second.batch[0].spec.Meta.Message != "0" || len(third.batch) != 5 || third.batch[0].spec.Meta.Message != fmt.Sprint(maxBatch) {
		t.Fatalf("batches of %d from %s and %d from %s, want %d from 0 and 5 from %d",
			len(second.batch), second.batch[0].spec.Meta.Message, len(third.batch), third.batch[0].spec.Meta.Message, maxBatch, maxBatch)
	}
	for _, d := range done {
		waitClosed(t, d, "a job")
	}
}

// TestGroupQueueAfterIdle: once a database's queue went idle and was
// dropped, the next job leads a batch at once, with nothing to wait for.
func TestGroupQueueAfterIdle(t *testing.T) {
	t.Parallel()
	var gs groups
	batches := make(chan *fakeBatch)
	run := fakeRunner(batches)
	for _, name := range []string{"a", "b"} {
		d, lead := submit(&gs, fakeJob(name, 1), run)
		if !lead {
			t.Fatalf("job %s does not lead an idle queue", name)
		}
		b := nextBatch(t, batches)
		if b.prev != nil {
			t.Fatalf("job %s waits for a batch that is done", name)
		}
		close(b.release)
		waitClosed(t, d, "job "+name)
	}
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestGroupCommitDoesNotWaitForALockHeldElsewhere: another transaction
// holds a document (a large write still reading its body, a SQL client:
// a row lock on Note/c, or its uncommitted insert of Note/n); a grouped
// write of it waits for it, and a grouped write of Note/z, queued
// meanwhile, commits while the document is still held. The write of the
// held document led a batch that waited in Postgres for it, and every
// grouped write of the database queued behind (an insert did until
// batchLockWait bounded the wait: NOWAIT cannot ask for one). It commits
// once the document is free, after Note/z.
func TestGroupCommitDoesNotWaitForALockHeldElsewhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key string
		hold      string // the other transaction's statement
		create    bool   // the write creates key
	}{
		{name: "row lock", key: "c", hold: "SELECT FROM %s WHERE _id = 'Note/c' FOR UPDATE"},
		{name: "uncommitted insert", key: "n", hold: "INSERT INTO %s (_id, _commit_uid, text) VALUES ('Note/n', 0, 'other')", create: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			heldElsewhere(t, tc.key, tc.hold, tc.create)
		})
	}
}

func heldElsewhere(t *testing.T, key, hold string, create bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	// A statement_timeout past the test's deadline: the default, 30 s, is
	// the deadline too, and would end the wait as the test gives up.
	db, d, s, hook := openNotesAt(t, pgtest.NewDatabase(t), StatementTimeout(4*wait))
	insertNotes(t, db, d, s, "c", "z")
	holder, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(ctx, fmt.Sprintf(hold, classTable(d, "Note"))); err != nil {
		t.Fatal(err)
	}
	write := func(key string, create bool) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Group: true, Meta: CommitMeta{Message: key},
				Documents: func(ctx context.Context, w *Writer) error {
					if create {
						return w.Insert(ctx, notes(key))
					}
					return w.Replace(ctx, notes(key), false)
				}})
			done <- err
		}()
		return done
	}
	held := write(key, create)
	eventually.True(t, wait, "the write of the held document waits for it", func() bool {
		var n int
		err := db.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
		return err == nil && n == 1
	})
	z := write("z", false)
	select {
	case err := <-z:
		if err != nil {
			t.Fatalf("the write of Note/z: %v", err)
		}
	case <-time.After(wait):
		t.Fatalf("the write of Note/z waited for Note/%s, held by another transaction", key)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-held:
		if err != nil {
			t.Fatalf("the write of Note/%s: %v", key, err)
		}
	case <-time.After(wait):
		t.Fatalf("the write of Note/%s did not commit once it was free", key)
	}
	var got []string
	hook.mu.Lock()
	for _, c := range hook.commits {
		got = append(got, c.Message)
	}
	hook.mu.Unlock()
	if len(got) != 4 || got[2] != "z" || got[3] != key {
		t.Fatalf("commits %q, want the two inserts, then z, then %s", got, key)
	}
}

// TestGroupCommitWaitsOutAnotherBatch: another process's batch holds its
// documents until its COMMIT, a millisecond or two; a batch that wants
// one of them waits for it and keeps all its commits (each of a hot
// document's writes failed the whole batch, and left it, when a batch
// asked for its locks without waiting: two replicas writing one document
// wrote at half the rate). First a transaction holds Note/x until the
// batch waits for it; then two processes' batches replace Note/x at once,
// round after round. The wait is a minute here, not batchLockWait: that
// a batch waits at all is what is tested (with NOWAIT it cannot), and a
// loaded machine may take longer than 100 ms to end a transaction.
// TestGroupCommitDoesNotWaitForALockHeldElsewhere tests the bound.
func TestGroupCommitWaitsOutAnotherBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	long := func(o *options) { o.batchLockWait = time.Minute }
	db, d, s, _ := openNotesAt(t, url, long)
	peer := openPeer(t, url, long)
	insertNotes(t, db, d, s, "x")
	replace := func() *job {
		return newJob(WriteSpec{Database: d, Schema: s, Group: true,
			Documents: func(ctx context.Context, w *Writer) error { return w.Replace(ctx, note("x"), false) }})
	}
	check := func(j *job) {
		t.Helper()
		if j.alone != nil || j.err != nil {
			t.Fatalf("the replace of Note/x left its batch (%t), or failed: %v", j.alone != nil, j.err)
		}
	}
	holder, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(ctx, fmt.Sprintf("SELECT FROM %s WHERE _id = 'Note/x' FOR UPDATE", classTable(d, "Note"))); err != nil {
		t.Fatal(err)
	}
	j := replace()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		db.commitBatch(ctx, &group{}, []*job{j}, nil, func() {})
	}()
	eventually.True(t, wait, "the batch waits for Note/x, or is done", func() bool {
		var n int
		err := db.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
		return err == nil && n == 1 || closed(ran)
	})
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-ran
	check(j)
	for range 20 {
		a, b := replace(), replace()
		var wg sync.WaitGroup
		wg.Go(func() { db.commitBatch(ctx, &group{}, []*job{a}, nil, func() {}) })
		wg.Go(func() { peer.commitBatch(ctx, &group{}, []*job{b}, nil, func() {}) })
		wg.Wait()
		check(a)
		check(b)
	}
}

// TestCommitAloneAnswersItsOwnError: a job that leaves a batch with an
// error worked out in the batch's rolled-back transaction is answered
// its run alone's outcome, also when that fails before the job runs
// (here the pool is closed: no connection).
func TestCommitAloneAnswersItsOwnError(t *testing.T) {
	t.Parallel()
	db, d, s, _ := openNotes(t)
	j := newJob(WriteSpec{Database: d, Schema: s, Group: true,
		Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note("n")) }})
	j.err = errors.New("document Note/n already exists (in a rolled-back batch)")
	db.pool.Close()
	db.commitAlone(context.Background(), j)
	if j.err == nil || strings.Contains(j.err.Error(), "rolled-back batch") {
		t.Fatalf("the job run alone without a connection answered %v, want its own failure", j.err)
	}
}

// TestCommitAloneEndsWithItsClient: a write that left its batch, waiting
// alone for a document another transaction holds, stops waiting when its
// client goes away, as a write that never joined a batch does (it ran
// detached from its client, waiting on until statement_timeout, then
// committing for nobody).
func TestCommitAloneEndsWithItsClient(t *testing.T) {
	t.Parallel()
	db, d, s, hook := openNotesAt(t, pgtest.NewDatabase(t), StatementTimeout(4*wait))
	insertNotes(t, db, d, s, "c")
	holder, err := db.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(context.Background(), fmt.Sprintf("SELECT FROM %s WHERE _id = 'Note/c' FOR UPDATE", classTable(d, "Note"))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Group: true, Meta: CommitMeta{Message: "c"},
			Documents: func(ctx context.Context, w *Writer) error { return w.Replace(ctx, notes("c"), false) }})
		done <- err
	}()
	// Alone: waiting for Note/c longer than a batch ever does.
	eventually.True(t, wait, "the write waits alone for Note/c", func() bool {
		var n int
		err := db.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND clock_timestamp() - query_start > 10 * $1::interval`, batchLockWait.String()).Scan(&n)
		return err == nil && n == 1
	})
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the write whose client went away committed")
		}
	case <-time.After(wait):
		t.Fatal("the write alone went on waiting for Note/c after its client went away")
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if n := len(hook.commits); n != 1 {
		t.Fatalf("%d commits, want the insert's alone", n)
	}
}

// TestGroupCommitWaitsOutASchemaChangeElsewhere: another process's schema
// change holds the database's counter row and its class table (an ALTER
// TABLE) for longer than batchLockWait; grouped writes meanwhile wait for
// it and commit once it is done. A batch's insert that timed out on the
// table's lock took its statement out of the connection's cache; the run
// with savepoints prepared it again before its SAVEPOINT ran, the prepare
// timed out in turn, and the write answered 500, `savepoint "w0" does not
// exist`. The first round prepares the statements (a prepare sent with
// BEGIN waits without batchLockWait); the next ones find them prepared.
func TestGroupCommitWaitsOutASchemaChangeElsewhere(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	url := pgtest.NewDatabase(t)
	db, d, s, _ := openNotesAt(t, url, StatementTimeout(4*wait))
	peer := openPeer(t, url)
	const writes = 4
	for round := range 3 {
		holder, err := peer.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec(ctx, lockCounterSQL, d.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec(ctx, "LOCK TABLE "+classTable(d, "Note")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, writes)
		for i := range writes {
			go func() {
				_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Group: true,
					Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(fmt.Sprint(round, "-", i))) }})
				done <- err
			}()
		}
		// A write waits past its batch's runs (bounded by
		// batchLockWait): alone, without a bound.
		eventually.True(t, wait, "a write waits alone for the schema change", func() bool {
			var n int
			err := db.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND now() - state_change > interval '1 second'").Scan(&n)
			return err == nil && n > 0 || len(done) == writes
		})
		if err := holder.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		for range writes {
			if err := <-done; err != nil {
				t.Fatalf("round %d: a write queued behind the schema change: %v", round, err)
			}
		}
	}
}

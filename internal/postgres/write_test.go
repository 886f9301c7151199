package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/schema"
)

// DB.Write against a real Postgres: group commit's batches, its isolation
// of failures, Before's atomicity with the documents, and the commit hook.

// hookLog records what the OnCommit function saw.
type hookLog struct {
	mu      sync.Mutex
	commits []*sluice.Commit
	errs    []error
}

func (h *hookLog) seqs() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int64
	for _, c := range h.commits {
		out = append(out, c.Seq)
	}
	return out
}

// openNotes opens a migrated database holding organization o and its
// database o/notes (one class, Note), with a commit hook that checks each
// commit is durable (readable from another connection) when it is called.
func openNotes(t *testing.T) (*DB, *sluice.Database, *sluice.Schema, *hookLog) {
	t.Helper()
	return openNotesAt(t, pgtest.NewDatabase(t))
}

// openNotesAt is openNotes on the Postgres database at url, opened with
// opts besides.
func openNotesAt(t *testing.T, url string, opts ...Option) (*DB, *sluice.Database, *sluice.Schema, *hookLog) {
	t.Helper()
	ctx := context.Background()
	h := &hookLog{}
	var db *DB
	db, err := Open(ctx, url, slog.New(slog.NewTextHandler(io.Discard, nil)), append(opts, OnCommit(func(c *sluice.Commit) {
		cs, err := db.CommitsAfter(ctx, &sluice.Database{ID: c.DatabaseID}, c.Seq-1, 1)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil || len(cs) != 1 || cs[0].Seq != c.Seq {
			h.errs = append(h.errs, errors.New("the hook saw a commit not readable yet"))
		}
		h.commits = append(h.commits, c)
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := schema.Parse("type Note { text: String! }")
	if err != nil {
		t.Fatal(err)
	}
	d := &sluice.Database{Org: "o", Name: "notes"}
	_, err = db.Write(ctx, WriteSpec{Before: func(ctx context.Context, tx *Tx) error {
		if err := tx.CreateOrganization(ctx, "o"); err != nil {
			return err
		}
		return tx.CreateDatabase(ctx, d, s, Creator{})
	}})
	if err != nil {
		t.Fatal(err)
	}
	return db, d, s, h
}

func note(key string) []*sluice.Document {
	return []*sluice.Document{{ID: "Note/" + key, Type: "Note", Fields: map[string]any{"text": key}}}
}

// batchTest runs grouped writes on o/notes: the first one's Documents
// blocks (its first run only) until every other job is queued behind it,
// so that all of them make one batch.
type batchTest struct {
	db      *DB
	d       *sluice.Database
	s       *sluice.Schema
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	calls   map[string]*atomic.Int32
}

func newBatchTest(db *DB, d *sluice.Database, s *sluice.Schema) *batchTest {
	return &batchTest{db: db, d: d, s: s, entered: make(chan struct{}), release: make(chan struct{}), calls: map[string]*atomic.Int32{}}
}

// job returns a grouped write named name whose Documents runs docs,
// counting its runs.
func (b *batchTest) job(name string, docs func(ctx context.Context, w *Writer) error) *job {
	n := &atomic.Int32{}
	b.calls[name] = n
	return newJob(WriteSpec{Database: b.d, Schema: b.s, Group: true, Meta: CommitMeta{Message: name, User: "u"},
		Documents: func(ctx context.Context, w *Writer) error {
			n.Add(1)
			return docs(ctx, w)
		}})
}

// blocking wraps docs so that its first run waits for release.
func (b *batchTest) blocking(docs func(ctx context.Context, w *Writer) error) func(ctx context.Context, w *Writer) error {
	return func(ctx context.Context, w *Writer) error {
		if err := docs(ctx, w); err != nil {
			return err
		}
		b.once.Do(func() {
			close(b.entered)
			<-b.release
		})
		return nil
	}
}

// run submits lead (whose Documents must be blocking) with ctx, then the
// others once it runs, and returns when all are answered.
func (b *batchTest) run(t *testing.T, ctx context.Context, lead *job, others ...*job) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { b.db.groups.commit(ctx, lead, b.db.commitBatch) })
	select {
	case <-b.entered:
	case <-time.After(wait):
		t.Fatal("the first write did not start")
	}
	for _, j := range others {
		g, leads := b.db.groups.join(j)
		if leads {
			t.Fatal("a write leads while a batch runs")
		}
		wg.Go(func() { b.db.groups.await(context.Background(), g, j, false, b.db.commitBatch) })
	}
	close(b.release)
	wg.Wait()
}

// xmins counts the transactions that wrote d's commit rows.
func xmins(t *testing.T, db *DB, d *sluice.Database) int {
	t.Helper()
	var n int
	if err := db.pool.QueryRow(context.Background(), "SELECT count(DISTINCT xmin::text) FROM sluice.commits WHERE db_id = $1", d.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGroupCommitSharesOneTransaction queues three writes behind a
// running one whose client goes away: the four make one transaction (one
// commit row xmin), each its own commit, numbered in queue order, each run
// once (no savepoints, no retry), each seen by the hook once durable; a
// read after it reflects the last commit's position, tagged.
func TestGroupCommitSharesOneTransaction(t *testing.T) {
	t.Parallel()
	db, d, s, hook := openNotes(t)
	b := newBatchTest(db, d, s)
	insert := func(key string) func(ctx context.Context, w *Writer) error {
		return func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(key)) }
	}
	jobs := []*job{b.job("a", b.blocking(insert("a"))), b.job("b", insert("b")), b.job("c", insert("c")), b.job("d", insert("d"))}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-b.entered; cancel() }() // the first client leaves
	b.run(t, ctx, jobs[0], jobs[1:]...)

	for i, j := range jobs {
		if j.err != nil || j.commit == nil || j.commit.Seq != int64(i+1) || j.commit.Message != j.spec.Meta.Message || j.commit.NumChanges != 1 {
			t.Fatalf("write %s: commit %+v, error %v; want commit %d", j.spec.Meta.Message, j.commit, j.err, i+1)
		}
		if n := b.calls[j.spec.Meta.Message].Load(); n != 1 {
			t.Errorf("write %s ran %d times, want once", j.spec.Meta.Message, n)
		}
	}
	if n := xmins(t, db, d); n != 1 {
		t.Fatalf("the batch's commits were written by %d transactions, want 1", n)
	}
	// Each commit's position is the log's, tagged with its stamp as the
	// log holds it; a read reflects the batch's last, as tagged: the
	// counter row keeps the stamp of the batch's last commit, of the time
	// every commit row of the batch got.
	for _, j := range jobs {
		c, err := db.Commit(context.Background(), d, j.commit.Seq, -1, -1)
		if err != nil || c.End() != j.commit.End() || c.End().Tag == "" {
			t.Fatalf("commit %d as the log holds it: %v (%v), as the write answered it: %v", j.commit.Seq, c.End(), err, j.commit.End())
		}
	}
	for _, one := range []bool{true, false} {
		snap := db.Snapshot(d)
		if one {
			snap.OneStatement()
		}
		_, _, err := db.Document(WithSnapshot(context.Background(), snap), d, s, "Note/a")
		pos, _ := snap.Position()
		snap.Close()
		if err != nil || pos != jobs[3].commit.End() {
			t.Fatalf("a read after the batch (one statement: %v) reflects %v (%v), want %v", one, pos, err, jobs[3].commit.End())
		}
	}
	if got := hook.seqs(); len(got) != 4 || got[0] != 1 || got[3] != 4 {
		t.Fatalf("hook saw commits %v, want 1 to 4", got)
	}
	if len(hook.errs) > 0 {
		t.Fatal(hook.errs[0])
	}
}

// TestGroupCommitSharesStatements queues thirteen writes of one to three
// documents behind a running one: their rows go in shared multi-row
// statements (pipeline.go), and still each document and each change row
// belongs to its own write's commit, in order.
func TestGroupCommitSharesStatements(t *testing.T) {
	t.Parallel()
	db, d, s, _ := openNotes(t)
	b := newBatchTest(db, d, s)
	keys := map[string][]string{}
	insert := func(name string, n int) func(ctx context.Context, w *Writer) error {
		var docs []*sluice.Document
		for k := range n {
			key := fmt.Sprintf("%s-%d", name, k)
			keys[name] = append(keys[name], "Note/"+key)
			docs = append(docs, note(key)...)
		}
		return func(ctx context.Context, w *Writer) error { return w.Insert(ctx, docs) }
	}
	var jobs []*job
	for i := range 14 {
		name := fmt.Sprintf("w%02d", i)
		docs := insert(name, i%3+1)
		if i == 0 {
			docs = b.blocking(docs)
		}
		jobs = append(jobs, b.job(name, docs))
	}
	b.run(t, context.Background(), jobs[0], jobs[1:]...)

	if n := xmins(t, db, d); n != 1 {
		t.Fatalf("the batch's commits were written by %d transactions, want 1", n)
	}
	for i, j := range jobs {
		name := j.spec.Meta.Message
		if j.err != nil || j.commit == nil || j.commit.Seq != int64(i+1) || j.commit.NumChanges != len(keys[name]) {
			t.Fatalf("write %s: commit %+v, error %v; want commit %d of %d changes", name, j.commit, j.err, i+1, len(keys[name]))
		}
		c, err := db.Commit(context.Background(), d, j.commit.Seq, -1, -1)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ch := range c.Changes {
			ids = append(ids, ch.DocID)
		}
		if !slices.Equal(ids, keys[name]) {
			t.Fatalf("commit %d (write %s) holds changes of %v, want %v", c.Seq, name, ids, keys[name])
		}
		for _, id := range keys[name] {
			var uid int64
			if err := db.pool.QueryRow(context.Background(), "SELECT _commit_uid FROM "+classTable(d, "Note")+" WHERE _id = $1", id).Scan(&uid); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if uid != j.commit.UID {
				t.Fatalf("%s was written by commit uid %d, want %d (write %s)", id, uid, j.commit.UID, name)
			}
		}
	}
}

// TestGroupCommitIsolatesAFailure fails the third write of a batch in
// three ways: a statement Postgres refuses at commit (a duplicate id), an
// error before its statements were sent, and one after. The batch runs
// again with savepoints: the others commit, numbered without a gap, in one
// transaction; the failed write gets its own error and leaves nothing.
func TestGroupCommitIsolatesAFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fail func(ctx context.Context, w *Writer) error
		want string
	}{
		{"duplicate", func(ctx context.Context, w *Writer) error {
			if err := w.Insert(ctx, note("x")); err != nil {
				return err
			}
			return w.Insert(ctx, note("a"))
		}, "document Note/a already exists"},
		{"before sending", func(ctx context.Context, w *Writer) error {
			if err := w.Insert(ctx, note("x")); err != nil {
				return err
			}
			return sluice.Errorf(sluice.CodeInvalid, "refused")
		}, "refused"},
		{"stale", func(ctx context.Context, w *Writer) error {
			if err := w.Insert(ctx, note("x")); err != nil {
				return err
			}
			doc := note("a")
			doc[0].Expect.Version = "zz" // not Note/a's
			return w.Replace(ctx, doc, false)
		}, "document Note/a is not as the request expected"},
		{"after sending", func(ctx context.Context, w *Writer) error {
			if err := w.Insert(ctx, note("x")); err != nil {
				return err
			}
			if err := w.Flush(ctx); err != nil {
				return err
			}
			return sluice.Errorf(sluice.CodeInvalid, "refused")
		}, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, d, s, hook := openNotes(t)
			b := newBatchTest(db, d, s)
			insert := func(key string) func(ctx context.Context, w *Writer) error {
				return func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(key)) }
			}
			a, bj, c, dj := b.job("a", b.blocking(insert("a"))), b.job("b", insert("b")), b.job("c", tc.fail), b.job("d", insert("d"))
			b.run(t, context.Background(), a, bj, c, dj)

			if c.err == nil || !strings.Contains(c.err.Error(), tc.want) || c.commit != nil {
				t.Fatalf("failing write: commit %+v, error %v; want %q", c.commit, c.err, tc.want)
			}
			for i, j := range []*job{a, bj, dj} {
				if j.err != nil || j.commit == nil || j.commit.Seq != int64(i+1) {
					t.Fatalf("write %s: commit %+v, error %v; want commit %d", j.spec.Meta.Message, j.commit, j.err, i+1)
				}
			}
			if a, c := b.calls["a"].Load(), b.calls["c"].Load(); a != 2 || c != 2 {
				t.Fatalf("the first and failing writes ran %d and %d times, want twice (then with savepoints)", a, c)
			}
			if _, _, err := db.Document(context.Background(), d, s, "Note/x"); sluice.ErrorCode(err) != sluice.CodeNotFound {
				t.Fatalf("the failed write's document was written: %v", err)
			}
			if n := xmins(t, db, d); n != 1 {
				t.Fatalf("the batch's commits were written by %d transactions, want 1", n)
			}
			if got := hook.seqs(); len(got) != 3 {
				t.Fatalf("hook saw commits %v, want 1 to 3", got)
			}
		})
	}
}

// TestWriteBeforeCommitsWithDocuments: what Before does commits with the
// documents, and is rolled back with them; a write without documents makes
// no commit and calls no hook.
func TestWriteBeforeCommitsWithDocuments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, hook := openNotes(t)
	org := func(name string) func(ctx context.Context, tx *Tx) error {
		return func(ctx context.Context, tx *Tx) error { return tx.CreateOrganization(ctx, name) }
	}
	insert := func(key string) func(ctx context.Context, w *Writer) error {
		return func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(key)) }
	}
	// The documents fail (a duplicate, reported by the commit's last
	// round trip): the organization is not created either.
	if _, err := db.Write(ctx, WriteSpec{Before: org("p"), Database: d, Schema: s, Documents: insert("a")}); err != nil {
		t.Fatal(err)
	}
	_, err := db.Write(ctx, WriteSpec{Before: org("q"), Database: d, Schema: s, Documents: insert("a")})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	// Before fails: the documents are not written.
	_, err = db.Write(ctx, WriteSpec{Before: org("p"), Database: d, Schema: s, Documents: insert("b")})
	if sluice.ErrorCode(err) != sluice.CodeConflict {
		t.Fatalf("existing organization: %v", err)
	}
	if _, _, err := db.Document(ctx, d, s, "Note/b"); sluice.ErrorCode(err) != sluice.CodeNotFound {
		t.Fatalf("Note/b was written: %v", err)
	}
	c, err := db.Write(ctx, WriteSpec{Before: org("q")})
	if err != nil || c != nil {
		t.Fatalf("a write without documents: commit %v, error %v", c, err)
	}
	if got := hook.seqs(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("hook saw commits %v, want 1", got)
	}
	if len(hook.errs) > 0 {
		t.Fatal(hook.errs[0])
	}
}

// TestDeleteDatabaseDeletesItsLog: a deleted database's commits and
// changes go with it (migration 16 keeps by a trigger what the commit
// rows' foreign key did), and another database's stay.
func TestDeleteDatabaseDeletesItsLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	other := &sluice.Database{Org: "o", Name: "other"}
	if _, err := db.Write(ctx, WriteSpec{Before: func(ctx context.Context, tx *Tx) error { return tx.CreateDatabase(ctx, other, s, Creator{}) }}); err != nil {
		t.Fatal(err)
	}
	other.SchemaVersion = 1
	for _, target := range []*sluice.Database{d, other} {
		for _, key := range []string{"a", "b"} {
			if _, err := db.Write(ctx, WriteSpec{Database: target, Schema: s, Group: true, Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(key)) }}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.Write(ctx, WriteSpec{Before: func(ctx context.Context, tx *Tx) error { return tx.DeleteDatabase(ctx, d) }}); err != nil {
		t.Fatal(err)
	}
	count := func(id int64) (commits, changes int) {
		err := db.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM sluice.commits WHERE db_id = $1),
			(SELECT count(*) FROM sluice.changes ch JOIN sluice.commits c ON c.uid = ch.commit_uid WHERE c.db_id = $1)`, id).Scan(&commits, &changes)
		if err != nil {
			t.Fatal(err)
		}
		return commits, changes
	}
	if commits, _ := count(d.ID); commits != 0 {
		t.Fatalf("the deleted database keeps %d commits", commits)
	}
	var orphans int
	if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM sluice.changes ch WHERE NOT EXISTS (SELECT 1 FROM sluice.commits c WHERE c.uid = ch.commit_uid)").Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Fatalf("%d change rows of no commit", orphans)
	}
	if commits, changes := count(other.ID); commits != 2 || changes != 2 {
		t.Fatalf("the other database keeps %d commits and %d change rows, want 2 and 2", commits, changes)
	}
}

// openPeer opens another DB on the Postgres database at url, as a second
// Sluice process sharing it would: a group-commit queue of its own.
func openPeer(t *testing.T, url string, opts ...Option) *DB {
	t.Helper()
	db, err := Open(context.Background(), url, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// notes returns the documents Note/key of keys.
func notes(keys ...string) []*sluice.Document {
	var docs []*sluice.Document
	for _, k := range keys {
		docs = append(docs, note(k)...)
	}
	return docs
}

// insertNotes writes Note/key for each key, one commit each.
func insertNotes(t *testing.T, db *DB, d *sluice.Database, s *sluice.Schema, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := db.Write(context.Background(), WriteSpec{Database: d, Schema: s, Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(k)) }}); err != nil {
			t.Fatal(err)
		}
	}
}

// concurrentWrite reports whether err is the error of a write Postgres
// ended because of another transaction (a deadlock).
func concurrentWrite(err error) bool {
	return sluice.ErrorCode(err) == sluice.CodeConflict && strings.Contains(sluice.ErrorMessage(err), "conflicted with a concurrent write")
}

// TestGroupCommitOverlappingWritesDoNotDeadlock runs 8 writers of
// overlapping sets of documents (replaces, patches and deletes of two or
// three of six notes, named in any order) through group commit, on two
// DBs sharing one Postgres database, as two Sluice processes do (one
// process's batches follow one another: on one DB this never failed).
// Every write locks its documents in id order; a batch locks those of its
// commits one commit after another, and it deadlocked with the other
// process's batches. No write may fail as conflicting with a concurrent
// write.
func TestGroupCommitOverlappingWritesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	db, d, s, _ := openNotesAt(t, url)
	dbs := []*DB{db, openPeer(t, url)}
	keys := []string{"a", "b", "c", "d", "e", "f"}
	insertNotes(t, db, d, s, keys...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writers, writes = 8, 150
	var conflicts, commits atomic.Int32
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			// A deadlock costs Postgres's deadlock_timeout (1 s): the
			// writers stop at the first.
			for i := 0; i < writes && conflicts.Load() == 0; i++ {
				var ks []string
				for _, k := range r.Perm(len(keys))[:2+r.IntN(2)] {
					ks = append(ks, keys[k])
				}
				docs := notes(ks...)
				ids := make([]string, len(docs))
				for k, doc := range docs {
					ids[k] = doc.ID
				}
				var write func(ctx context.Context, w *Writer) error
				switch r.IntN(3) {
				case 0:
					write = func(ctx context.Context, w *Writer) error { return w.Replace(ctx, docs, true) }
				case 1:
					write = func(ctx context.Context, w *Writer) error {
						return w.Patch(ctx, ids, nil, func(i int, _ []byte) (*sluice.Document, error) { return docs[i], nil })
					}
				default:
					write = func(ctx context.Context, w *Writer) error { return w.Delete(ctx, ids, nil) }
				}
				_, err := dbs[g%2].Write(ctx, WriteSpec{Database: d, Schema: s, Group: true, Meta: CommitMeta{Message: fmt.Sprintf("w%d-%d", g, i)}, Documents: write})
				switch {
				case err == nil:
					commits.Add(1)
				case sluice.ErrorCode(err) == sluice.CodeNotFound, errors.Is(err, ErrExists):
					// A patch or delete of a document deleted before,
					// or a replace that found a document missing and
					// another write created it (the engine runs it again).
				case concurrentWrite(err):
					conflicts.Add(1)
				default:
					errs <- fmt.Errorf("write %d of writer %d: %w", i, g, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := conflicts.Load(); n > 0 {
		t.Fatalf("%d grouped writes failed as conflicting with a concurrent write (%d committed before)", n, commits.Load())
	}
}

// TestGroupCommitWaitsInLockOrder sets up the cycle a batch closed: its
// first commit locks Note/c and Note/d; another write of Note/a and
// Note/c, grouped in another process or not grouped, locks Note/a and
// waits for Note/c; then the batch's second commit asks for Note/a and
// Note/b. Waiting, it deadlocked, and Postgres ended the other write,
// which had locked in order. The batch must not wait there: every write
// commits (the second, which finds Note/a held, leaves the batch and
// commits alone, after the other write: lockorder.go).
func TestGroupCommitWaitsInLockOrder(t *testing.T) {
	t.Parallel()
	for _, grouped := range []bool{true, false} {
		t.Run(fmt.Sprintf("other grouped %t", grouped), func(t *testing.T) {
			t.Parallel()
			url := pgtest.NewDatabase(t)
			db, d, s, _ := openNotesAt(t, url)
			peer := openPeer(t, url)
			insertNotes(t, db, d, s, "a", "b", "c", "d")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			b := newBatchTest(db, d, s)
			first := b.job("first", b.blocking(func(ctx context.Context, w *Writer) error { return w.Replace(ctx, notes("c", "d"), false) }))
			second := b.job("second", func(ctx context.Context, w *Writer) error { return w.Replace(ctx, notes("a", "b"), false) })
			batchDone := make(chan struct{})
			go func() {
				defer close(batchDone)
				db.groups.commit(ctx, first, db.commitBatch)
			}()
			select {
			case <-b.entered:
			case <-time.After(wait):
				t.Fatal("the batch did not start")
			}
			other := make(chan error, 1)
			go func() {
				_, err := peer.Write(ctx, WriteSpec{Database: d, Schema: s, Group: grouped, Meta: CommitMeta{Message: "other"},
					Documents: func(ctx context.Context, w *Writer) error { return w.Replace(ctx, notes("a", "c"), false) }})
				other <- err
			}()
			eventually.True(t, wait, "the other write waits for Note/c", func() bool {
				var n int
				err := db.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
				return err == nil && n == 1
			})
			g, leads := db.groups.join(second)
			if leads {
				t.Fatal("a write leads while a batch runs")
			}
			go db.groups.await(ctx, g, second, false, db.commitBatch)
			close(b.release)

			if err := <-other; err != nil {
				t.Fatalf("the other write: %v", err)
			}
			<-batchDone
			<-second.done
			for _, j := range []*job{first, second} {
				if j.err != nil || j.commit == nil {
					t.Fatalf("write %s: commit %+v, error %v", j.spec.Meta.Message, j.commit, j.err)
				}
			}
		})
	}
}

// TestGroupCommitFailsOnlyTheRequestThatCannotLock: a request of a batch
// that cannot lock what it asks for (another transaction holds Note/c)
// leaves the batch and runs alone, here until an operator's lock_timeout:
// the one that does not need Note/c commits, and the other fails on its
// own lock, as it would alone. (Both failed, after eight runs.)
func TestGroupCommitFailsOnlyTheRequestThatCannotLock(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	setup, d, s, _ := openNotesAt(t, url)
	insertNotes(t, setup, d, s, "a", "b", "c", "z")
	// The writes run on sessions with a lock_timeout (the setup did not:
	// a loaded cluster's other tests can hold it up longer).
	db := openPeer(t, url+"&options=-c%20lock_timeout%3D200")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Another transaction holds Note/c for the whole test.
	holder, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(ctx, fmt.Sprintf("SELECT FROM %s WHERE _id = 'Note/c' FOR UPDATE", classTable(d, "Note"))); err != nil {
		t.Fatal(err)
	}
	b := newBatchTest(db, d, s)
	first := b.job("first", b.blocking(func(ctx context.Context, w *Writer) error { return w.Replace(ctx, notes("z"), false) }))
	second := b.job("second", func(ctx context.Context, w *Writer) error { return w.Replace(ctx, notes("a", "b", "c"), false) })
	b.run(t, ctx, first, second)
	if first.err != nil || first.commit == nil {
		t.Fatalf("the write of Note/z: commit %+v, error %v", first.commit, first.err)
	}
	if sluice.ErrorCode(second.err) != sluice.CodeConflict {
		t.Fatalf("the write of Note/c: commit %+v, error %v, want a conflict", second.commit, second.err)
	}
}

// TestGroupCommitDoesNotRunABatchAgainBesideTheNext fails a batch at its
// last statements: an idempotency key that another binary (of migration
// 13, which takes no claim) recorded meanwhile cannot be recorded again,
// in the round trip of the commit rows and COMMIT. The batch ran again, with
// savepoints, after it had handed the lead on: beside the next batch,
// which had inserted Note/x, the document the batch inserts, and waited
// for the batch to be done before taking more jobs, while the batch's run
// again waited in Postgres for that insert: a wait cycle Postgres cannot
// see, held until statement_timeout ended the batch's wait. The batch may
// run again only before it hands the lead on: it then fails without
// waiting for the next, none of its writes answered as committed, and the
// next commits, first in the log.
func TestGroupCommitDoesNotRunABatchAgainBesideTheNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A statement_timeout past the test's deadline: the default, 30 s, is
	// the deadline too, and ended the stall as the test gave up waiting.
	db, d, s, hook := openNotesAt(t, pgtest.NewDatabase(t), StatementTimeout(4*wait))
	if _, err := db.Write(ctx, WriteSpec{Before: func(ctx context.Context, tx *Tx) error {
		return tx.CreateUser(ctx, &sluice.User{Name: "u", Org: "o"}, "x")
	}}); err != nil {
		t.Fatal(err)
	}
	u := &sluice.User{Name: "u", Org: "o"}
	if err := db.pool.QueryRow(ctx, "SELECT id FROM sluice.users WHERE name = 'u'").Scan(&u.ID); err != nil {
		t.Fatal(err)
	}
	b := newBatchTest(db, d, s)
	// The next batch's write sends its insert of Note/x itself, so that
	// the test knows when it holds it.
	sent := make(chan struct{})
	next := b.job("next", func(ctx context.Context, w *Writer) error {
		if err := w.Insert(ctx, note("x")); err != nil {
			return err
		}
		if err := w.Flush(ctx); err != nil {
			return err
		}
		close(sent)
		return nil
	})
	// The first write inserts Note/x; run again once the lead is handed
	// on, it does so after the next batch's insert (else which of the two
	// inserts first is a race).
	first := b.job("first", b.blocking(func(ctx context.Context, w *Writer) error {
		if closed(next.lead) {
			select {
			case <-sent:
			case <-time.After(wait):
			}
		}
		return w.Insert(ctx, note("x"))
	}))
	// The keyed write brings the next write into the queue once its batch
	// has taken its jobs: the next write makes the next batch.
	var queued sync.Once
	keyed := b.job("keyed", func(ctx context.Context, w *Writer) error {
		queued.Do(func() {
			// The key claimed, the other binary records it.
			if _, err := db.pool.Exec(ctx, `INSERT INTO sluice.idempotency_keys (user_id, key, db_id, request, seq, uid, answer)
				VALUES ($1, 'k', $2, 'other', 0, 0, '[]')`, u.ID, d.ID); err != nil {
				t.Error(err)
			}
			g, leads := db.groups.join(next)
			if leads {
				t.Error("a write leads while a batch runs")
			}
			go db.groups.await(context.Background(), g, next, false, db.commitBatch)
		})
		return w.Insert(ctx, note("k"))
	})
	keyed.spec.Idempotency = &IdempotencyKey{UserID: u.ID, Key: "k", Retention: time.Hour,
		Request: func() ([]byte, error) { return []byte("request"), nil },
		Answer:  func() ([]byte, error) { return []byte(`["k"]`), nil }}
	// What DB.Write does before a keyed write joins a batch.
	if err := db.prepareKey(ctx, keyed.spec.Idempotency); err != nil {
		t.Fatal(err)
	}

	go db.groups.commit(ctx, first, db.commitBatch)
	select {
	case <-b.entered:
	case <-time.After(wait):
		t.Fatal("the first write did not start")
	}
	g, leads := db.groups.join(keyed)
	if leads {
		t.Fatal("a write leads while a batch runs")
	}
	go db.groups.await(ctx, g, keyed, false, db.commitBatch)
	close(b.release)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		for _, j := range []*job{first, keyed, next} {
			<-j.done
		}
	}()
	select {
	case <-answered:
	case <-time.After(wait):
		// Show who waits for what, then end the wait in Postgres, so
		// that the test's writes end.
		var waits []string
		rows, err := db.pool.Query(ctx, `SELECT state || ' ' || coalesce(wait_event_type, '') || ': ' || left(query, 80)
			FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY pid`)
		if err == nil {
			waits, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		_, _ = db.pool.Exec(ctx, "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
		select {
		case <-answered:
			t.Fatalf("the writes stalled until the test cancelled the waits in Postgres; then the first batch's writes failed with %v, the next's with %v; backends (%v):\n%s",
				first.err, next.err, err, strings.Join(waits, "\n"))
		case <-time.After(wait):
			t.Fatalf("the writes stalled, and still did once the test cancelled the waits in Postgres; backends (%v):\n%s", err, strings.Join(waits, "\n"))
		}
	}

	// Run again with savepoints, before the next batch began, the keyed
	// write finds its key recorded for another request and is refused
	// alone; the first write commits, and the next write, after it, finds
	// Note/x written.
	if sluice.ErrorCode(keyed.err) != sluice.CodeUnprocessable || keyed.commit != nil {
		t.Errorf("the keyed write: commit %+v, error %v; want refused (Unprocessable)", keyed.commit, keyed.err)
	}
	if first.err != nil || first.commit == nil || first.commit.Seq != 1 {
		t.Fatalf("the first write: commit %+v, error %v; want commit 1", first.commit, first.err)
	}
	if !errors.Is(next.err, ErrExists) || next.commit != nil {
		t.Errorf("the next write: commit %+v, error %v; want Note/x found written", next.commit, next.err)
	}
	if a, n := b.calls["first"].Load(), b.calls["next"].Load(); a != 2 || n != 1 {
		t.Errorf("the first write ran %d times, the next %d; want twice (again with savepoints, before the next batch began) and once", a, n)
	}
	if _, _, err := db.Document(ctx, d, s, "Note/k"); sluice.ErrorCode(err) != sluice.CodeNotFound {
		t.Errorf("the refused write's Note/k was written: %v", err)
	}
	var uid int64
	if err := db.pool.QueryRow(ctx, "SELECT _commit_uid FROM "+classTable(d, "Note")+" WHERE _id = 'Note/x'").Scan(&uid); err != nil || uid != first.commit.UID {
		t.Errorf("Note/x was written by commit uid %d (%v), want the first write's %d", uid, err, first.commit.UID)
	}
	if got := hook.seqs(); len(got) != 1 || got[0] != 1 {
		t.Errorf("hook saw commits %v, want the first write's alone", got)
	}
}

// TestGroupCommitRunsADeadlockedCommitAgain: a commit that ends up run
// alone (its batch conflicted, and again with savepoints) and that
// Postgres then ends as deadlocked, with another process's write, runs
// again before its request is answered 409: alone, the same write usually
// commits. A lock it cannot get (lock_timeout) is not run
// again (TestGroupCommitFailsOnlyTheRequestThatCannotLock).
func TestGroupCommitRunsADeadlockedCommitAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, hook := openNotes(t)
	b := newBatchTest(db, d, s)
	deadlock := concurrentError{sluice.Errorf(sluice.CodeConflict, "deadlock"), "40P01"}
	var runs atomic.Int32
	// Its batch, the batch again with savepoints, then alone twice:
	// deadlocked each time; alone a third time, it commits.
	flaky := b.job("flaky", func(ctx context.Context, w *Writer) error {
		if runs.Add(1) <= 4 {
			return deadlock
		}
		return w.Insert(ctx, note("flaky"))
	})
	lead := b.job("lead", b.blocking(func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note("lead")) }))
	b.run(t, ctx, lead, flaky)
	if flaky.err != nil || flaky.commit == nil {
		t.Fatalf("the deadlocked write after %d runs: commit %+v, error %v; want committed", runs.Load(), flaky.commit, flaky.err)
	}
	if lead.err != nil || lead.commit == nil {
		t.Fatalf("the lead: commit %+v, error %v", lead.commit, lead.err)
	}
	if got := hook.seqs(); len(got) != 2 {
		t.Errorf("hook saw commits %v, want two", got)
	}
}

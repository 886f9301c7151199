package postgres

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestLookUpOfAQueuedKeyStaysTrue: a keyed write whose claim is made but
// not locked yet (it waits in the group-commit queue behind a batch that
// still runs) is looked its key up by a retry: by a GraphQL retry before
// it is validated (RecordedAnswer), and by a retry refused before it runs
// (Recorded). Both answer that nothing is recorded, and their requests
// then answer their own errors (a validation error, say), so the queued
// write must never commit: it is refused (409), and writes nothing. The
// look-ups took a claim nobody held for a key held by no one, and the
// queued write, once its turn came, locked its claim and committed, after
// its retries had been answered that it had not.
func TestLookUpOfAQueuedKeyStaysTrue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	uid := createUserU(t, db)
	entered, hold := make(chan struct{}), make(chan struct{})
	var enteredOnce, holdOnce sync.Once
	// Released on every way out, so that the writes end.
	defer holdOnce.Do(func() { close(hold) })
	lead := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Group: true,
			Documents: func(ctx context.Context, w *Writer) error {
				enteredOnce.Do(func() { close(entered) })
				<-hold
				return w.Insert(ctx, note("lead"))
			}})
		lead <- err
	}()
	select {
	case <-entered:
	case <-time.After(wait):
		t.Fatal("the first batch did not start")
	}
	key := func(name string) *IdempotencyKey {
		return &IdempotencyKey{UserID: uid, Key: name, Retention: time.Hour, MaxKeys: 10,
			Request: func() ([]byte, error) { return []byte(name), nil },
			Answer:  func() ([]byte, error) { return json.Marshal([]string{name}) }}
	}
	queued := map[string]chan error{}
	for _, name := range []string{"graphql", "refused"} {
		queued[name] = make(chan error, 1)
		go func() {
			_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Group: true, Idempotency: key(name),
				Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(name)) }})
			queued[name] <- err
		}()
	}
	eventually.True(t, wait, "the queued writes' claims", func() bool {
		var n int
		err := db.pool.QueryRow(ctx, "SELECT count(*) FROM sluice.idempotency_claims WHERE user_id = $1", uid).Scan(&n)
		return err == nil && n == 2
	})

	if c, _, err := db.RecordedAnswer(ctx, d, uid, "graphql", []byte("graphql"), time.Hour); c != nil || err != nil {
		t.Fatalf("a GraphQL retry's look-up: %v %v", c, err)
	}
	if c, err := db.Recorded(ctx, d, key("refused")); c != nil || err != nil {
		t.Fatalf("a refused retry's look-up: %v %v", c, err)
	}
	holdOnce.Do(func() { close(hold) })
	if err := <-lead; err != nil {
		t.Fatalf("the first batch's write: %v", err)
	}
	for name, done := range queued {
		select {
		case err := <-done:
			if sluice.ErrorCode(err) != sluice.CodeConflict {
				t.Errorf("the queued write %s, after a retry was told it had not run: %v, want Conflict", name, err)
			}
		case <-time.After(wait):
			t.Fatalf("the queued write %s did not end", name)
		}
		if _, _, err := db.Document(ctx, d, s, "Note/"+name); sluice.ErrorCode(err) != sluice.CodeNotFound {
			t.Errorf("Note/%s: %v, want not found: written after its retry was answered that it had not been", name, err)
		}
	}
}

// queuedKeys drives grouped writes of one database, with one
// Idempotency-Key "k" of one user or none, through the group-commit queue.
type queuedKeys struct {
	t   *testing.T
	ctx context.Context
	db  *DB
	d   *sluice.Database
	s   *sluice.Schema
	uid int64
}

func newQueuedKeys(t *testing.T) *queuedKeys {
	db, d, s, _ := openNotes(t)
	return &queuedKeys{t: t, ctx: context.Background(), db: db, d: d, s: s, uid: createUserU(t, db)}
}

func (q *queuedKeys) key() *IdempotencyKey {
	return &IdempotencyKey{UserID: q.uid, Key: "k", Retention: time.Hour, MaxKeys: 10,
		Request: func() ([]byte, error) { return []byte("k"), nil },
		Answer:  func() ([]byte, error) { return []byte("[]"), nil }}
}

// write writes Note/name with k (nil: none), calling documents first.
func (q *queuedKeys) write(name string, k *IdempotencyKey, documents func()) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := q.db.Write(q.ctx, WriteSpec{Database: q.d, Schema: q.s, Group: true, Idempotency: k,
			Documents: func(ctx context.Context, w *Writer) error {
				if documents != nil {
					documents()
				}
				return w.Insert(ctx, note(name))
			}})
		done <- err
	}()
	return done
}

// A holder is a write without a key that holds its batch open, in its
// documents, until it is released.
type holder struct {
	entered chan struct{}
	release func()
	done    <-chan error
}

func (q *queuedKeys) hold(name string) *holder {
	h := &holder{entered: make(chan struct{})}
	released := make(chan struct{})
	var enteredOnce, releaseOnce sync.Once
	h.release = func() { releaseOnce.Do(func() { close(released) }) }
	// Released on every way out, so that the writes end.
	q.t.Cleanup(h.release)
	h.done = q.write(name, nil, func() {
		enteredOnce.Do(func() { close(h.entered) })
		<-released
	})
	return h
}

func (q *queuedKeys) await(c <-chan struct{}, what string) {
	q.t.Helper()
	select {
	case <-c:
	case <-time.After(wait):
		q.t.Fatal(what)
	}
}

func (q *queuedKeys) result(c <-chan error, what string) error {
	q.t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(wait):
		q.t.Fatalf("%s did not end", what)
		return nil
	}
}

// queued waits until n writes wait in the database's queue.
func (q *queuedKeys) queued(n int) {
	q.t.Helper()
	eventually.True(q.t, wait, "writes queued", func() bool {
		q.db.groups.mu.Lock()
		defer q.db.groups.mu.Unlock()
		g := q.db.groups.byDB[q.d.ID]
		if g == nil {
			return n == 0
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == n
	})
}

// claims waits until the user has n claims.
func (q *queuedKeys) claims(n int) {
	q.t.Helper()
	eventually.True(q.t, wait, "the key's claims", func() bool {
		var got int
		err := q.db.pool.QueryRow(q.ctx, "SELECT count(*) FROM sluice.idempotency_claims WHERE user_id = $1", q.uid).Scan(&got)
		return err == nil && got == n
	})
}

// lookUp looks k up as a retry refused before it runs does, which finds
// it not recorded.
func (q *queuedKeys) lookUp() {
	q.t.Helper()
	if c, err := q.db.Recorded(q.ctx, q.d, q.key()); c != nil || err != nil {
		q.t.Fatalf("a retry's look-up: %v %v", c, err)
	}
}

// TestReleaseKeepsANewerClaim: a keyed write waiting for its batch has its
// claim deleted by a retry's look-up, and is refused (409) once its batch
// runs. A newer request with the key makes a claim of its own meanwhile,
// and waits for the batch after. The refused write's release, after its
// batch, deleted whatever claim of the key nobody held: the newer one, so
// that the newer request was refused 409 too, though no other request
// with the key was running any more. It runs now, and commits.
func TestReleaseKeepsANewerClaim(t *testing.T) {
	t.Parallel()
	q := newQueuedKeys(t)
	// The first batch takes in the writes queued while it runs: the
	// first write, refused, and the second holder, which holds the batch
	// on. The third holder and the newer write are queued meanwhile, and
	// make the next batch, in that order.
	lead := q.hold("lead")
	q.await(lead.entered, "the first batch did not start")
	first := q.write("first", q.key(), nil)
	q.queued(1)
	q.claims(1)
	second := q.hold("second")
	q.queued(2)
	q.lookUp()
	q.claims(0)
	lead.release()
	// The batch has run the first write's claim (refused: it is gone)
	// and holds on in the second holder's documents.
	q.await(second.entered, "the second holder's write did not start")
	third := q.hold("third")
	q.queued(1)
	newer := q.write("newer", q.key(), nil)
	q.queued(2)
	q.claims(1)
	second.release()
	for _, h := range []*holder{lead, second} {
		if err := q.result(h.done, "the first batch"); err != nil {
			t.Fatal(err)
		}
	}
	// Its answer comes after its release.
	if err := q.result(first, "the first write"); sluice.ErrorCode(err) != sluice.CodeConflict {
		t.Fatalf("the first write, after a retry's look-up found its key not recorded: %v, want Conflict", err)
	}
	q.await(third.entered, "the next batch did not start")
	third.release()
	if err := q.result(third.done, "the next batch"); err != nil {
		t.Fatal(err)
	}
	if err := q.result(newer, "the newer write"); err != nil {
		t.Fatalf("the newer write, no other with its key running: %v", err)
	}
	if _, _, err := q.db.Document(q.ctx, q.d, q.s, "Note/newer"); err != nil {
		t.Errorf("Note/newer: %v", err)
	}
	q.claims(0)
}

// TestQueuedWriteTakesNoNewerClaim: a keyed write waiting for its batch
// has its claim deleted by a retry's look-up, and a newer request with the
// key makes a claim of its own, queued behind it in the same batch. The
// first write locked the newer claim, as the key's, and committed, after
// the look-up had answered that it had not run (and the newer request
// was refused 409, as still running). The first is refused, and writes
// nothing; the newer one commits.
func TestQueuedWriteTakesNoNewerClaim(t *testing.T) {
	t.Parallel()
	q := newQueuedKeys(t)
	lead := q.hold("lead")
	q.await(lead.entered, "the first batch did not start")
	first := q.write("first", q.key(), nil)
	q.queued(1)
	q.claims(1)
	q.lookUp()
	q.claims(0)
	newer := q.write("newer", q.key(), nil)
	q.queued(2)
	q.claims(1)
	lead.release()
	if err := q.result(lead.done, "the first batch"); err != nil {
		t.Fatal(err)
	}
	if err := q.result(first, "the first write"); sluice.ErrorCode(err) != sluice.CodeConflict {
		t.Errorf("the first write, after a retry's look-up found its key not recorded: %v, want Conflict", err)
	}
	if _, _, err := q.db.Document(q.ctx, q.d, q.s, "Note/first"); sluice.ErrorCode(err) != sluice.CodeNotFound {
		t.Errorf("Note/first: %v, want not found: written after its retry was answered that it had not been", err)
	}
	if err := q.result(newer, "the newer write"); err != nil {
		t.Errorf("the newer write: %v", err)
	}
	q.claims(0)
}

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

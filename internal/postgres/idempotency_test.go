package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

// TestIdempotencyKeysExpireAndArePruned: a key answers again within its
// retention; past it, it no longer answers (the write runs again), and
// pruning deletes what is past it.
func TestIdempotencyKeysExpireAndArePruned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	// Keys belong to users.
	if _, err := db.Write(ctx, WriteSpec{Before: func(ctx context.Context, tx *Tx) error {
		return tx.CreateUser(ctx, &sluice.User{Name: "u", Org: "o"}, "x")
	}}); err != nil {
		t.Fatal(err)
	}
	var uid int64
	if err := db.pool.QueryRow(ctx, "SELECT id FROM sluice.users WHERE name = 'u'").Scan(&uid); err != nil {
		t.Fatal(err)
	}
	write := func(key, doc string) (*sluice.Commit, *IdempotencyKey) {
		t.Helper()
		k := &IdempotencyKey{UserID: uid, Key: key, Retention: time.Hour, MaxKeys: 10,
			Request: func() ([]byte, error) { return []byte("request"), nil },
			Answer:  func() ([]byte, error) { return json.Marshal([]string{doc}) }}
		c, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Idempotency: k,
			Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(doc)) }})
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	first, k := write("k", "a")
	if k.Replayed != nil {
		t.Fatal("a new key was replayed")
	}
	again, k := write("k", "b")
	if string(k.Replayed) != `["a"]` || again.Seq != first.Seq || again.UID != first.UID {
		t.Fatalf("the retry: answer %s, commit %d/%d, want the first's %d/%d", k.Replayed, again.Seq, again.UID, first.Seq, first.UID)
	}
	if n, err := db.PruneIdempotencyKeys(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("pruned %d keys within their retention (%v)", n, err)
	}
	if _, err := db.pool.Exec(ctx, "UPDATE sluice.idempotency_keys SET created_at = now() - interval '2 hours'"); err != nil {
		t.Fatal(err)
	}
	// Expired: the write runs again, under a key recorded anew.
	third, k := write("k", "c")
	if k.Replayed != nil || third.Seq == first.Seq {
		t.Fatalf("an expired key answered: %s", k.Replayed)
	}
	write("old", "d")
	if _, err := db.pool.Exec(ctx, "UPDATE sluice.idempotency_keys SET created_at = now() - interval '2 hours' WHERE key = 'old'"); err != nil {
		t.Fatal(err)
	}
	if n, err := db.PruneIdempotencyKeys(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("pruned %d keys, want 1 (%v)", n, err)
	}
	var left int
	if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM sluice.idempotency_keys").Scan(&left); err != nil || left != 1 {
		t.Fatalf("%d keys left, want 1 (%v)", left, err)
	}
}

package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// TestIdempotencyKeysExpireAndArePruned: a key answers again within its
// retention; past it, it no longer answers (the write runs again; a write
// refused before it runs gets its own error), even before pruning
// deletes what is past it.
func TestIdempotencyKeysExpireAndArePruned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	// Keys belong to users.
	uid := createUserU(t, db)
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
	// Expired, not pruned yet: a write refused before it runs (Recorded)
	// is not answered by it, and a write runs again, under a key
	// recorded anew.
	if c, err := db.Recorded(ctx, d, k); c != nil || k.Replayed != nil || err != nil {
		t.Fatalf("an expired key answered a refused write: commit %+v, answer %s (%v)", c, k.Replayed, err)
	}
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

// TestGroupCommitWithIdempotencyKeys: writes with idempotency keys share
// a group-commit batch with others: in one batch, a new key's write
// commits and records its key, a second write of the batch with the same
// key is refused as still running, and a recorded key answers its first
// write's commit without writing or reaching the commit hook; the batch's
// other writes commit as usual, in one transaction.
func TestGroupCommitWithIdempotencyKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, hook := openNotes(t)
	uid := createUserU(t, db)
	key := func(name, answer string) *IdempotencyKey {
		return &IdempotencyKey{UserID: uid, Key: name, Retention: time.Hour, MaxKeys: 10,
			Request: func() ([]byte, error) { return []byte("request"), nil },
			Answer:  func() ([]byte, error) { return json.Marshal([]string{answer}) }}
	}
	insert := func(k string) func(ctx context.Context, w *Writer) error {
		return func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(k)) }
	}
	old, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Idempotency: key("old", "o"), Documents: insert("o")})
	if err != nil {
		t.Fatal(err)
	}
	b := newBatchTest(db, d, s)
	lead := b.job("lead", b.blocking(insert("lead")))
	first := b.job("k1", insert("k1"))
	first.spec.Idempotency = key("k1", "k1")
	second := b.job("k1 again", insert("k1-again"))
	second.spec.Idempotency = key("k1", "k1-again")
	retry := b.job("old again", insert("o-again"))
	retry.spec.Idempotency = key("old", "o-again")
	plain := b.job("plain", insert("plain"))
	// What DB.Write does before a keyed job joins a batch.
	for _, j := range []*job{first, second, retry} {
		if err := db.prepareKey(ctx, j.spec.Idempotency); err != nil {
			t.Fatal(err)
		}
	}
	b.run(t, ctx, lead, first, second, retry, plain)

	for _, j := range []*job{lead, first, plain} {
		if j.err != nil || j.commit == nil || j.replayed {
			t.Fatalf("%s: commit %+v, error %v", j.spec.Meta.Message, j.commit, j.err)
		}
	}
	if sluice.ErrorCode(second.err) != sluice.CodeConflict {
		t.Fatalf("the batch's second write with k1: %v, want Conflict (still running)", second.err)
	}
	if !retry.replayed || retry.err != nil || retry.commit.Seq != old.Seq || retry.commit.UID != old.UID || string(retry.spec.Idempotency.Replayed) != `["o"]` {
		t.Fatalf("the retry of old: replayed %v, commit %+v, answer %s, error %v", retry.replayed, retry.commit, retry.spec.Idempotency.Replayed, retry.err)
	}
	for _, id := range []string{"k1-again", "o-again"} {
		if _, _, err := db.Document(ctx, d, s, "Note/"+id); sluice.ErrorCode(err) != sluice.CodeNotFound {
			t.Fatalf("Note/%s was written: %v", id, err)
		}
	}
	var keys int
	if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM sluice.idempotency_keys WHERE key = 'k1' AND answer = '[\"k1\"]'").Scan(&keys); err != nil || keys != 1 {
		t.Fatalf("k1 recorded %d times (%v)", keys, err)
	}
	if n := xmins(t, db, d); n != 2 {
		t.Fatalf("the commits were made by %d transactions, want 2 (old's, the batch's)", n)
	}
	if got := hook.seqs(); len(got) != 4 {
		t.Fatalf("hook saw commits %v, want old's and the batch's three", got)
	}
}

// TestIdempotencyClaims: a key's claim (the row its writes lock) is gone
// once a write records the key, once a write fails, and once a retry is
// answered by the key; a claim another transaction holds makes a write
// with the key answer that the first is still running, and is not pruned,
// while one left by a process that died is.
func TestIdempotencyClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	uid := createUserU(t, db)
	write := func(key, doc string) error {
		k := &IdempotencyKey{UserID: uid, Key: key, Retention: time.Hour, MaxKeys: 10,
			Request: func() ([]byte, error) { return []byte(doc), nil },
			Answer:  func() ([]byte, error) { return json.Marshal([]string{doc}) }}
		_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Idempotency: k,
			Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(doc)) }})
		return err
	}
	claims := func() int {
		t.Helper()
		var n int
		if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM sluice.idempotency_claims").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, w := range []struct{ key, doc, want string }{
		{"a", "a", ""},                    // recorded
		{"a", "a", ""},                    // answered by the key
		{"a", "other", "another request"}, // refused: another request
		{"b", "a", "already exists"},      // failed
	} {
		if err := write(w.key, w.doc); w.want == "" && err != nil || w.want != "" && (err == nil || !strings.Contains(err.Error(), w.want)) {
			t.Fatalf("write of %s with key %s: %v, want %q", w.doc, w.key, err, w.want)
		}
		if n := claims(); n != 0 {
			t.Fatalf("after the write of %s with key %s: %d claims left", w.doc, w.key, n)
		}
	}

	// A claim held by another transaction: the write is refused at once.
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after the test
	if _, err := tx.Exec(ctx, "INSERT INTO sluice.idempotency_claims (user_id, key, created_at) VALUES ($1, 'held', now() - interval '2 hours'), ($1, 'left', now() - interval '2 hours')", uid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	holder, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck // after the test
	if _, err := holder.Exec(ctx, "SELECT 1 FROM sluice.idempotency_claims WHERE key = 'held' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	if err := write("held", "h"); sluice.ErrorCode(err) != sluice.CodeConflict || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("a write whose key another holds: %v", err)
	}
	if _, err := db.PruneIdempotencyKeys(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, err := db.pool.Query(ctx, "SELECT key FROM sluice.idempotency_claims ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || strings.Join(left, ",") != "held" {
		t.Fatalf("claims after pruning: %v (%v), want the held one", left, err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := write("held", "h"); err != nil {
		t.Fatalf("the write once the claim is free: %v", err)
	}
	if n := claims(); n != 0 {
		t.Fatalf("%d claims left", n)
	}
}

// TestKeyOfADeletedUserFailsNoWrite: a keyed write whose user was
// deleted while it waited in the queue commits with the other writes of
// its group-commit batch, as a write without a key does. (The record of
// its key failed its foreign key in the batch's last round trip, failing
// every write of the batch with a 500; migration 18.) Deleting a user
// still deletes the user's keys.
func TestKeyOfADeletedUserFailsNoWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, hook := openNotes(t)
	var users []*sluice.User
	for _, name := range []string{"gone", "kept"} {
		u := &sluice.User{Name: name, Org: "o"}
		if _, err := db.Write(ctx, WriteSpec{Before: func(ctx context.Context, tx *Tx) error { return tx.CreateUser(ctx, u, "x") }}); err != nil {
			t.Fatal(err)
		}
		if err := db.pool.QueryRow(ctx, "SELECT id FROM sluice.users WHERE name = $1", name).Scan(&u.ID); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	gone, kept := users[0], users[1]
	key := func(u *sluice.User, name string) *IdempotencyKey {
		return &IdempotencyKey{UserID: u.ID, Key: name, Retention: time.Hour,
			Request: func() ([]byte, error) { return []byte("request"), nil },
			Answer:  func() ([]byte, error) { return json.Marshal([]string{name}) }}
	}
	insert := func(k string) func(ctx context.Context, w *Writer) error {
		return func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(k)) }
	}
	// One key of the user to delete recorded before.
	if _, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Idempotency: key(gone, "earlier"), Documents: insert("earlier")}); err != nil {
		t.Fatal(err)
	}
	b := newBatchTest(db, d, s)
	lead := b.job("lead", b.blocking(insert("lead")))
	keyed := b.job("keyed", insert("keyed"))
	keyed.spec.Idempotency = key(gone, "k")
	other := b.job("other", insert("other"))
	other.spec.Idempotency = key(kept, "k")
	// What DB.Write does before a keyed job joins a batch; then the user
	// is deleted (a claim does not reference its user: migration 15).
	for _, j := range []*job{keyed, other} {
		if err := db.prepareKey(ctx, j.spec.Idempotency); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Write(ctx, WriteSpec{Before: func(ctx context.Context, tx *Tx) error { return tx.DeleteUser(ctx, gone) }}); err != nil {
		t.Fatal(err)
	}
	b.run(t, ctx, lead, keyed, other)

	for _, j := range []*job{lead, keyed, other} {
		if j.err != nil || j.commit == nil {
			t.Errorf("%s: commit %+v, error %v; want committed", j.spec.Meta.Message, j.commit, j.err)
		}
	}
	if got := hook.seqs(); len(got) != 4 {
		t.Errorf("hook saw commits %v, want the earlier write's and the batch's three", got)
	}
	var earlier, others int
	if err := db.pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE key = 'earlier'), count(*) FILTER (WHERE user_id = $1) FROM sluice.idempotency_keys", kept.ID).Scan(&earlier, &others); err != nil {
		t.Fatal(err)
	}
	if earlier != 0 || others != 1 {
		t.Errorf("keys after the deletion: %d of the deleted user's earlier ones, %d of the other user's; want 0 and 1", earlier, others)
	}
}

// TestGroupedKeyIsHashedBeforeItsBatch: a grouped write's request hash
// (a REST body read to its end) is taken before the write joins a batch,
// so a client sending its body slowly holds up its own write alone: a
// grouped write of another document commits while the hash is still
// being taken. (The hash was taken by the batch's leader, behind the
// commit rows, and every write of the database queued behind it.)
func TestGroupedKeyIsHashedBeforeItsBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	uid := createUserU(t, db)
	hashing, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	// Released on every way out, so that the slow write ends.
	defer releaseOnce.Do(func() { close(release) })
	var hashingOnce sync.Once
	k := &IdempotencyKey{UserID: uid, Key: "slow", Retention: time.Hour, MaxKeys: 10,
		Request: func() ([]byte, error) {
			hashingOnce.Do(func() { close(hashing) })
			<-release // the rest of the body, sent slowly
			return []byte("request"), nil
		},
		Answer: func() ([]byte, error) { return json.Marshal([]string{"slow"}) }}
	insert := func(key string) func(ctx context.Context, w *Writer) error {
		return func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(key)) }
	}
	slow := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Group: true, Idempotency: k, Documents: insert("slow")})
		slow <- err
	}()
	select {
	case <-hashing:
	case <-time.After(30 * time.Second):
		t.Fatal("the keyed write never hashed its request")
	}
	other := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Group: true, Documents: insert("other")})
		other <- err
	}()
	select {
	case err := <-other:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a grouped write waited for another write's request to be hashed")
	}
	releaseOnce.Do(func() { close(release) })
	select {
	case err := <-slow:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the keyed write did not end")
	}
	for _, id := range []string{"Note/slow", "Note/other"} {
		if _, _, err := db.Document(ctx, d, s, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// TestIdempotencyMaxKeysHolds: a user keeps at most MaxKeys keys, plus
// the slack idempotency_bound.go allows (keySpan-1, and the writes of
// theirs running when a count reads): once a count found them at the
// bound, every new key is refused until a count finds them under it. (The
// bound was checked on a random sample of claims, and only a sampled
// claim refused: of 1,000 new keys with MaxKeys 128, 567 were kept.)
func TestIdempotencyMaxKeysHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	uid := createUserU(t, db)
	const maxKeys = 128
	write := func(key string) error {
		err := insertKeyed(db, d, s, uid, maxKeys, key)
		if err != nil && sluice.ErrorCode(err) != sluice.CodeTooMany {
			t.Errorf("key %s: %v", key, err)
		}
		return err
	}
	kept := func() int {
		var n int
		if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM sluice.idempotency_keys WHERE user_id = $1", uid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	slack := keySpan(maxKeys) - 1
	for i := range 1000 {
		_ = write(fmt.Sprintf("k%d", i))
	}
	if n := kept(); n < maxKeys || n > maxKeys+slack {
		t.Fatalf("%d keys kept of 1,000 new ones, want %d to %d", n, maxKeys, maxKeys+slack)
	}
	// Concurrent writers: the bound, plus the writes running when a
	// count reads.
	const writers = 4
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range 100 {
				_ = write(fmt.Sprintf("c%d-%d", w, i))
			}
		})
	}
	wg.Wait()
	if n := kept(); n > maxKeys+slack+writers {
		t.Fatalf("%d keys kept after concurrent writers, want at most %d", n, maxKeys+slack+writers)
	}
	// Keys that expire make room again, within keySpan new keys.
	if _, err := db.pool.Exec(ctx, "DELETE FROM sluice.idempotency_keys WHERE user_id = $1 AND key IN (SELECT key FROM sluice.idempotency_keys WHERE user_id = $1 LIMIT 10)", uid); err != nil {
		t.Fatal(err)
	}
	accepted := false
	for i := 0; i < keySpan(maxKeys) && !accepted; i++ {
		accepted = write(fmt.Sprintf("later%d", i)) == nil
	}
	if !accepted {
		t.Fatalf("no new key accepted within %d once the user was under the bound", keySpan(maxKeys))
	}
}

// TestSlowKeyedBodyKeepsItsClaim: a grouped write whose client sends its
// body slowly, past claimTTL, is not refused as if another request held
// its key. Its claim was made before the body was read, and nothing
// locked it until the batch did: pruning deleted it as a dead process's,
// and the write answered "still running" (reproduced by aging the
// claims to twice claimTTL, and pruning, while the body is read).
func TestSlowKeyedBodyKeepsItsClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	uid := createUserU(t, db)
	hashing, release := make(chan struct{}), make(chan struct{})
	var releaseOnce, hashingOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	k := &IdempotencyKey{UserID: uid, Key: "slow", Retention: time.Hour, MaxKeys: 10,
		Request: func() ([]byte, error) {
			hashingOnce.Do(func() { close(hashing) })
			<-release // the rest of the body, sent slowly
			return []byte("request"), nil
		},
		Answer: func() ([]byte, error) { return json.Marshal([]string{"slow"}) }}
	slow := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Group: true, Idempotency: k,
			Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note("slow")) }})
		slow <- err
	}()
	select {
	case <-hashing:
	case <-time.After(wait):
		t.Fatal("the keyed write never hashed its request")
	}
	if _, err := db.pool.Exec(ctx, "UPDATE sluice.idempotency_claims SET created_at = now() - make_interval(secs => $1)", 2*claimTTL.Seconds()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PruneIdempotencyKeys(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	releaseOnce.Do(func() { close(release) })
	select {
	case err := <-slow:
		if err != nil {
			t.Fatalf("the slow keyed write: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("the keyed write did not end")
	}
	var n int
	if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM sluice.idempotency_keys WHERE user_id = $1 AND key = 'slow'", uid).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d keys recorded (%v), want 1", n, err)
	}
}

// TestKeyUsesStayBounded: the users a process remembers for
// idempotency_max_keys are at most maxKeyUsers (each user who once reached
// keySample keys stayed for the life of the process), and a user at the
// bound whose entry was dropped is refused all the same: their next new
// key counts their keys again.
func TestKeyUsesStayBounded(t *testing.T) {
	t.Parallel()
	db, d, s, _ := openNotes(t)
	uid := createUserU(t, db)
	const maxKeys = 4
	write := func(key string) error {
		err := insertKeyed(db, d, s, uid, maxKeys, key)
		return err
	}
	for i := range maxKeys {
		if err := write(fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := write("over"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("a key past the bound: %v, want TooManyRequests", err)
	}
	// Users who reached keySample keys, as many as three times the cap,
	// each counted once (ids no user has).
	for other := range int64(3 * maxKeyUsers) {
		db.keyUses.counted(-1-other, keySample, 1000)
	}
	db.keyUses.mu.Lock()
	n := len(db.keyUses.byUser)
	_, kept := db.keyUses.byUser[uid]
	db.keyUses.mu.Unlock()
	if n > maxKeyUsers || kept {
		t.Fatalf("%d users remembered (the user at the bound among them: %t), want at most %d, the most recent", n, kept, maxKeyUsers)
	}
	if err := write("over again"); sluice.ErrorCode(err) != sluice.CodeTooMany {
		t.Fatalf("a key past the bound, once the user was forgotten: %v, want TooManyRequests", err)
	}
}

// createUserU creates user u of organization o, whose keys the tests
// use, and returns its id.
func createUserU(t *testing.T, db *DB) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Write(ctx, WriteSpec{Before: func(ctx context.Context, tx *Tx) error {
		return tx.CreateUser(ctx, &sluice.User{Name: "u", Org: "o"}, "x")
	}}); err != nil {
		t.Fatal(err)
	}
	var uid int64
	if err := db.pool.QueryRow(ctx, "SELECT id FROM sluice.users WHERE name = 'u'").Scan(&uid); err != nil {
		t.Fatal(err)
	}
	return uid
}

// insertKeyed inserts Note/key with the Idempotency-Key key of user uid,
// who may keep maxKeys keys, in group commit.
func insertKeyed(db *DB, d *sluice.Database, s *sluice.Schema, uid int64, maxKeys int, key string) error {
	k := &IdempotencyKey{UserID: uid, Key: key, Retention: time.Hour, MaxKeys: maxKeys,
		Request: func() ([]byte, error) { return []byte("request"), nil },
		Answer:  func() ([]byte, error) { return json.Marshal([]string{key}) }}
	_, err := db.Write(context.Background(), WriteSpec{Database: d, Schema: s, Group: true, Idempotency: k,
		Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note(key)) }})
	return err
}

// TestKeyOfALongWriteIsKeptFromItsCommit: a key is kept for its
// retention from when its write committed, not from when its
// transaction began. A write that ran longer than the retention (a large
// import, with idempotency_retention at its least) recorded its key
// already expired, so the retry of its lost answer wrote it again.
func TestKeyOfALongWriteIsKeptFromItsCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	uid := createUserU(t, db)
	const retention = 3 * time.Second
	write := func(doc string, long bool) (*sluice.Commit, *IdempotencyKey) {
		t.Helper()
		k := &IdempotencyKey{UserID: uid, Key: "import", Retention: retention, MaxKeys: 10,
			Request: func() ([]byte, error) { return []byte("request"), nil },
			Answer:  func() ([]byte, error) { return json.Marshal([]string{doc}) }}
		c, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Idempotency: k,
			Documents: func(ctx context.Context, w *Writer) error {
				if long {
					// A write that takes longer than the retention
					// (Postgres's own sleep: what the write does
					// meanwhile does not matter).
					if _, err := w.t.tx.Exec(ctx, "SELECT pg_sleep($1)", (retention + time.Second/2).Seconds()); err != nil {
						return err
					}
				}
				return w.Insert(ctx, note(doc))
			}})
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	first, _ := write("a", true)
	retry, k := write("b", false)
	if string(k.Replayed) != `["a"]` || retry.Seq != first.Seq {
		t.Fatalf("the retry right after the write: answer %s, commit %d, want the first's (commit %d)", k.Replayed, retry.Seq, first.Seq)
	}
}

package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

// TestUserShares: a user takes at most its share of connections, all
// users together at most the total; what is not counted (no user, a
// group commit) passes; a request past a share waits for one to be given
// back, and gives up when its context ends.
func TestUserShares(t *testing.T) {
	t.Parallel()
	type userKey struct{}
	u := &userShares{max: 2, total: 3, held: map[int64]int{},
		owner: func(ctx context.Context) (int64, bool) {
			id, ok := ctx.Value(userKey{}).(int64)
			return id, ok
		}}
	as := func(id int64) context.Context { return context.WithValue(context.Background(), userKey{}, id) }
	take := func(ctx context.Context) func() {
		t.Helper()
		release, err := u.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return release
	}
	refused := func(ctx context.Context, what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond) // a deadline, not a wait for an event
		defer cancel()
		if _, err := u.take(ctx); err == nil {
			t.Fatalf("%s: taken past its share", what)
		}
	}
	a1, a2 := take(as(1)), take(as(1))
	refused(as(1), "user 1's third")
	b1 := take(as(2))
	refused(as(2), "a fourth of all users'")
	take(context.Background())() // not counted: no user
	take(shared(as(1)))()        // not counted: a group commit
	waited := make(chan func())
	go func() {
		release, err := u.take(as(2))
		if err != nil {
			t.Error(err)
		}
		waited <- release
	}()
	a1()
	a1() // once
	b2 := <-waited
	for _, release := range []func(){a2, b1, b2} {
		release()
	}
	if len(u.held) != 0 || u.all != 0 {
		t.Fatalf("after every release: %v held, %d in all", u.held, u.all)
	}
}

// TestCountedLogReadsTakeTheUsersShare: a read of the log counted for a
// user (CountFor: a stream's catch-up) takes a connection of that user's
// share, waiting while the user holds it, and gives it back when it
// returns; other reads of the log (the change feed's, webhooks') are not
// counted.
func TestCountedLogReadsTakeTheUsersShare(t *testing.T) {
	t.Parallel()
	db, d, _, _ := openNotes(t)
	ctx := context.Background()
	var held []func()
	for range db.UserShare() {
		release, err := db.shares.take(CountFor(ctx, 42))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	start := sluice.Position{Seq: 0, Index: sluice.WholeCommit}
	if _, _, err := db.ReadLog(ctx, d, start, sluice.Stamp{}, 16, 1<<20); err != nil {
		t.Fatalf("a read of the log counted for no one: %v", err)
	}
	short, cancel := context.WithTimeout(CountFor(ctx, 42), 50*time.Millisecond) // a deadline, not a wait for an event
	defer cancel()
	if _, _, err := db.ReadLog(short, d, start, sluice.Stamp{}, 16, 1<<20); err == nil {
		t.Fatal("a read of the log counted for user 42 ran while the user held its whole share")
	}
	held[0]()
	if _, _, err := db.ReadLog(CountFor(ctx, 42), d, start, sluice.Stamp{}, 16, 1<<20); err != nil {
		t.Fatalf("a read of the log counted for user 42, within its share: %v", err)
	}
	db.shares.mu.Lock()
	n := db.shares.held[42]
	db.shares.mu.Unlock()
	if n != db.UserShare()-1 {
		t.Fatalf("after its read, user 42 holds %d connections, want %d", n, db.UserShare()-1)
	}
}

package postgres

import (
	"context"
	"testing"
	"time"
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

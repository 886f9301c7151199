package gqltransport

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

// TestLiveBudget: admission stops at each bound, per user and per
// process, naming it; a read's bounds are what is left counting what the
// share holds; a result past a bound is refused and the share keeps what
// it held; closing a share releases it; the super user passes the
// per-user bounds, not the process's.
func TestLiveBudget(t *testing.T) {
	t.Parallel()
	b := newLiveBudget(LiveBudget{QueriesPerUser: 3, Queries: 5, RowsPerUser: 100, BytesPerUser: 1000, Rows: 150, Bytes: 10000})
	rita, otto, admin := &sluice.User{ID: 1, Name: "rita"}, &sluice.User{ID: 2, Name: "otto"}, &sluice.User{ID: 3, Name: "admin", Superuser: true}
	refused := func(u *sluice.User, key string) {
		t.Helper()
		if _, err := b.admit(u); sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), key) {
			t.Fatalf("admit %s: %v, want TooMany naming %s", u.Name, err, key)
		}
	}
	admit := func(u *sluice.User) func() {
		t.Helper()
		release, err := b.admit(u)
		if err != nil {
			t.Fatalf("admit %s: %v", u.Name, err)
		}
		return release
	}
	r1 := admit(rita)
	h := b.hold(rita)
	if got := h.bounds(10000, 1<<20); got.Rows != 100 || got.RowsKey != keyLiveRowsPerUser || got.Bytes != 1000 || got.BytesKey != keyLiveBytesPerUser {
		t.Fatalf("the first read's bounds: %+v", got)
	}
	if err := h.set(60, 500); err != nil {
		t.Fatal(err)
	}
	if got := h.bounds(10000, 1<<20); got.Rows != 100 || got.Bytes != 1000 {
		t.Fatalf("bounds count what the share holds: %+v", got)
	}
	h2 := b.hold(rita)
	if got := h2.bounds(10000, 1<<20); got.Rows != 40 || got.Bytes != 500 {
		t.Fatalf("another share's bounds: %+v", got)
	}
	if err := h2.set(50, 100); sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), keyLiveRowsPerUser) {
		t.Fatalf("a result past the user's rows: %v", err)
	}
	if err := h2.set(40, 500); err != nil {
		t.Fatal(err)
	}
	refused(rita, keyLiveRowsPerUser) // 100 of 100 held
	h2.Close()
	r2, r3 := admit(rita), admit(rita)
	refused(rita, keyLiveQueriesPerUser)
	r3()
	r3() // once
	r3 = admit(rita)
	// The process: 5 live queries, 150 rows.
	o := b.hold(otto)
	if got := o.bounds(10000, 1<<20); got.Rows != 90 || got.RowsKey != keyLiveRows {
		t.Fatalf("bounds within the process's rows: %+v", got)
	}
	if err := o.set(90, 100); err != nil {
		t.Fatal(err)
	}
	refused(otto, keyLiveRows)
	refused(admin, keyLiveRows) // the super user passes per-user bounds only
	o.Close()
	admit(admin)
	admit(otto)                    // rita's 3, admin's and otto's: 5
	refused(admin, keyLiveQueries) // the process's count holds for the super user too
	for _, release := range []func(){r1, r2, r3} {
		release()
	}
	admit(admin)
}

// TestLiveShareChargeMoves: a share's result is charged to the user whose
// live query started it; when that user's last live query of the share
// leaves while another user's goes on, the charge moves to that user, so
// the first holds nothing of it and may start live queries again.
func TestLiveShareChargeMoves(t *testing.T) {
	t.Parallel()
	b := newLiveBudget(LiveBudget{RowsPerUser: 50})
	rita, mallory := &sluice.User{ID: 1, Name: "rita"}, &sluice.User{ID: 2, Name: "mallory"}
	h := b.hold(rita)
	h.joined(rita)
	if err := h.set(50, 10); err != nil {
		t.Fatal(err)
	}
	h.joined(mallory)
	h.joined(rita) // rita twice: her second leaving moves nothing
	h.left(rita)
	if got := b.users[rita.ID]; got == nil || got.rows != 50 {
		t.Fatalf("rita, still in the share, holds %+v", got)
	}
	h.left(rita)
	if got := b.users[rita.ID]; got != nil && got.rows != 0 {
		t.Fatalf("rita, out of the share, holds %+v", got)
	}
	if got := b.users[mallory.ID]; got == nil || got.rows != 50 || b.total.rows != 50 {
		t.Fatalf("mallory holds %+v, all %+v", got, b.total)
	}
	if _, err := b.admit(rita); err != nil {
		t.Fatalf("rita, holding nothing: %v", err)
	}
	h.Close()
	if got := b.users[mallory.ID]; got != nil && got.rows != 0 || b.total.rows != 0 {
		t.Fatalf("after the share: mallory %+v, all %+v", got, b.total)
	}
}

// TestLiveReadsTryDoesNotWait: with user x's reads all running (its
// token taken), a settle of a batch holding x's and y's shares takes y's
// token at once and reads y's (try), and is told when one of x's frees,
// to read x's then (found by review: a settle took a token of every
// owner of its due shares before reading any, waiting for x's, so x's
// reads stalled y's results of the same batch and the feed with them).
func TestLiveReadsTryDoesNotWait(t *testing.T) {
	t.Parallel()
	r := newLiveReads(1)
	x, y := &sluice.User{ID: 1, Name: "x"}, &sluice.User{ID: 2, Name: "y"}
	doneX, err := r.acquire(context.Background(), []*sluice.User{x}) // x's other reads
	if err != nil {
		t.Fatal(err)
	}
	releaseY, _ := r.try(y)
	if releaseY == nil {
		t.Fatal("y's token, free, was not taken")
	}
	releaseX, freed := r.try(x)
	if releaseX != nil || freed == nil {
		t.Fatal("x's token, taken, was taken again")
	}
	select {
	case <-freed:
		t.Fatal("x's token said free while taken")
	default:
	}
	doneX()
	select {
	case <-freed:
	case <-time.After(time.Minute):
		t.Fatal("x's token given back, and nothing said so")
	}
	releaseX, _ = r.try(x)
	if releaseX == nil {
		t.Fatal("x's token, free again, was not taken")
	}
	releaseX()
	releaseY()
	releaseY() // once
	if len(r.users) != 0 {
		t.Fatalf("users left: %v", r.users)
	}
}

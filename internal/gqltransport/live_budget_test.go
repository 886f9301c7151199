package gqltransport

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
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

// TestLiveShareChargeMovesWithinBudget: when a share's owner leaves, its
// result (5 documents, 100 bytes; live_rows_per_user 10,
// live_bytes_per_user 1000) goes to the user of the share whose live
// queries may still hold it, the one with the most room: not otto, who
// holds the fewest documents but 950 bytes, nor dave, who holds 8
// documents, but carl. Once carl leaves too, it fits neither otto nor
// dave: left returns the error of a per-user bound, which ends the
// share, and the result is charged to nobody. Found by review: the
// charge went to the user holding the fewest documents whatever the
// budget, and otto held 1050 bytes until the share's next read.
func TestLiveShareChargeMovesWithinBudget(t *testing.T) {
	t.Parallel()
	b := newLiveBudget(LiveBudget{RowsPerUser: 10, BytesPerUser: 1000})
	rita, otto, carl, dave := &sluice.User{ID: 1, Name: "rita"}, &sluice.User{ID: 2, Name: "otto"}, &sluice.User{ID: 3, Name: "carl"}, &sluice.User{ID: 4, Name: "dave"}
	others := func(u *sluice.User, rows, bytes int64) { // u's other live queries
		t.Helper()
		if err := b.hold(u).set(rows, bytes); err != nil {
			t.Fatal(err)
		}
	}
	others(otto, 2, 950)
	others(carl, 4, 100)
	others(dave, 8, 100)
	h := b.hold(rita)
	for _, u := range []*sluice.User{rita, otto, carl, dave} {
		h.joined(u)
	}
	if err := h.set(5, 100); err != nil {
		t.Fatal(err)
	}
	if err := h.left(rita); err != nil {
		t.Fatalf("rita left: %v", err)
	}
	if got := h.user(); got.ID != carl.ID {
		t.Fatalf("the share is charged to %s, want carl", got.Name)
	}
	for _, c := range []struct {
		u           *sluice.User
		rows, bytes int64
	}{{otto, 2, 950}, {carl, 9, 200}, {dave, 8, 100}} {
		if got := b.users[c.u.ID]; got == nil || got.rows != c.rows || got.bytes != c.bytes {
			t.Fatalf("%s holds %+v, want %d documents, %d bytes", c.u.Name, got, c.rows, c.bytes)
		}
	}
	if got := b.users[rita.ID]; got != nil {
		t.Fatalf("rita, out of the share, holds %+v", got)
	}
	err := h.left(carl)
	if !graph.IsBoundError(err, keyLiveBytesPerUser) {
		t.Fatalf("carl left, and the result fits nobody's budget: %v, want an error naming %s", err, keyLiveBytesPerUser)
	}
	if got := h.ownError(otto, err); !strings.Contains(got.Error(), "user otto's live queries") {
		t.Fatalf("otto's member is told %q", got)
	}
	if rows, bytes := h.held(); rows != 0 || bytes != 0 || b.total.rows != 14 || b.total.bytes != 1150 || b.users[carl.ID].rows != 4 {
		t.Fatalf("the ended share holds %d documents, %d bytes; all %+v, carl %+v", rows, bytes, b.total, b.users[carl.ID])
	}
	if err := h.left(otto); err != nil {
		t.Fatalf("otto left the ended share: %v", err)
	}
}

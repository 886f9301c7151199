package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// concurrently runs create n times at once, each call on its own
// goroutine released together, and returns how many succeeded; every
// other call must fail with a TooMany error saying want.
func concurrently(t *testing.T, n int, want string, create func(i int) error) int {
	t.Helper()
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		go func() {
			<-start
			errs <- create(i)
		}()
	}
	close(start)
	made := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			made++
		case sluice.ErrorCode(err) != sluice.CodeTooMany || !strings.Contains(err.Error(), want):
			t.Errorf("a creation past the cap: %v, want a TooMany error saying %q", err, want)
		}
	}
	return made
}

// TestConcurrentCreationsKeepTheUserCaps: of 16 stream tickets, or API
// tokens, one user asks for at once, exactly the cap's number are made.
// Each creation counted the user's rows and then inserted one, and
// concurrent ones counted before others inserted: up to 14 tokens and 9
// tickets were made past caps of 2. Another user's creations, all
// within their cap, are made.
func TestConcurrentCreationsKeepTheUserCaps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	var users []*sluice.User
	for _, name := range []string{"rita", "sam"} {
		u := &sluice.User{Org: "caps", Name: name}
		if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
			if name == "rita" {
				if err := tx.CreateOrganization(ctx, "caps"); err != nil {
					return err
				}
			}
			return tx.CreateUser(ctx, u, "hash")
		}}); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	rita, sam := users[0], users[1]
	const n, limit = 16, 2

	// Sam's creations, under a cap as large as they are many, are all
	// made first: they open the pool's connections too, so that rita's
	// start together rather than each behind a new connection.
	ticket := func(u *sluice.User, i, limit int) error {
		_, err := db.CreateStreamTicket(ctx, []byte(fmt.Sprintf("%s-ticket-%d", u.Name, i)), &sluice.Credential{User: u}, "", time.Hour, limit)
		return err
	}
	if made := concurrently(t, n, "unused stream tickets", func(i int) error { return ticket(sam, i, n) }); made != n {
		t.Errorf("%d of sam's %d stream tickets made under a cap of %[2]d", made, n)
	}
	if made := concurrently(t, n, "unused stream tickets", func(i int) error { return ticket(rita, i, limit) }); made != limit {
		t.Errorf("%d stream tickets made at once, want the cap's %d", made, limit)
	}

	token := func(u *sluice.User, i, limit int) error {
		_, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
			_, err := tx.CreateToken(ctx, u.ID, fmt.Sprintf("t%d", i), []byte(fmt.Sprintf("%s-token-%d", u.Name, i)), limit)
			return err
		}})
		return err
	}
	if made := concurrently(t, n, "API tokens", func(i int) error { return token(sam, i, n) }); made != n {
		t.Errorf("%d of sam's %d API tokens made under a cap of %[2]d", made, n)
	}
	if made := concurrently(t, n, "API tokens", func(i int) error { return token(rita, i, limit) }); made != limit {
		t.Errorf("%d API tokens made at once, want the cap's %d", made, limit)
	}
}

// TestStreamTicketWaitsForNoOtherUser: a stream ticket is made while a
// deletion of several users (an organization's) holds the user it
// deleted first, with that user's expired ticket, and comes to the
// ticket's user next. The creation locked its user's row, then waited
// to delete the expired ticket the deletion held, while the deletion
// waited for that row: Postgres broke the deadlock by failing one of
// them. Both are made now: the creation leaves a ticket another
// transaction holds to it.
func TestStreamTicketWaitsForNoOtherUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	var ann, bob *sluice.User
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, "locks"); err != nil {
			return err
		}
		ann, bob = &sluice.User{Org: "locks", Name: "ann"}, &sluice.User{Org: "locks", Name: "bob"}
		if err := tx.CreateUser(ctx, ann, "hash"); err != nil {
			return err
		}
		return tx.CreateUser(ctx, bob, "hash")
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateStreamTicket(ctx, []byte("ann-ticket"), &sluice.Credential{User: ann}, "", time.Millisecond, 10); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 30*time.Second, "ann's ticket expires", func() bool {
		var n int
		err := db.QueryRowForTest(ctx, "SELECT count(*) FROM sluice.stream_tickets WHERE expires_at <= now()", &n)
		return err == nil && n == 1
	})

	annGone, next := make(chan struct{}), make(chan struct{})
	deleted := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
			if err := tx.DeleteUser(ctx, ann); err != nil {
				return err
			}
			close(annGone)
			<-next
			return tx.DeleteUser(ctx, bob)
		}})
		deleted <- err
	}()
	<-annGone
	made := make(chan error, 1)
	go func() {
		_, err := db.CreateStreamTicket(ctx, []byte("bob-ticket"), &sluice.Credential{User: bob}, "", time.Hour, 10)
		made <- err
	}()
	var madeErr error
	madeDone := false
	eventually.True(t, 30*time.Second, "bob's ticket is made, or waits for a lock", func() bool {
		select {
		case madeErr = <-made:
			madeDone = true
			return true
		default:
		}
		var n int
		err := db.QueryRowForTest(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'", &n)
		return err == nil && n == 1
	})
	close(next)
	if !madeDone {
		madeErr = <-made
	}
	if madeErr != nil {
		t.Errorf("bob's stream ticket, made while ann's deletion held her expired one: %v", madeErr)
	}
	if err := <-deleted; err != nil {
		t.Errorf("the deletion of ann and then bob: %v", err)
	}
}

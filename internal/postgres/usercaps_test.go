package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
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

package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// interleaved runs first and then then in one write; between the two,
// while the write holds what first locked, other runs on its own
// goroutine until it is done or waits for a lock (a session of the
// test's database waits for one). It returns the write's error and
// other's.
func interleaved(t *testing.T, db *postgres.DB, first, then func(context.Context, *postgres.Tx) error, other func(context.Context) error) (writeErr, otherErr error) {
	t.Helper()
	ctx := context.Background()
	held, next := make(chan struct{}), make(chan struct{})
	goOn := sync.OnceFunc(func() { close(next) })
	defer goOn()
	wrote := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
			if err := first(ctx, tx); err != nil {
				return err
			}
			close(held)
			<-next
			return then(ctx, tx)
		}})
		wrote <- err
	}()
	select {
	case <-held:
	case err := <-wrote:
		t.Fatalf("the write's first step: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- other(ctx) }()
	finished := false
	eventually.True(t, 30*time.Second, "the other transaction is done, or waits for a lock", func() bool {
		select {
		case otherErr = <-done:
			finished = true
			return true
		default:
		}
		var n int
		err := db.QueryRowForTest(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'", &n)
		return err == nil && n == 1
	})
	goOn()
	if !finished {
		otherErr = <-done
	}
	return <-wrote, otherErr
}

// adminFixture is organization o with users ann and bob (bob holding
// an API token) and a database of schema s.
type adminFixture struct {
	db       *postgres.DB
	ann, bob *sluice.User
	token    int64
	d        *sluice.Database
	s        *sluice.Schema
}

func newAdminFixture(t *testing.T) *adminFixture {
	t.Helper()
	ctx := context.Background()
	f := &adminFixture{db: open(t), ann: &sluice.User{Org: "o", Name: "ann"}, bob: &sluice.User{Org: "o", Name: "bob"}}
	f.d, f.s = noteDatabase(t, f.db, "notes")
	if _, err := f.db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateUser(ctx, f.ann, "hash"); err != nil {
			return err
		}
		if err := tx.CreateUser(ctx, f.bob, "hash"); err != nil {
			return err
		}
		tok, err := tx.CreateToken(ctx, f.bob.ID, "t", []byte("bob-token"), 10)
		f.token = tok.ID
		return err
	}}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *adminFixture) write(ctx context.Context, before func(context.Context, *postgres.Tx) error) error {
	_, err := f.db.Write(ctx, postgres.WriteSpec{Before: before})
	return err
}

// TestAdministrativeWritesTakeLocksInOneOrder: an administrative write
// runs while an organization's deletion, which deletes its databases,
// then its users one after another, in one transaction, has done part
// of that and comes next to what the write locks. Each took two locks
// in the other order than the deletion: the deletion held the access
// log's counter row (taken with its first database or user) and waited
// for bob's row, which a password change, a token's revocation or a
// role's grant held (bob's row, or his token's or a key share of it)
// while it waited for the counter row; a webhook's creation held bob's
// row and waited for the database's counter row, which the deletion
// held, and a role's grant a key share of bob's row while it waited for
// the database's row. Postgres broke each deadlock by failing one of
// them (a 409 "retry"). Both succeed now, or the write finds the
// database gone, as one made after the deletion would.
func TestAdministrativeWritesTakeLocksInOneOrder(t *testing.T) {
	t.Parallel()
	seal := func(int64) ([]byte, error) { return []byte("sealed secret"), nil }
	for _, tc := range []struct {
		name string
		// first runs in the deletion, before other; bob's deletion
		// follows.
		first func(context.Context, *adminFixture, *postgres.Tx) error
		other func(context.Context, *adminFixture) error
		// want is other's error code ("": none).
		want sluice.Code
	}{
		{name: "password change after a user's deletion",
			first: func(ctx context.Context, f *adminFixture, tx *postgres.Tx) error { return tx.DeleteUser(ctx, f.ann) },
			other: func(ctx context.Context, f *adminFixture) error {
				return f.write(ctx, func(ctx context.Context, tx *postgres.Tx) error { return tx.SetPassword(ctx, f.bob, "new-hash") })
			}},
		{name: "password change after a database's deletion",
			first: func(ctx context.Context, f *adminFixture, tx *postgres.Tx) error { return tx.DeleteDatabase(ctx, f.d) },
			other: func(ctx context.Context, f *adminFixture) error {
				return f.write(ctx, func(ctx context.Context, tx *postgres.Tx) error { return tx.SetPassword(ctx, f.bob, "new-hash") })
			}},
		{name: "token revocation after a user's deletion",
			first: func(ctx context.Context, f *adminFixture, tx *postgres.Tx) error { return tx.DeleteUser(ctx, f.ann) },
			other: func(ctx context.Context, f *adminFixture) error {
				return f.write(ctx, func(ctx context.Context, tx *postgres.Tx) error { return tx.RevokeToken(ctx, f.bob.ID, f.token) })
			}},
		{name: "role grant after a user's deletion",
			first: func(ctx context.Context, f *adminFixture, tx *postgres.Tx) error { return tx.DeleteUser(ctx, f.ann) },
			other: func(ctx context.Context, f *adminFixture) error {
				return f.write(ctx, func(ctx context.Context, tx *postgres.Tx) error {
					return tx.SetRole(ctx, f.bob, f.d, sluice.RoleRead)
				})
			}},
		{name: "role grant after a database's deletion",
			first: func(ctx context.Context, f *adminFixture, tx *postgres.Tx) error { return tx.DeleteDatabase(ctx, f.d) },
			other: func(ctx context.Context, f *adminFixture) error {
				return f.write(ctx, func(ctx context.Context, tx *postgres.Tx) error {
					return tx.SetRole(ctx, f.bob, f.d, sluice.RoleRead)
				})
			},
			want: sluice.CodeNotFound},
		{name: "database creation by the user after a user's deletion",
			first: func(ctx context.Context, f *adminFixture, tx *postgres.Tx) error { return tx.DeleteUser(ctx, f.ann) },
			other: func(ctx context.Context, f *adminFixture) error {
				return f.write(ctx, func(ctx context.Context, tx *postgres.Tx) error {
					d := &sluice.Database{Org: "o", Name: "bobs"}
					if err := tx.CreateDatabase(ctx, d, f.s, postgres.Creator{ID: f.bob.ID, Name: f.bob.Name, Max: 5}); err != nil {
						return err
					}
					return tx.SetRole(ctx, f.bob, d, sluice.RoleAdmin)
				})
			}},
		{name: "webhook creation after a database's deletion",
			first: func(ctx context.Context, f *adminFixture, tx *postgres.Tx) error { return tx.DeleteDatabase(ctx, f.d) },
			other: func(ctx context.Context, f *adminFixture) error {
				w := &sluice.Webhook{Database: f.d, URL: "https://example.com/", Ops: []string{"create"}, Batch: sluice.BatchEvent,
					CreatorID: f.bob.ID, CreatorName: f.bob.Name}
				return f.db.CreateWebhook(ctx, w, seal, 5, 5)
			},
			want: sluice.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newAdminFixture(t)
			deleted, otherErr := interleaved(t, f.db,
				func(ctx context.Context, tx *postgres.Tx) error { return tc.first(ctx, f, tx) },
				func(ctx context.Context, tx *postgres.Tx) error { return tx.DeleteUser(ctx, f.bob) },
				func(ctx context.Context) error { return tc.other(ctx, f) })
			if deleted != nil {
				t.Errorf("the deletion: %v", deleted)
			}
			if tc.want == "" && otherErr != nil || tc.want != "" && sluice.ErrorCode(otherErr) != tc.want {
				t.Errorf("the write beside it: %v, want code %q", otherErr, tc.want)
			}
		})
	}
}

// TestRoleGrantBesideTheUsersDeletion: a role is granted to bob while
// his deletion, not yet committed, holds his row. The grant waits for it
// and then answers 404 naming bob. It failed its foreign key check
// (bob's row gone once the deletion committed), an internal error.
func TestRoleGrantBesideTheUsersDeletion(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	deleted, granted := interleaved(t, f.db,
		func(ctx context.Context, tx *postgres.Tx) error { return tx.DeleteUser(ctx, f.bob) },
		func(context.Context, *postgres.Tx) error { return nil },
		func(ctx context.Context) error {
			return f.write(ctx, func(ctx context.Context, tx *postgres.Tx) error { return tx.SetRole(ctx, f.bob, f.d, sluice.RoleRead) })
		})
	if deleted != nil {
		t.Errorf("the deletion: %v", deleted)
	}
	if sluice.ErrorCode(granted) != sluice.CodeNotFound || !strings.Contains(granted.Error(), `user "bob" does not exist`) {
		t.Errorf("the grant beside it: %v, want 404 user \"bob\" does not exist", granted)
	}
}

package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// TestOrganizationDeletionBesideAMembersDeletion: an organization's
// deletion has read its users, ann and bob, and waits for ann's row
// (another transaction holds a key share of it) when bob is deleted on
// his own. Both succeed. The organization's deletion found bob gone
// once it came to him, and answered 404 "user bob does not exist",
// leaving the organization and ann.
func TestOrganizationDeletionBesideAMembersDeletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, admin, dbURL := newOrganizationO(t, "ann", "bob")
	deleteOrganizationBeside(t, e, admin, dbURL, "ann's row", "SELECT 1 FROM sluice.users WHERE name = 'ann' FOR KEY SHARE", func() error {
		return e.DeleteUser(ctx, admin, "bob")
	})
	users, err := e.Users(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if u.Org == "o" {
			t.Fatalf("user %s of the deleted organization is left", u.Name)
		}
	}
}

// TestOrganizationDeletionBesideADatabasesDeletion: an organization's
// deletion has read its databases, a and b, and waits to drop a's table
// (another transaction reads it) when b is deleted on its own. Both
// succeed, and no database of the organization is left. The
// organization's deletion found b's schema gone once it came to it, and
// answered an internal error (schema "sluice_db_3" does not exist),
// leaving the organization and a; had b's deletion still held b's
// tables, it answered 409 "the database changed concurrently".
func TestOrganizationDeletionBesideADatabasesDeletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, admin, dbURL := newOrganizationO(t)
	var a *sluice.Database
	for _, name := range []string{"a", "b"} {
		d, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: "o", Name: name, Schema: "type Note { text: String }"})
		if err != nil {
			t.Fatal(err)
		}
		if name == "a" {
			a = d
		}
	}
	var table string
	if err := connect(t, dbURL).QueryRow(ctx, "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = $1 LIMIT 1", postgres.SchemaName(a)).Scan(&table); err != nil {
		t.Fatal(err)
	}
	watcher := deleteOrganizationBeside(t, e, admin, dbURL, "a's table", "LOCK TABLE "+table+" IN ACCESS SHARE MODE", func() error {
		return e.DeleteDatabase(ctx, admin, "o", "b")
	})
	var left int
	if err := watcher.QueryRow(ctx, "SELECT count(*) FROM sluice.databases WHERE org = 'o'").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d databases of the deleted organization are left", left)
	}
}

// deleteOrganizationBeside deletes organization o while another
// transaction holds what (the lock statement hold takes), runs meanwhile
// once the deletion waits for it, then lets the deletion go on. It fails
// the test unless both succeed and o is gone, and returns a connection to
// dbURL for further checks.
func deleteOrganizationBeside(t *testing.T, e *engine.Engine, admin *sluice.User, dbURL, what, hold string, meanwhile func() error) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	holder, watcher := connect(t, dbURL), connect(t, dbURL)
	if _, err := holder.Exec(ctx, "BEGIN; "+hold); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			if _, err := holder.Exec(ctx, "ROLLBACK"); err != nil {
				t.Error(err)
			}
		}
	}
	defer release()

	deleted := make(chan error, 1)
	go func() { deleted <- e.DeleteOrganization(ctx, admin, "o") }()
	eventually.True(t, 30*time.Second, "the organization's deletion waits for "+what, func() bool {
		var n int
		err := watcher.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
		return err == nil && n == 1
	})
	if err := meanwhile(); err != nil {
		t.Fatalf("meanwhile, while the organization's deletion waits for %s: %v", what, err)
	}
	release()
	if err := <-deleted; err != nil {
		t.Fatalf("the organization's deletion: %v", err)
	}
	orgs, err := e.Organizations(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(orgs, "o") {
		t.Fatalf("organizations after the deletion: %v", orgs)
	}
	return watcher
}

// connect opens a connection to url, closed when the test ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestDatabaseDeletionBesideItsOrganizationsDeletion: a database's
// deletion waits for its tables, which its organization's deletion has
// dropped (and waits for a member's row), when the organization's
// deletion commits. The database's deletion answers NotFound naming the
// database, not an internal error, and nothing of the organization is
// left.
func TestDatabaseDeletionBesideItsOrganizationsDeletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, admin, dbURL := newOrganizationO(t, "ann")
	var schemas []string
	for _, name := range []string{"a", "b"} {
		d, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: "o", Name: name, Schema: "type Note { text: String }"})
		if err != nil {
			t.Fatal(err)
		}
		schemas = append(schemas, postgres.SchemaName(d))
	}
	done := make(chan error, 1)
	watcher := deleteOrganizationBeside(t, e, admin, dbURL, "ann's row", "SELECT 1 FROM sluice.users WHERE name = 'ann' FOR KEY SHARE", func() error {
		go func() { done <- e.DeleteDatabase(ctx, admin, "o", "b") }()
		// The database's deletion waits too, for b's tables, which the
		// organization's deletion holds.
		w := connect(t, dbURL)
		eventually.True(t, 30*time.Second, "the database's deletion waits for b's tables", func() bool {
			var n int
			err := w.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
			return err == nil && n == 2
		})
		return nil
	})
	select {
	case err := <-done:
		if sluice.ErrorCode(err) != sluice.CodeNotFound || !strings.Contains(sluice.ErrorMessage(err), "o/b") {
			t.Errorf("the database's deletion, its organization's committed meanwhile: %v (%s); want NotFound naming o/b", err, sluice.ErrorCode(err))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the database's deletion did not end in 30s after its organization's")
	}
	var left int
	if err := watcher.QueryRow(ctx, "SELECT (SELECT count(*) FROM sluice.databases WHERE org = 'o') + (SELECT count(*) FROM pg_namespace WHERE nspname = ANY($1))", schemas).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d databases or schemas of the deleted organization are left", left)
	}
}

// newOrganizationO starts an engine on a database of its own, with an
// organization "o" whose members are users (each's password "password-"
// and its name).
func newOrganizationO(t *testing.T, users ...string) (*engine.Engine, *sluice.User, string) {
	t.Helper()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	e, _, admin := newEngineOn(t, dbURL)
	if err := e.CreateOrganization(ctx, admin, "o"); err != nil {
		t.Fatal(err)
	}
	for _, name := range users {
		if _, err := e.CreateUser(ctx, admin, "o", name, "password-"+name); err != nil {
			t.Fatal(err)
		}
	}
	return e, admin, dbURL
}

package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestOtherRolesCannotHoldSluicesLocks: a Postgres role that may log in
// and holds no grant at all holds, for as long as the test lasts, every
// advisory lock Sluice used to take (the migrations', the backlink
// indexes', the bootstrap's and a user's Idempotency-Key's), tries to lock
// the rows Sluice locks now, and to hold locks on Sluice's tables by
// preparing statements (which take their locks before the privileges are
// checked). Meanwhile a keyed write and its retry answer as they should,
// and another replica starts (migrations, bootstrap, backlink indexes).
func TestOtherRolesCannotHoldSluicesLocks(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "locked", "type Order { n: Int owner: Order }")
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	role := "stranger_" + hex.EncodeToString(b)
	sqlExec(t, a.DatabaseURL, "CREATE ROLE "+role+" LOGIN")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var adminID string
	if err := queryString(a.DatabaseURL, "SELECT id::text FROM sluice.users WHERE name = 'admin'", &adminID); err != nil {
		t.Fatal(err)
	}
	stranger, err := pgx.Connect(ctx, withUser(t, a.DatabaseURL, role))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close(context.WithoutCancel(ctx))
	for _, lock := range []string{
		"SELECT pg_advisory_lock(x'736c75696365'::bigint)",                    // migrations
		"SELECT pg_advisory_lock(x'736c75696366'::bigint)",                    // backlink indexes
		"SELECT pg_advisory_lock(hashtext('sluice bootstrap'))",               // bootstrap
		"SELECT pg_advisory_lock(7652, hashtext('" + adminID + "/order-42'))", // admin's key order-42
	} {
		if _, err := stranger.Exec(ctx, lock); err != nil {
			t.Fatalf("%s: %v", lock, err)
		}
	}
	// Sluice's rows and tables are out of its reach, even to name.
	if _, err := stranger.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"SELECT * FROM sluice.locks FOR UPDATE",
		"SELECT * FROM sluice.idempotency_claims FOR UPDATE",
		"PREPARE p1 AS DELETE FROM sluice.locks",
		"PREPARE p2 AS UPDATE sluice.commit_counters SET last_seq = 0",
		"PREPARE p3 AS DELETE FROM sluice.schema_migrations",
	} {
		if _, err := stranger.Exec(ctx, "SAVEPOINT s"); err != nil {
			t.Fatal(err)
		}
		if _, err := stranger.Exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "permission denied for schema sluice") {
			t.Errorf("%s: %v, want permission denied", stmt, err)
		}
		if _, err := stranger.Exec(ctx, "ROLLBACK TO SAVEPOINT s"); err != nil {
			t.Fatal(err)
		}
	}

	// The keyed write commits, and its retry answers the same.
	const order = `{"@type":"Order","@id":"Order/42","n":1}`
	first := a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/locked", order, "Idempotency-Key", "order-42")
	sameAnswer(t, first, a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/locked", order, "Idempotency-Key", "order-42"))

	// Another replica starts (dt.Start fails the test after a minute).
	c := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	c.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/locked?id=Order/42", nil)
	if n := logLength(t, c, "locked"); n != 1 {
		t.Fatalf("%d commits, want 1", n)
	}
}

package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// TestAnotherRoleCannotServe: the capture triggers tell Sluice's writes
// from other roles' by Sluice's role, so a process connecting as another
// role refuses to start (Migrate fails, naming both roles), rather than
// having every write it makes recorded twice.
func TestAnotherRoleCannotServe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	db, err := postgres.Open(ctx, dbURL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	other := "other_" + hex.EncodeToString(b)
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.ExecForTest(ctx, "CREATE ROLE "+other+" LOGIN SUPERUSER")
	}}); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("user", other)
	u.RawQuery = q.Encode()
	odb, err := postgres.Open(ctx, u.String(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(odb.Close)
	if _, err := odb.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "every replica must connect as") || !strings.Contains(err.Error(), other) {
		t.Fatalf("Migrate as another role: %v", err)
	}
}

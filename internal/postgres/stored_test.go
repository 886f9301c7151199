package postgres_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// storedDatabase opens a migrated DB with opts and creates o/<name> of
// schema sdl in it, returning them and the quoted table of class W.
func storedDatabase(t *testing.T, sdl string, opts ...postgres.Option) (*postgres.DB, *sluice.Database, *sluice.Schema, string) {
	t.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, pgtest.NewDatabase(t), slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := schema.Parse(sdl)
	if err != nil {
		t.Fatal(err)
	}
	d := &sluice.Database{Org: "o", Name: "stored"}
	_, err = db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, "o"); err != nil {
			return err
		}
		return tx.CreateDatabase(ctx, d, s, postgres.Creator{})
	}})
	if err != nil {
		t.Fatal(err)
	}
	return db, d, s, `"` + postgres.SchemaName(d) + `"."W"`
}

// writeRows runs sql, statements that write W's rows directly, as
// Sluice's own connections do: the capture triggers, and the check of
// migration 28 with them, are skipped, as they were for rows written
// before it.
func writeRows(t *testing.T, db *postgres.DB, sql ...string) {
	t.Helper()
	_, err := db.Write(context.Background(), postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		for _, q := range sql {
			if err := tx.ExecForTest(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
}

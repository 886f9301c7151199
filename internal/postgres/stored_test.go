package postgres_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
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

// TestRewriteStoredBoundsWhatItHolds: RewriteStored reads a class of
// rows totalling far more than its byte bound a few rows at a time, each
// read holding at most postgres.StoredBytesForTest bytes of text unless
// it holds one row (one larger than the bound is read alone), and still
// reads and rewrites every row, in id order. It read up to 1,000 rows at
// a time whatever their size: here all of them, 26 MB, in one read.
func TestRewriteStoredBoundsWhatItHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type read struct{ rows, bytes int }
	var mu sync.Mutex
	var reads []read
	db, d, s, tbl := storedDatabase(t, "type W { s: String n: Int }", postgres.StoredReadForTest(func(rows, bytes int) {
		mu.Lock()
		defer mu.Unlock()
		reads = append(reads, read{rows, bytes})
	}))
	// 40 rows of 512 KiB, one of 6 MiB among them, and small rows.
	writeRows(t, db,
		"INSERT INTO "+tbl+" (_id, _commit_uid, s) SELECT 'W/' || lpad(i::text, 3, '0'), 1, repeat('x', 512 * 1024) FROM generate_series(1, 40) i",
		"UPDATE "+tbl+" SET s = repeat('y', 6 * 1024 * 1024) WHERE _id = 'W/020'",
		"INSERT INTO "+tbl+" (_id, _commit_uid, s) SELECT 'W/s' || lpad(i::text, 3, '0'), 1, 'small' FROM generate_series(1, 100) i")

	var seen []string
	_, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.RewriteStored(ctx, d, postgres.StoredValues{Class: "W", Fields: []*sluice.Field{s.Class("W").Field("s")}, Every: true},
			func(id string, row map[string]any) (map[string]any, error) {
				seen = append(seen, id)
				v, _ := row["s"].(string)
				return map[string]any{"s": v[:1] + "!"}, nil
			})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 140 || !slices.IsSorted(seen) {
		t.Fatalf("fn saw %d rows (sorted: %t), want 140 in id order", len(seen), slices.IsSorted(seen))
	}
	mu.Lock()
	defer mu.Unlock()
	total, most, alone := 0, 0, false
	for _, r := range reads {
		total += r.rows
		if r.rows > 1 {
			most = max(most, r.bytes)
		}
		alone = alone || r.rows == 1 && r.bytes > 6*1024*1024
		if r.rows > 1 && r.bytes > postgres.StoredBytesForTest {
			t.Errorf("a read held %d rows of %d bytes, more than the bound of %d", r.rows, r.bytes, postgres.StoredBytesForTest)
		}
	}
	if total != 140 || len(reads) < 7 || !alone {
		t.Errorf("%d reads of %d rows in all, the 6 MiB row read alone: %t; %v", len(reads), total, alone, reads)
	}
	var rewritten int
	if err := db.QueryRowForTest(ctx, "SELECT count(*) FROM "+tbl+" WHERE s IN ('x!', 'y!', 's!')", &rewritten); err != nil || rewritten != 140 {
		t.Fatalf("%d rows rewritten (%v), want 140", rewritten, err)
	}
	t.Logf("%d reads, the most bytes held by a read of several rows %d", len(reads), most)
}

package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
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

// TestRewriteStoredRefusesTooManyValues: a row holding more than
// schema.MaxValues values in the columns RewriteStored reads (written in
// SQL past migration 28's check) is not decoded nor given to fn:
// RewriteStored fails with a Conflict naming the class, the document and
// its fields, counting its columns together, as the API counts a
// document. A row at the bound is read. Before, the row was decoded
// whole, a value for each.
func TestRewriteStoredRefusesTooManyValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, tbl := storedDatabase(t, "type W { xs: [Int!] ys: [Int!] n: Int }")
	zeros := func(n int) string { return "(SELECT jsonb_agg(0) FROM generate_series(1, " + strconv.Itoa(n) + "))" }
	writeRows(t, db,
		"INSERT INTO "+tbl+" (_id, _commit_uid, xs) VALUES ('W/1', 1, '[1, 2]')",
		"INSERT INTO "+tbl+" (_id, _commit_uid, xs) VALUES ('W/2', 1, "+zeros(schema.MaxValues-1)+")", // the list and its elements
		"INSERT INTO "+tbl+" (_id, _commit_uid, xs) VALUES ('W/3', 1, "+zeros(schema.MaxValues)+")",
		"INSERT INTO "+tbl+" (_id, _commit_uid, xs, ys) VALUES ('W/4', 1, "+zeros(schema.MaxValues/2)+", "+zeros(schema.MaxValues/2)+")")
	w := s.Class("W")
	for _, c := range []struct {
		name   string
		values postgres.StoredValues
		seen   []string
		want   string
	}{
		{"one field", postgres.StoredValues{Class: "W", Fields: []*sluice.Field{w.Field("xs")}, Held: []string{"xs"}}, []string{"W/1", "W/2"},
			"cannot change the schema: document W/3 of class W holds 1000001 values in field xs, more than 1000000, the most a document may"},
		{"two fields", postgres.StoredValues{Class: "W", Fields: []*sluice.Field{w.Field("xs"), w.Field("ys")}, Held: []string{"ys"}}, nil,
			"cannot change the schema: document W/4 of class W holds 1000002 values in fields xs, ys, more than 1000000, the most a document may"},
	} {
		var seen []string
		err := db.Inspect(ctx, func(tx *postgres.Tx) error {
			return tx.RewriteStored(ctx, d, c.values, func(id string, row map[string]any) (map[string]any, error) {
				seen = append(seen, id)
				return nil, nil
			})
		})
		var se *sluice.Error
		if !errors.As(err, &se) || se.Code != sluice.CodeConflict || !strings.Contains(se.Message, c.want) {
			t.Errorf("%s: %.300v, want a Conflict: %s", c.name, err, c.want)
		}
		if !slices.Equal(seen, c.seen) {
			t.Errorf("%s: fn saw %q, want %q", c.name, seen, c.seen)
		}
	}
}

package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestReadLogTellsSchemaVersions: every commit read from the log carries
// the schema version it was made under, and the first commit of a
// version says so (NewSchema): a schema change that commits (as the
// engine's do), and, for two changes with no commit between them (as
// before schema changes were commits), the first commit after them, of
// the later version. A version made after the list was cached is seen.
func TestReadLogTellsSchemaVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := noteDatabase(t, db, "v")
	n := 0
	commit := func() {
		t.Helper()
		n++
		doc := &sluice.Document{ID: fmt.Sprintf("Note/%d", n), Type: "Note", Fields: map[string]any{"text": "x"}}
		_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
			Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Insert(ctx, []*sluice.Document{doc}) }})
		if err != nil {
			t.Fatal(err)
		}
	}
	commit() // 1, version 1
	change := func(sdl string, commit bool) *sluice.Schema {
		t.Helper()
		next, err := schema.Parse(sdl)
		if err != nil {
			t.Fatal(err)
		}
		spec := postgres.WriteSpec{Database: d, Schema: next, Meta: postgres.CommitMeta{User: "admin"},
			Before: func(ctx context.Context, tx *postgres.Tx) error {
				if err := tx.LockDatabase(ctx, d); err != nil {
					return err
				}
				return tx.ChangeSchema(ctx, d, s, next)
			}}
		if commit {
			spec.Documents = func(context.Context, *postgres.Writer) error { return nil }
		}
		if _, err := db.Write(ctx, spec); err != nil {
			t.Fatal(err)
		}
		s = next
		return next
	}
	change("type Note { text: String! a: Int }", true) // 2, version 2
	commit()                                           // 3, version 2
	read := func() []*sluice.Commit {
		cs, _, err := db.ReadLog(ctx, d, sluice.Position{Epoch: d.Epoch, Index: sluice.WholeCommit}, sluice.Stamp{}, 100, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	check := func(cs []*sluice.Commit, want [][2]int) {
		t.Helper()
		if len(cs) != len(want) {
			t.Fatalf("%d commits, want %d", len(cs), len(want))
		}
		for i, c := range cs {
			isNew := 0
			if c.NewSchema {
				isNew = 1
			}
			if c.SchemaVersion != want[i][0] || isNew != want[i][1] {
				t.Errorf("commit %d: version %d, new %v; want %d, %v", c.Seq, c.SchemaVersion, c.NewSchema, want[i][0], want[i][1] == 1)
			}
		}
	}
	check(read(), [][2]int{{1, 0}, {2, 1}, {2, 0}}) // the list is cached now
	change("type Note { text: String! a: Int b: Int }", false)
	change("type Note { text: String! a: Int b: Int c: Int }", false)
	commit() // 4, version 4, the first of versions 3 and 4
	check(read(), [][2]int{{1, 0}, {2, 1}, {2, 0}, {4, 1}})
}

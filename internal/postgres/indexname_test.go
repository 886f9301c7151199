package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// collision returns two names, prefix followed by digits to 63 bytes,
// that name gives the same index name: a birthday search over the 32
// bits of the names' hash (about 80,000 names), as a schema's author
// can run offline.
func collision(t *testing.T, prefix string, name func(string) string) (string, string) {
	t.Helper()
	seen := map[string]string{}
	for i := range 10_000_000 {
		n := fmt.Sprintf("%s%0*d", prefix, 63-len(prefix), i)
		ix := name(n)
		if other, ok := seen[ix]; ok {
			return other, n
		}
		seen[ix] = n
	}
	t.Fatal("no collision in 10,000,000 names")
	return "", ""
}

// changeSchema changes d's schema from prev to the one sdl declares.
func changeSchema(ctx context.Context, db *postgres.DB, d *sluice.Database, prev *sluice.Schema, sdl string) (*sluice.Schema, error) {
	next, err := schema.Parse(sdl)
	if err != nil {
		return nil, err
	}
	_, err = db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.LockDatabase(ctx, d); err != nil {
			return err
		}
		return tx.ChangeSchema(ctx, d, prev, next)
	}})
	return next, err
}

// TestIndexNamesThatCollide: index names are the class and field names
// cut to fit 63 bytes and a 32-bit hash, so a schema's author can find
// two indexes of one name. Two such indexes in one schema are refused,
// naming both, before anything is built: the second's CREATE INDEX IF
// NOT EXISTS was skipped, the first standing for it without a word. And
// a schema change that drops one and adds the other (of another class)
// builds the new one: its CREATE was skipped, the old index still
// there, which was then dropped, leaving neither.
func TestIndexNamesThatCollide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := noteDatabase(t, db, "a")

	// Two fields of one class.
	f1, f2 := collision(t, "f"+strings.Repeat("x", 51), func(f string) string { return postgres.IndexNameForTest("Note", f) })
	_, err := changeSchema(ctx, db, d, s, fmt.Sprintf("type Note { text: String! %s: Int @index %s: Int @index }", f1, f2))
	var se *sluice.Error
	if !errors.As(err, &se) || se.Code != sluice.CodeInvalid || !strings.Contains(se.Message, "Note("+f1+")") || !strings.Contains(se.Message, "Note("+f2+")") {
		t.Errorf("two indexes of one name: %v; want Invalid naming both", err)
	}
	if got, err := db.IndexesForTest(ctx, d, "Note"); err != nil || len(got) != 0 {
		t.Errorf("after the refused change: indexes %v (%v), want none", got, err)
	}

	// Two classes: one's index dropped, the other's of the same name
	// added, in one change.
	s, _ = schema.Parse("type Note { text: String! }")
	d = &sluice.Database{Org: "o", Name: "b"}
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.CreateDatabase(ctx, d, s, postgres.Creator{})
	}}); err != nil {
		t.Fatal(err)
	}
	k1, k2 := collision(t, "K"+strings.Repeat("x", 53), func(c string) string { return postgres.IndexNameForTest(c, "n") })
	s, err = changeSchema(ctx, db, d, s, fmt.Sprintf("type Note { text: String! } type %s { n: Int @index } type %s { n: Int }", k1, k2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err = changeSchema(ctx, db, d, s, fmt.Sprintf("type Note { text: String! } type %s { n: Int @index } type %s { n: Int }", k2, k1)); err != nil {
		t.Fatal(err)
	}
	for class, want := range map[string]int{k1: 0, k2: 1} {
		all, err := db.IndexesForTest(ctx, d, class)
		// Not the primary key, whose name Postgres cut from the
		// class's and made unique itself (IndexesForTest leaves out
		// only <class>_pkey).
		var got []string
		for _, ix := range all {
			if !strings.Contains(ix, "UNIQUE INDEX") {
				got = append(got, ix)
			}
		}
		if err != nil || len(got) != want {
			t.Errorf("%s has indexes %v (%v), want %d", class, got, err, want)
		}
	}
}

// TestBacklinkIndexGoesWhenAnIndexServes: a single reference's backlink
// index is dropped when an @index on just that field comes to serve its
// backlinks, and built again when the @index goes. It was kept, unused,
// its name taken.
func TestBacklinkIndexGoesWhenAnIndexServes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := noteDatabase(t, db, "a")
	ref := postgres.RefIndexNameForTest("Note", "next")
	for _, step := range []struct {
		sdl  string
		want bool
	}{
		{"type Note { text: String! next: Note }", true},
		{"type Note { text: String! next: Note @index }", false},
		{"type Note { text: String! next: Note }", true},
	} {
		var err error
		if s, err = changeSchema(ctx, db, d, s, step.sdl); err != nil {
			t.Fatal(err)
		}
		if exists, _, err := db.IndexValidForTest(ctx, d, ref); err != nil || exists != step.want {
			t.Errorf("%s: backlink index %s exists: %v (%v), want %v", step.sdl, ref, exists, err, step.want)
		}
	}
}

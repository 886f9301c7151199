package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// TestInspectReadsOneSnapshot: Inspect's reads are of one snapshot, as a
// preview's answer is documented to be: a row written by another
// transaction between two of them is seen by neither (each statement
// read the tables afresh). RewriteStored measures rows, then reads them.
func TestInspectReadsOneSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, tbl := storedDatabase(t, "type W { s: String }")
	writeRows(t, db, "INSERT INTO "+tbl+" (_id, _commit_uid, s) VALUES ('W/1', 1, 'a')")
	values := postgres.StoredValues{Class: "W", Fields: []*sluice.Field{s.Class("W").Field("s")}, Every: true}
	var walks [2][]string
	err := db.Inspect(ctx, func(tx *postgres.Tx) error {
		for i := range walks {
			err := tx.RewriteStored(ctx, d, values, func(id string, row map[string]any) (map[string]any, error) {
				walks[i] = append(walks[i], id)
				return nil, nil
			})
			if err != nil {
				return err
			}
			if i == 0 {
				if err := db.ExecDBForTest(ctx, "INSERT INTO "+tbl+" (_id, _commit_uid, s) VALUES ('W/2', 1, 'b')"); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"W/1"}; !slices.Equal(walks[0], want) || !slices.Equal(walks[1], want) {
		t.Fatalf("walks %q, want %q twice", walks, want)
	}
}

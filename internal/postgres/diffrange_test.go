package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// TestDiffRangeCounts: DiffRange counts the changes between two positions
// exactly, those of the commits at either end after and up to their
// positions' indexes, and names the furthest position that fits: inside
// the commit that passes the bound, or at the end of the one before when
// that one reaches it; commits without changes count as commits, so that
// more of them than the bound allows is over too.
func TestDiffRangeCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := noteDatabase(t, db, "r")
	// Commits 1 to 6 hold 3, 1, 0, 0, 0 and 2 changes.
	next := 0
	for _, n := range []int{3, 1, 0, 0, 0, 2} {
		_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
			Documents: func(_ context.Context, w *postgres.Writer) error {
				docs := make([]*sluice.Document, n)
				for i := range docs {
					docs[i] = &sluice.Document{ID: fmt.Sprintf("Note/n%d", next), Type: "Note", Fields: map[string]any{"text": "x"}}
					next++
				}
				return w.Insert(ctx, docs)
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
	pos := func(seq int64, index int) sluice.Position {
		return sluice.Position{Epoch: d.Epoch, Seq: seq, Index: index}
	}
	const whole = sluice.WholeCommit
	for _, c := range []struct {
		from, to sluice.Position
		most     int64
		want     postgres.DiffRange
	}{
		{pos(0, whole), pos(6, whole), 6, postgres.DiffRange{}},
		{pos(0, whole), pos(6, whole), 5, postgres.DiffRange{Over: true, Fits: pos(6, 0)}},
		{pos(0, whole), pos(6, whole), 4, postgres.DiffRange{Over: true, Fits: pos(5, whole)}},
		{pos(0, whole), pos(6, whole), 3, postgres.DiffRange{Over: true, Fits: pos(1, whole)}},
		{pos(0, whole), pos(6, whole), 2, postgres.DiffRange{Over: true, Fits: pos(1, 1)}},
		{pos(0, whole), pos(6, 0), 5, postgres.DiffRange{}},
		{pos(1, 0), pos(6, whole), 5, postgres.DiffRange{}},
		{pos(1, 0), pos(6, whole), 4, postgres.DiffRange{Over: true, Fits: pos(6, 0)}},
		{pos(1, 0), pos(1, 2), 2, postgres.DiffRange{}},
		{pos(1, 0), pos(1, 2), 1, postgres.DiffRange{Over: true, Fits: pos(1, 1)}},
		{pos(1, 2), pos(2, whole), 1, postgres.DiffRange{}},
		{pos(6, whole), pos(6, whole), 1, postgres.DiffRange{}},
		// Commits 3 to 5 hold no change: three commits pass a bound of one.
		{pos(2, whole), pos(5, whole), 1, postgres.DiffRange{Over: true, ByCommits: true, Fits: pos(4, whole)}},
		{pos(2, whole), pos(4, whole), 1, postgres.DiffRange{}},
	} {
		got, err := db.DiffRange(ctx, d, c.from, c.to, c.most)
		if err != nil || got != c.want {
			t.Errorf("DiffRange(%s, %s, %d) = %+v, %v; want %+v", c.from, c.to, c.most, got, err, c.want)
		}
		// A read as of from counts the same range up to the head.
		if c.to != pos(6, whole) {
			continue
		}
		h, got, _, err := db.PastRange(ctx, d, c.from, c.most)
		if err != nil || got != c.want || h.LastSeq != 6 {
			t.Errorf("PastRange(%s, %d) = %+v, %+v, %v; want %+v", c.from, c.most, h, got, err, c.want)
		}
	}
	// The oldest position a read as of reaches: inside the commit that
	// passes the bound, or at the end of the one that is a commit too
	// many (as DiffRange counts them from there).
	// Commits 3 to 5, without changes, are a commit too many for bounds
	// of 2 and 3 before they are changes too many.
	for _, c := range []struct {
		most          int64
		want          sluice.Position
		byCommits, ok bool
	}{
		{6, sluice.Position{}, false, false},
		{5, pos(1, 0), false, true},
		{4, pos(1, whole), false, true},
		{3, pos(2, whole), true, true},
		{2, pos(3, whole), true, true},
		{1, pos(6, 0), false, true},
	} {
		got, byCommits, ok, err := db.OldestPast(ctx, d, c.most)
		if err != nil || got != c.want || byCommits != c.byCommits || ok != c.ok {
			t.Errorf("OldestPast(%d) = %s, %v, %v, %v; want %s, %v, %v", c.most, got, byCommits, ok, err, c.want, c.byCommits, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if rg, err := db.DiffRange(ctx, d, got, pos(6, whole), c.most); err != nil || rg.Over {
			t.Errorf("OldestPast(%d) = %s, over: %+v %v", c.most, got, rg, err)
		}
		// From the end of the commit before, the log passes the bound
		// as byCommits says.
		before := pos(got.Seq-1, whole)
		if rg, err := db.DiffRange(ctx, d, before, pos(6, whole), c.most); err != nil || !rg.Over || rg.ByCommits != byCommits {
			t.Errorf("OldestPast(%d) = %s, %v, and from %s: %+v %v", c.most, got, byCommits, before, rg, err)
		}
		if got.Index != whole && got.Index > 0 {
			before := sluice.Position{Epoch: d.Epoch, Seq: got.Seq, Index: got.Index - 1}
			if rg, err := db.DiffRange(ctx, d, before, pos(6, whole), c.most); err != nil || !rg.Over {
				t.Errorf("OldestPast(%d) = %s, and %s is not over: %+v %v", c.most, got, before, rg, err)
			}
		}
	}
}

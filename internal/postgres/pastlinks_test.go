package postgres_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// TestPastBacklinksReadChangesOnce: backlinks read as of a position that
// every linking document has changed since are the lists read at that
// position (a single reference in the default order and in another, with
// an offset, a filter and no limit; a list of references; a parent's
// classes), and the changed documents' rows are scanned once for all the
// targets. Found by review: each target's subquery scanned all of them
// (3,000 users' notes all changed since the position: 2.6 s, 0.1 s now).
func TestPastBacklinksReadChangesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := linkedDatabase(t, db, "pastlinks", 400)
	write := func(docs []*sluice.Document) *sluice.Commit {
		t.Helper()
		c, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
			Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Replace(ctx, docs, false) }})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	at := write([]*sluice.Document{{ID: "Owner/big", Type: "Owner", Fields: map[string]any{"name": "Big"}}})
	targets := []string{"Owner/big", "Owner/small"}
	for i := range 500 {
		targets = append(targets, fmt.Sprintf("Owner/o%03d", i))
	}
	query := func(class string, classes []string, field string, limit, offset int64, order []postgres.OrderKey, filter map[string]any) postgres.BacklinkQuery {
		q := postgres.BacklinkQuery{Query: postgres.DocQuery{Class: class, Classes: classes, Limit: limit, Offset: offset, Order: order},
			Field: field, Targets: targets, Total: 100000}
		if filter != nil {
			q.Query.Filter = mustFilter(t, s, class, filter)
		}
		return q
	}
	cases := []struct {
		name string
		q    postgres.BacklinkQuery
	}{
		{"a single reference", query("Item", []string{"Item"}, "owner", 3, 1, nil, nil)},
		{"a single reference, by name, filtered", query("Item", []string{"Item"}, "owner", -1, 0,
			[]postgres.OrderKey{{Field: "name", Desc: true}}, map[string]any{"price": map[string]any{"ge": 100}})},
		{"a list of references", query("Item", []string{"Item"}, "owners", 5, 0, nil, nil)},
		{"a parent's classes", query("Animal", []string{"Animal", "Dog"}, "keeper", 10, 2, nil, nil)},
	}
	type entry struct {
		id     string
		fields map[string]any
	}
	read := func(ctx context.Context, q postgres.BacklinkQuery) [][]entry {
		t.Helper()
		lists, err := db.Backlinks(ctx, d, s, q)
		if err != nil {
			t.Fatal(err)
		}
		out := make([][]entry, len(lists))
		for i, l := range lists {
			for _, x := range l {
				out[i] = append(out[i], entry{x.Doc.ID, x.Doc.Fields})
			}
		}
		return out
	}
	want := make([][][]entry, len(cases))
	for i, c := range cases {
		want[i] = read(ctx, c.q)
	}
	// Every item, animal and dog changes: renamed, and linked elsewhere.
	var docs []*sluice.Document
	for i := range 400 {
		docs = append(docs, &sluice.Document{ID: fmt.Sprintf("Item/i%05d", i), Type: "Item", Fields: map[string]any{
			"name": fmt.Sprintf("moved %05d", i), "price": 1.5, "owner": "Owner/small", "owners": []any{"Owner/o001"}}})
	}
	for i := range 200 {
		docs = append(docs,
			&sluice.Document{ID: fmt.Sprintf("Animal/a%05d", i), Type: "Animal", Fields: map[string]any{"keeper": "Owner/small"}},
			&sluice.Document{ID: fmt.Sprintf("Dog/d%05d", i), Type: "Dog", Fields: map[string]any{"keeper": "Owner/small"}})
	}
	write(docs)

	snap := db.Snapshot(d)
	defer snap.Close()
	snap.SetAsOf(&postgres.AsOf{Pos: sluice.Position{Epoch: d.Epoch, Seq: at.Seq, Index: sluice.WholeCommit}})
	past := postgres.WithSnapshot(ctx, snap)
	// A CTE scan of the changed rows run more than once.
	rescan := regexp.MustCompile(`CTE Scan on past_\d+ .*loops=([2-9]|\d\d+)\)`)
	for i, c := range cases {
		if got := read(past, c.q); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("%s as of the position:\n got %v\nwant %v", c.name, got, want[i])
		}
		plan, err := db.ExplainBacklinks(past, d, s, c.q, true)
		if err != nil {
			t.Fatal(err)
		}
		if m := rescan.FindString(plan); m != "" {
			t.Errorf("%s: the changed rows are scanned per target (%s):\n%s", c.name, m, plan)
		}
	}
}

// TestPastBacklinksAggregateAPage: backlinks read as of a position gather
// each target's changed linking documents into one JSON array, which
// Postgres builds whole in memory; only those that can be on the
// target's page go in (they pass its filter and are among its first
// limit + offset, or row budget + offset, in its order), so that the
// array is bounded by the page and the request's row budget, not by how
// many documents linking to the target changed since. Before, every one
// went in: 200 to 400 rows for a page of 3 to 12. The lists read are
// those read at the position.
func TestPastBacklinksAggregateAPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := linkedDatabase(t, db, "pastpage", 400)
	write := func(docs []*sluice.Document) *sluice.Commit {
		t.Helper()
		c, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
			Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Replace(ctx, docs, false) }})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	at := write([]*sluice.Document{{ID: "Owner/big", Type: "Owner", Fields: map[string]any{"name": "Big"}}})
	targets := []string{"Owner/big", "Owner/small"}
	query := func(class string, classes []string, field string, limit, offset, total int64, order []postgres.OrderKey, filter map[string]any) postgres.BacklinkQuery {
		q := postgres.BacklinkQuery{Query: postgres.DocQuery{Class: class, Classes: classes, Limit: limit, Offset: offset, Order: order},
			Field: field, Targets: targets, Total: total}
		if filter != nil {
			q.Query.Filter = mustFilter(t, s, class, filter)
		}
		return q
	}
	// As of the position, big has 200 items (owner), 200 items listing
	// it and small (owners), 200 animals and 200 dogs (keeper).
	cases := []struct {
		name string
		q    postgres.BacklinkQuery
		cut  int // the most rows of one target's page, offset included
	}{
		{"a single reference", query("Item", []string{"Item"}, "owner", 3, 1, 100000, nil, nil), 4},
		{"a single reference, by name, filtered", query("Item", []string{"Item"}, "owner", 5, 0, 100000,
			[]postgres.OrderKey{{Field: "name", Desc: true}}, map[string]any{"price": map[string]any{"ge": 100}}), 5},
		{"a single reference, by the row budget", query("Item", []string{"Item"}, "owner", -1, 2, 7, nil, nil), 9},
		{"a list of references", query("Item", []string{"Item"}, "owners", 5, 0, 100000, nil, nil), 5},
		{"a parent's classes", query("Animal", []string{"Animal", "Dog"}, "keeper", 10, 2, 100000,
			[]postgres.OrderKey{{Field: "name"}}, nil), 12},
		// The page's end saturates (0: not counted).
		{"an offset near the largest integer", query("Item", []string{"Item"}, "owner", 3, math.MaxInt64-1, 100000, nil, nil), 0},
	}
	type entry struct {
		id     string
		fields map[string]any
	}
	read := func(ctx context.Context, q postgres.BacklinkQuery) [][]entry {
		t.Helper()
		lists, err := db.Backlinks(ctx, d, s, q)
		if err != nil {
			t.Fatal(err)
		}
		out := make([][]entry, len(lists))
		for i, l := range lists {
			for _, x := range l {
				out[i] = append(out[i], entry{x.Doc.ID, x.Doc.Fields})
			}
		}
		return out
	}
	want := make([][][]entry, len(cases))
	for i, c := range cases {
		want[i] = read(ctx, c.q)
	}
	var docs []*sluice.Document
	for i := range 400 {
		docs = append(docs, &sluice.Document{ID: fmt.Sprintf("Item/i%05d", i), Type: "Item", Fields: map[string]any{
			"name": fmt.Sprintf("moved %05d", i), "price": 1.5, "owner": "Owner/o001", "owners": []any{"Owner/o001"}}})
	}
	for i := range 200 {
		docs = append(docs,
			&sluice.Document{ID: fmt.Sprintf("Animal/a%05d", i), Type: "Animal", Fields: map[string]any{"keeper": "Owner/o001"}},
			&sluice.Document{ID: fmt.Sprintf("Dog/d%05d", i), Type: "Dog", Fields: map[string]any{"keeper": "Owner/o001"}})
	}
	write(docs)

	snap := db.Snapshot(d)
	defer snap.Close()
	snap.SetAsOf(&postgres.AsOf{Pos: sluice.Position{Epoch: d.Epoch, Seq: at.Seq, Index: sluice.WholeCommit}})
	past := postgres.WithSnapshot(ctx, snap)
	for i, c := range cases {
		if got := read(past, c.q); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("%s as of the position:\n got %v\nwant %v", c.name, got, want[i])
		}
		plan, err := db.ExplainBacklinks(past, d, s, c.q, true)
		if err != nil {
			t.Fatal(err)
		}
		// One row or none per target besides those gathered.
		if n := aggregated(t, plan); c.cut > 0 && n > len(targets)*c.cut {
			t.Errorf("%s: %d rows gathered into the targets' arrays, want at most %d (%d targets, pages of %d):\n%s", c.name, n, len(targets)*c.cut, len(targets), c.cut, plan)
		}
	}
}

// aggregated returns the rows that the plan's aggregate of the targets
// (grouped by p.id, p._k) reads: the actual rows, times its loops, of the
// node below it.
func aggregated(t *testing.T, plan string) int {
	t.Helper()
	lines := strings.Split(plan, "\n")
	node := regexp.MustCompile(`->.*actual time=\S+ rows=(\d+) loops=(\d+)\)`)
	for i, l := range lines {
		if !strings.Contains(l, "Group Key: p.id, p._k") {
			continue
		}
		for _, l := range lines[i+1:] {
			if m := node.FindStringSubmatch(l); m != nil {
				rows, _ := strconv.Atoi(m[1])
				loops, _ := strconv.Atoi(m[2])
				return rows * loops
			}
		}
	}
	t.Fatalf("no aggregate of the targets in the plan:\n%s", plan)
	return 0
}

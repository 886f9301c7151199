package graph_test

import (
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/graph"
)

// TestLiveRefScanIsLinearInDepth: preparing a live query scans its
// selection for the classes it reads through references in a few steps
// per level, not one per path through the interface and each of its
// implementations (found by review: 4^depth calls here, a stream's
// first frame took 577 ms at depth 10, about 10 hours of a core at depth
// 18). Without the fix it fails at depth 2 (21 steps, 15 allowed).
func TestLiveRefScanIsLinearInDepth(t *testing.T) {
	t.Parallel()
	for depth := 1; depth <= 18; depth++ {
		refs, steps, err := graph.LiveRefScan(nodesSDL, `query @live { Node { `+nested(depth)+` } }`)
		if err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		if want := []string{"A", "B", "C"}; !slices.Equal(refs, want) {
			t.Fatalf("depth %d: refs %v, want %v", depth, refs, want)
		}
		// The root selection, then each level's once per class having
		// the field (the interface and its three implementations: 4
		// each), with room to spare.
		if max := 5 * (depth + 1); steps > max {
			t.Fatalf("depth %d: %d steps, more than %d", depth, steps, max)
		}
	}
}

// TestLiveRefScanFindsTheClasses: scanning each field once per class
// still finds every class a live query reads through references: a
// subclass's field in an inline fragment, a subdocument's reference, a
// fragment spread on several classes, a backlink and its filter.
func TestLiveRefScanFindsTheClasses(t *testing.T) {
	t.Parallel()
	const sdl = `
interface Node { next: Node }
type A implements Node { x: Int tag: Tag }
type B implements Node { y: Int home: Home }
type C implements Node { z: Int }
type Home @subdocument { owner: Owner }
type Tag { label: String owner: Owner }
type Owner { name: String }
type Note { about: Node title: String }
`
	for _, c := range []struct {
		query string
		refs  []string
	}{
		{`query @live { C { z } }`, []string{}},
		{`query @live { Node { ` + nested(5) + ` } }`, []string{"A", "B", "C"}},
		{`query @live { Node { next { ... on A { tag { label } } } } }`, []string{"A", "B", "C", "Tag"}},
		{`query @live { Node { ... on B { home { owner { name } } } } }`, []string{"Owner"}},
		{`query @live { B { home { owner { name } } } }`, []string{"Owner"}},
		{`query @live { Note { about { next { ...F } } } } fragment F on Node { next { ... on A { tag { label } } ... on B { home { owner { name } } } } }`, []string{"A", "B", "C", "Owner", "Tag"}},
		{`query @live { Tag { _tag_of_A { _id } } }`, []string{"A"}},
		{`query @live { Tag { _tag_of_A(filter: {tag: {owner: {name: {eq: "x"}}}}) { _id } } }`, []string{"A", "Owner", "Tag"}},
		{`query @live { Tag { _tag_of_A { next { ...F } } } } fragment F on Node { ... on B { home { owner { name } } } }`, []string{"A", "B", "C", "Owner"}},
	} {
		refs, _, err := graph.LiveRefScan(sdl, c.query)
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		if !slices.Equal(refs, c.refs) {
			t.Errorf("%s: refs %v, want %v", c.query, refs, c.refs)
		}
	}
}

package graph

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/schema"
)

// liveQueryOf prepares live query text (a subscription) on schema sdl.
func liveQueryOf(t *testing.T, sdl, text string) (*LiveQuery, *sluice.Schema) {
	t.Helper()
	s, err := schema.Parse(sdl)
	if err != nil {
		t.Fatal(err)
	}
	es, err := NewExecutableSchema(nil, s, sluice.RoleAdmin, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: text})
	if err != nil {
		t.Fatal(err)
	}
	if errs := validator.ValidateWithRules(es.gql, doc, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	op := &graphql.OperationContext{Doc: doc, Operation: doc.Operations[0], Variables: map[string]any{}}
	q, err := es.NewLiveQuery(op, &Request{DB: &sluice.Database{ID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return q, s
}

// TestAffectsResultJudgesTheBoundary: of a full ordered and limited
// result, a change whose document sorts after the last row before and
// after it cannot change the result; one that sorts at or before it, in
// either image, can; with no boundary (a result that is not full) every
// matching change can.
func TestAffectsResultJudgesTheBoundary(t *testing.T) {
	t.Parallel()
	const sdl = `type Item { n: Int label: String at: DateTime w: Float ok: Boolean tag: String }`
	item := func(id string, fields string) []byte {
		return []byte(`{"@type":"Item","@id":"Item/` + id + `"` + fields + `}`)
	}
	doc := func(id string, f map[string]any) engine.QueryDoc {
		return engine.QueryDoc{Doc: &sluice.Document{ID: "Item/" + id, Type: "Item", Fields: f}}
	}
	for _, c := range []struct {
		name  string
		query string
		// result is the result's rows (its last row is the boundary).
		result []engine.QueryDoc
		// before and after are the change's images (nil: none).
		before, after []byte
		want          bool
	}{
		{"inserted past the last row", `subscription { Item(orderBy: {n: ASC}, limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(1)}), doc("b", map[string]any{"n": int64(5)})},
			nil, item("c", `,"n":9`), false},
		{"inserted before the last row", `subscription { Item(orderBy: {n: ASC}, limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(1)}), doc("b", map[string]any{"n": int64(5)})},
			nil, item("c", `,"n":4`), true},
		{"equal key, id after the last row's", `subscription { Item(orderBy: {n: ASC}, limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(1)}), doc("b", map[string]any{"n": int64(5)})},
			nil, item("c", `,"n":5`), false},
		{"equal key, id before the last row's", `subscription { Item(orderBy: {n: ASC}, limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(1)}), doc("c", map[string]any{"n": int64(5)})},
			nil, item("b", `,"n":5`), true},
		{"the last row itself", `subscription { Item(orderBy: {n: ASC}, limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(1)}), doc("b", map[string]any{"n": int64(5)})},
			item("b", `,"n":5`), item("b", `,"n":50`), true},
		{"moved from past the last row to before it", `subscription { Item(orderBy: {n: ASC}, limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(1)}), doc("b", map[string]any{"n": int64(5)})},
			item("c", `,"n":9`), item("c", `,"n":2`), true},
		{"deleted past the last row", `subscription { Item(orderBy: {n: ASC}, limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(1)}), doc("b", map[string]any{"n": int64(5)})},
			item("c", `,"n":9`), nil, false},
		{"null sorts last ascending", `subscription { Item(orderBy: {n: ASC}, limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(1)}), doc("b", map[string]any{"n": int64(5)})},
			nil, item("c", ``), false},
		{"null sorts first descending", `subscription { Item(orderBy: {n: DESC}, limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(9)}), doc("b", map[string]any{"n": int64(5)})},
			nil, item("c", ``), true},
		{"descending, smaller past the last row", `subscription { Item(orderBy: {n: DESC}, limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(9)}), doc("b", map[string]any{"n": int64(5)})},
			nil, item("c", `,"n":4`), false},
		{"default order: ids after the last row's", `subscription { Item(limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", nil), doc("b", nil)},
			nil, item("c", `,"n":1`), false},
		{"default order: ids in byte order", `subscription { Item(limit: 2) { _id } }`,
			[]engine.QueryDoc{doc("a", nil), doc("b", nil)},
			nil, item("B", `,"n":1`), true},
		{"strings in byte order", `subscription { Item(orderBy: {label: ASC}, limit: 1) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"label": "b"})},
			nil, item("c", `,"label":"B"`), true},
		{"instants, not their text", `subscription { Item(orderBy: {at: ASC}, limit: 1) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"at": "2026-01-01T10:00:00Z"})},
			nil, item("c", `,"at":"2026-01-01T09:30:00-01:00"`), false},
		{"floats", `subscription { Item(orderBy: {w: ASC}, limit: 1) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"w": 2.5})},
			nil, item("c", `,"w":2.25`), true},
		{"booleans: false first", `subscription { Item(orderBy: {ok: ASC}, limit: 1) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"ok": false})},
			nil, item("c", `,"ok":true`), false},
		{"two keys", `subscription { Item(orderBy: {n: ASC, label: DESC}, limit: 1) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(3), "label": "m"})},
			nil, item("c", `,"n":3,"label":"z"`), true},
		{"outside the filter", `subscription { Item(filter: {tag: {eq: "x"}}, orderBy: {n: ASC}, limit: 1) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(3), "tag": "x"})},
			nil, item("c", `,"n":1,"tag":"y"`), false},
		// A last row whose order field holds a value Sluice cannot read (a
		// NaN written in SQL) lacks it, but it is not null: descending,
		// Postgres sorts a document without the field (null) before NaN,
		// so it enters the result.
		{"a last row with an unreadable order value", `subscription { Item(orderBy: {w: DESC}, limit: 1) { _id } }`,
			[]engine.QueryDoc{{Doc: &sluice.Document{ID: "Item/a", Type: "Item", Fields: map[string]any{}}, Unreadable: []string{"w"}}},
			nil, item("c", ``), true},
		{"a last row with an unreadable value of another field", `subscription { Item(orderBy: {w: DESC}, limit: 1) { _id } }`,
			[]engine.QueryDoc{{Doc: &sluice.Document{ID: "Item/a", Type: "Item", Fields: map[string]any{"w": 1.5}}, Unreadable: []string{"at"}}},
			nil, item("c", `,"w":1.0`), false},
		{"a result that is not full", `subscription { Item(orderBy: {n: ASC}, limit: 3) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(1)}), doc("b", map[string]any{"n": int64(5)})},
			nil, item("c", `,"n":9`), true},
		{"no limit", `subscription { Item(orderBy: {n: ASC}) { _id } }`,
			[]engine.QueryDoc{doc("a", map[string]any{"n": int64(1)}), doc("b", map[string]any{"n": int64(5)})},
			nil, item("c", `,"n":9`), true},
	} {
		q, s := liveQueryOf(t, sdl, c.query)
		x := q.execution(t.Context(), Bounds{})
		cf, ok := x.readingRoot(q.root)
		if !ok {
			t.Fatalf("%s: no root field", c.name)
		}
		dq, err := x.classDocQuery(cf)
		if err != nil {
			t.Fatal(err)
		}
		b := boundaryOf(s, dq, c.result)
		ch := NewChange(&sluice.Change{Class: "Item", Before: c.before, After: c.after})
		if got := q.AffectsResult(&ch, b); got != c.want {
			t.Errorf("%s: affects %v, want %v", c.name, got, c.want)
		}
	}
}

// TestBoundaryKeepsOnlyShortSortKeys: a result's boundary, which its
// live query keeps for as long as the result stands, is a copy of its
// last row's sort keys, not the row (changing the row read changes
// nothing of how it judges); a last row whose sort keys are longer than
// maxBoundaryBytes gives no boundary, so that a change past that row is
// taken to affect the result, as for a result that is not full.
func TestBoundaryKeepsOnlyShortSortKeys(t *testing.T) {
	t.Parallel()
	const sdl = `type Item { label: String tag: String }`
	q, s := liveQueryOf(t, sdl, `subscription { Item(orderBy: {label: ASC}, limit: 1) { _id } }`)
	x := q.execution(t.Context(), Bounds{})
	cf, ok := x.readingRoot(q.root)
	if !ok {
		t.Fatal("no root field")
	}
	dq, err := x.classDocQuery(cf)
	if err != nil {
		t.Fatal(err)
	}
	affects := func(b *Boundary, label string) bool {
		ch := NewChange(&sluice.Change{Class: "Item", After: []byte(`{"@type":"Item","@id":"Item/z","label":"` + label + `"}`)})
		return q.AffectsResult(&ch, b)
	}

	row := &sluice.Document{ID: "Item/a", Type: "Item", Fields: map[string]any{"label": "m", "tag": strings.Repeat("t", 1<<20)}}
	b := boundaryOf(s, dq, []engine.QueryDoc{{Doc: row}})
	if b == nil {
		t.Fatal("a full result ordered by a short key has no boundary")
	}
	row.Fields["label"], row.ID = "a", "Item/0" // the row read is not what b judges by
	if affects(b, "n") || !affects(b, "k") {
		t.Errorf("the boundary judges by the row it was made of as it is now, not by its keys when it was made: past %v, before %v", affects(b, "n"), affects(b, "k"))
	}

	long := strings.Repeat("m", 4<<10) // maxBoundaryBytes
	row = &sluice.Document{ID: "Item/a", Type: "Item", Fields: map[string]any{"label": long}}
	if b := boundaryOf(s, dq, []engine.QueryDoc{{Doc: row}}); b != nil || !affects(b, long+"n") {
		t.Errorf("a last row of %d bytes of sort keys: boundary %v, a change past it affects %v; want none, and true", len(long), b != nil, affects(b, long+"n"))
	}
}

// TestLiveQueryKey: a live query whose filter requires a String field to
// equal a value, as the filter parses it (each field's operators in an
// And of their own, _and in another), is keyed by that field and value;
// one that does not require it (an OR, a NOT, an Int) is not (found by
// review: only a Compare right inside the top-level And was looked at,
// which the parser never makes, so no live query was ever keyed).
func TestLiveQueryKey(t *testing.T) {
	t.Parallel()
	const sdl = `type Item { n: Int tag: String }`
	for _, c := range []struct {
		filter string
		ok     bool
	}{
		{`{tag: {eq: "x"}}`, true},
		{`{tag: {eq: "x"}, n: {gt: 1}}`, true},
		{`{n: {gt: 1}, tag: {eq: "x"}}`, true},
		{`{_and: [{tag: {eq: "x"}}]}`, true},
		{`{_and: [{n: {gt: 1}}, {_and: [{tag: {eq: "x"}}]}]}`, true},
		{`{tag: {eq: "x", ne: "y"}}`, true},
		{`{_or: [{tag: {eq: "x"}}, {tag: {eq: "y"}}]}`, false},
		{`{_not: {tag: {eq: "x"}}}`, false},
		{`{n: {eq: 1}}`, false},
		{`{tag: {ne: "x"}}`, false},
	} {
		q, _ := liveQueryOf(t, sdl, `subscription { Item(filter: `+c.filter+`) { n } }`)
		field, value, ok := q.Key()
		if ok != c.ok || ok && (field != "tag" || value != "x") {
			t.Errorf("Key() of %s: %q, %q, %v; want tag, x: %v", c.filter, field, value, ok, c.ok)
		}
	}
}

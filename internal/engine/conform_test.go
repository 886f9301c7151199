package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestConformer: what a schema change does to the values of one stored
// document it keeps (the columns its scan reads), and what it finds
// there, at any depth; and that it reads no table it cannot affect.
func TestConformer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, prev, next, class, row string
		// set are the columns written, as JSON; hits what was found.
		set  string
		hits []string
	}{
		{name: "a required field lacking in subdocuments that nest each other",
			prev:  "type D { a: A }\ntype B @subdocument { a: A }\ntype A @subdocument { b: B x: Int }",
			next:  "type D { a: A }\ntype B @subdocument { a: A }\ntype A @subdocument { b: B x: Int! }",
			class: "D", row: `{"a":{"@type":"A","b":{"a":{}},"x":2}}`,
			set: `{}`, hits: []string{"lacks A.x"}},
		{name: "a field dropped from subdocuments that nest each other",
			prev:  "type D { a: A }\ntype B @subdocument { a: A }\ntype A @subdocument { b: B x: Int }",
			next:  "type D { a: A }\ntype B @subdocument { a: A }\ntype A @subdocument { b: B }",
			class: "D", row: `{"a":{"@type":"A","b":{"a":{"x":1}},"x":2}}`,
			set: `{"a":{"@type":"A","b":{"a":{}}}}`, hits: []string{"DropField A.x at D.a.b.a.x"}},
		{name: "references that no longer fit, single, in a list and in a subdocument",
			prev:  "interface R { n: Int }\ntype X implements R { m: Int }\ntype Y implements R { m: Int }\ntype D { r: R rs: [R!] s: S x: X }\ntype S @subdocument { r: R }",
			next:  "interface R { n: Int }\ntype X { n: Int m: Int }\ntype Y implements R { m: Int }\ntype D { r: R rs: [R!] s: S x: X }\ntype S @subdocument { r: R }",
			class: "D", row: `{"r":"X/1","rs":["X/1","Y/2","Q/3"],"s":{"r":"X/1"}}`,
			set: `{"r":null,"rs":["Y/2","Q/3"],"s":{}}`, hits: []string{"ChangeParents X at D.r"}},
		{name: "a required field lacking in a list's subdocument, an enum value held in another",
			prev:  "enum E { P Q }\ntype D { ss: [S!] }\ntype S @subdocument { e: E z: Int }",
			next:  "enum E { P }\ntype D { ss: [S!] }\ntype S @subdocument { e: E z: Int! }",
			class: "D", row: `{"ss":[{"e":"P","z":1},{"e":"Q"}]}`,
			set: `{}`, hits: []string{"DropEnumValue E.Q at D.ss.e", "lacks S.z"}},
		{name: "a field retyped to a required type: dropped, then lacking",
			prev:  "type D { s: S n: Int }\ntype S @subdocument { v: Int }",
			next:  "type D { s: S n: String! }\ntype S @subdocument { v: String! }",
			class: "D", row: `{"s":{"v":1}}`,
			set: `{"s":{}}`, hits: []string{"AlterField S.v at D.s.v", "lacks D.n", "lacks S.v"}},
		{name: "a required reference that no longer fits: dropped, then lacking",
			prev:  "interface R { n: Int }\ntype X implements R { m: Int }\ntype D { r: R! }",
			next:  "interface R { n: Int }\ntype D { r: R! }",
			class: "D", row: `{"r":"X/1"}`,
			set: `{"r":null}`, hits: []string{"DropClass X at D.r", "lacks D.r"}},
	} {
		prev, next := parseSDL(t, c.prev), parseSDL(t, c.next)
		cf := newConformer(prev, next, schema.Diff(prev, next))
		row, err := decodeNumbers(c.row)
		if err != nil {
			t.Fatal(err)
		}
		h := hits{}
		set, _ := json.Marshal(cf.document(c.class, row.(map[string]any), h))
		if got := describeHits(cf, h); string(set) != c.set || !reflect.DeepEqual(got, c.hits) {
			t.Errorf("%s:\n got %s %q\nwant %s %q", c.name, set, got, c.set, c.hits)
		}
	}

	// A change that touches no stored value reads no table.
	prev, next := parseSDL(t, "type D { s: S e: E }\ntype S @subdocument { a: Int }\ntype E { b: Int }"), parseSDL(t, "type D { s: S e: E }\ntype S @subdocument { a: Int }\ntype E { c: Int }")
	if scans := newConformer(prev, next, schema.Diff(prev, next)).scans(); len(scans) != 0 {
		t.Errorf("scans of an unrelated change: %+v", scans)
	}
}

// describeHits returns h for a test, sorted: "lacks Class.field", or the
// kind and subject of the change and the path of the first value found.
func describeHits(cf *conformer, h hits) []string {
	var out []string
	for x, path := range h {
		if x.lacks.class != "" {
			out = append(out, "lacks "+x.lacks.class+"."+x.lacks.field)
			continue
		}
		ch := cf.changes[x.change]
		what := ch.Class
		if ch.Field != "" {
			what += "." + ch.Field
		}
		out = append(out, fmt.Sprintf("%s %s at %s", ch.Kind, what, path))
	}
	slices.Sort(out)
	return out
}

// parseSDL returns sdl parsed, or fails t.
func parseSDL(t *testing.T, sdl string) *sluice.Schema {
	t.Helper()
	s, err := schema.Parse(sdl)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// decodeNumbers decodes s as a stored value is read, numbers as
// json.Number.
func decodeNumbers(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	return v, dec.Decode(&v)
}

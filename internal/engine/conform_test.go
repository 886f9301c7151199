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

// TestConformer: what a schema change finds in the values of one stored
// document it keeps (the columns its scan reads), at any depth; and that
// it reads no table it cannot affect.
func TestConformer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, prev, next, class, row string
		hits                         []string
	}{
		{name: "a required field lacking in subdocuments that nest each other",
			prev:  "type D { a: A }\ntype B @subdocument { a: A }\ntype A @subdocument { b: B x: Int }",
			next:  "type D { a: A }\ntype B @subdocument { a: A }\ntype A @subdocument { b: B x: Int! }",
			class: "D", row: `{"a":{"@type":"A","b":{"a":{}},"x":2}}`,
			hits: []string{"lacks A.x"}},
		{name: "a required field lacking in a list's subdocument, an enum value held in another",
			prev:  "enum E { P Q }\ntype D { ss: [S!] }\ntype S @subdocument { e: E z: Int }",
			next:  "enum E { P }\ntype D { ss: [S!] }\ntype S @subdocument { e: E z: Int! }",
			class: "D", row: `{"ss":[{"e":"P","z":1},{"e":"Q"}]}`,
			hits: []string{"DropEnumValue E.Q at D.ss.e", "lacks S.z"}},
		{name: "a field retyped to a required type lacks it",
			prev:  "type D { s: S n: Int }\ntype S @subdocument { v: Int }",
			next:  "type D { s: S n: String! }\ntype S @subdocument { v: String! }",
			class: "D", row: `{"s":{"v":1}}`,
			hits: []string{"lacks D.n", "lacks S.v"}},
	} {
		prev, next := parseSDL(t, c.prev), parseSDL(t, c.next)
		cf := newConformer(prev, next, schema.Diff(prev, next))
		row, err := decodeNumbers(c.row)
		if err != nil {
			t.Fatal(err)
		}
		h := hits{}
		cf.document(c.class, row.(map[string]any), h)
		if got := describeHits(cf, h); !reflect.DeepEqual(got, c.hits) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.hits)
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

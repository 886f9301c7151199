package filter_test

import (
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestParseSingleValueIsAListOfOne: the list entries of a filter (_ids,
// _and, _or) given a single value parse as that list of one, whether the
// value is written literally (the value itself) or given as a variable
// (gqlgen's coercion makes it a typed slice, []string or
// []map[string]any): GraphQL's input coercion lets a single value stand
// for a list of one, and gqlgen validates it so. Each was refused as
// "expected a list".
func TestParseSingleValueIsAListOfOne(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(fuzzSDL)
	if err != nil {
		t.Fatal(err)
	}
	name := map[string]any{"name": map[string]any{"eq": "a"}}
	for _, c := range []struct {
		key  string
		list []any
		one  []any // the forms of the single value
	}{
		{"_ids", []any{"Person/a"}, []any{"Person/a", []string{"Person/a"}}},
		{"_and", []any{name}, []any{name, []map[string]any{name}}},
		{"_or", []any{name}, []any{name, []map[string]any{name}}},
	} {
		want, err := filter.Parse(s, "Person", map[string]any{c.key: c.list})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range c.one {
			got, err := filter.Parse(s, "Person", map[string]any{c.key: v})
			if err != nil {
				t.Errorf("%s: %#v: %v", c.key, v, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %#v parses as %#v, want %#v", c.key, v, got, want)
			}
		}
	}
}

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
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestRetypedSeesASingleValueList: a live query revised after a schema
// change is checked for the input types it passes values to (retyped);
// a single object given for a filter's _and list, literally or as a
// variable, is walked as the list of one it is, so an input field under
// it that changed type is found (and ends the stream). It was skipped
// (not a []any), and the stream went on as if its filter meant what it
// did.
func TestRetypedSeesASingleValueList(t *testing.T) {
	t.Parallel()
	gqlOf := func(sdl string) *ExecutableSchema {
		s, err := schema.Parse(sdl)
		if err != nil {
			t.Fatal(err)
		}
		es, err := NewExecutableSchema(nil, s, sluice.RoleAdmin, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	prev := gqlOf(`type Item { n: String }`)
	next := gqlOf(`type Item { n: Int }`)
	for _, c := range []struct {
		name, query string
		vars        map[string]any
	}{
		{"literal", `subscription { Item(filter: {_and: {n: {eq: 1}}}) { _id } }`, nil},
		{"variable", `subscription($f: Item_Filter) { Item(filter: $f) { _id } }`, map[string]any{"f": map[string]any{"_and": map[string]any{"n": map[string]any{"eq": 1}}}}},
	} {
		doc, err := parser.ParseQuery(&ast.Source{Input: c.query})
		if err != nil {
			t.Fatal(err)
		}
		if errs := validator.ValidateWithRules(next.gql, doc, nil); len(errs) > 0 {
			t.Fatal(errs)
		}
		// As gqlgen coerces them: the single object becomes a
		// []map[string]any.
		vars, err := validator.VariableValues(next.gql, doc.Operations[0], c.vars)
		if err != nil {
			t.Fatal(err)
		}
		op := &graphql.OperationContext{Doc: doc, Operation: doc.Operations[0], Variables: vars}
		if got := retyped(prev, next, op); !strings.Contains(got, "Item_Filter.n, now of type Int_Filter (was String_Filter)") {
			t.Errorf("%s: got %q, want the retyped Item_Filter.n", c.name, got)
		}
	}
}

package graph

import (
	"io"
	"log/slog"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestRetypedKeepsAWidenedReference: a reference widened (Note.owner
// from Person to Named, every class it may point to a Named, Named new
// or not) keeps its type for retyped, and so does its filter, whatever
// the operation selects of it that still validates; one changed
// otherwise (narrowed while a Pet may be an owner) is retyped. Before,
// every widening was a change of type that ended the stream.
func TestRetypedKeepsAWidenedReference(t *testing.T) {
	t.Parallel()
	esOf := func(sdl string) *ExecutableSchema {
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
	const (
		named  = "interface Named { name: String }\ntype Person implements Named { name: String age: Int }\ntype Pet implements Named { name: String }\n"
		person = "type Person { name: String age: Int }\n"
	)
	for _, c := range []struct {
		name, prev, next, query, want string
	}{
		{"a field of the interface", named + "type Note { owner: Person }", named + "type Note { owner: Named }",
			`subscription { Note_added { owner { name } } }`, ""},
		{"a fragment on the old class", named + "type Note { owner: Person }", named + "type Note { owner: Named }",
			`subscription { Note_added { owner { _id ... on Person { age } } } }`, ""},
		{"a list, filtered", named + "type Note { owners: [Person!]! }", named + "type Note { owners: [Named!]! }",
			`subscription { Note_added(filter: {owners: {someHave: {name: {eq: "A"}, _or: [{_id: "Person/a"}]}}}) { owners { name } } }`, ""},
		{"an interface new with the change", person + "type Note { owner: Person }", named + "type Note { owner: Named }",
			`subscription { Note_added(filter: {owner: {name: {eq: "A"}}}) { owner { name } } }`, ""},
		{"a list made required", named + "type Note { owners: [Person!] }", named + "type Note { owners: [Named!]! }",
			`subscription { Note_added { owners { name } } }`, "selects Note.owners, now of type [Named!]! (was [Person!])"},
		{"narrowed", named + "type Note { owner: Named }", named + "type Note { owner: Person }",
			`subscription { Note_added { owner { name } } }`, "selects Note.owner, now of type Person (was Named)"},
		{"a filter narrowed", named + "type Note { owner: Named }", named + "type Note { owner: Person }",
			`subscription { Note_added(filter: {owner: {name: {eq: "A"}}}) { _id } }`, "passes argument filter of Subscription.Note_added with Note_Filter.owner, now of type Person_Filter (was Named_Filter)"},
	} {
		prev, next := esOf(c.prev), esOf(c.next)
		doc, err := parser.ParseQuery(&ast.Source{Input: c.query})
		if err != nil {
			t.Fatal(err)
		}
		if errs := validator.ValidateWithRules(next.gql, doc, nil); len(errs) > 0 {
			t.Fatalf("%s: %v", c.name, errs)
		}
		op := &graphql.OperationContext{Doc: doc, Operation: doc.Operations[0], Variables: map[string]any{}}
		if got := retyped(prev, next, op); got != c.want {
			t.Errorf("%s: retyped %q, want %q", c.name, got, c.want)
		}
	}
}

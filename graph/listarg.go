package graph

import "github.com/sluice-dev/sluice/internal/filter"

// listArg returns the elements of v, the value of a list-typed argument or
// input field, as the package reads it from field arguments. GraphQL's
// input coercion lets a single value stand for a list of one (the spec's
// "Input Coercion" of list types), and gqlgen validates it so: a literal
// `ids: "Person/bob"` arrives as the string itself, and a variable given
// "Person/bob" as a typed slice of its own ([]string{"Person/bob"}, or
// []map[string]any for objects), neither of them a []any. Asserting []any
// read both as no list at all, which dropped an ids restriction (every
// document answered) and refused mutations as empty.
//
// nil (the argument absent or null) gives nil, and so does an empty
// literal list (gqlparser makes it a nil []any): a site that must tell an
// absent argument from an empty list tests the argument against nil, not
// the list listArg returns.
func listArg(v any) []any {
	if v == nil {
		return nil
	}
	return filter.List(v)
}

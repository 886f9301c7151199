package graph

import (
	"context"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestValidatingCacheAgreesWithGqlgen checks that the query cache accepts
// exactly the queries gqlgen's own validation accepts (the default rules,
// as validator.ValidateWithRules runs them), so that every other query
// still gets gqlgen's errors.
func TestValidatingCacheAgreesWithGqlgen(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(`type Person { name: String! age: Int friend: Person } enum Color { RED }`)
	if err != nil {
		t.Fatal(err)
	}
	gql, err := BuildSchema(s, sluice.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`{ Person(id: "Person/a") { _id name age } }`,
		`query($n: Int) { Person(filter: {age: {eq: $n}}) { name friend { name } } }`,
		`{ Person { nope } }`,                    // unknown field
		`{ Person { friend } }`,                  // leaf selection missing
		`query($n: Int) { Person { name } }`,     // unused variable
		`{ Person(limit: "x") { name } }`,        // wrong argument type
		`{ Person { name } } { Person { age } }`, // two anonymous operations
		`{ Person { ...F } } fragment F on Nope { name }`,
		`{ Person { name `,                         // does not parse
		``,                                         // no operation
		`{ a: Person { name } a: Person { age } }`, // fields that cannot merge
	} {
		c := newValidatingCache(lru.New[*ast.QueryDocument](10), gql)
		_, got := c.Get(context.Background(), q)
		want := false
		if doc, err := parser.ParseQuery(&ast.Source{Input: q}); err == nil && len(doc.Operations) > 0 {
			want = len(validator.ValidateWithRules(gql, doc, nil)) == 0
		}
		if got != want {
			t.Errorf("%q: the cache accepts it: %v; gqlgen's validation: %v", q, got, want)
		}
		if _, cached := c.cache.Get(context.Background(), q); cached != want {
			t.Errorf("%q: cached %v, want %v", q, cached, want)
		}
	}
}

package graph

import (
	"context"
	"testing"

	"github.com/99designs/gqlgen/graphql"
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

// TestQueryParsedOnce: a query not in the cache is parsed once in an
// operation: the validating cache takes the document the document bounds
// parsed (that very document), once, and for that query text only.
func TestQueryParsedOnce(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(`type Person { name: String! age: Int }`)
	if err != nil {
		t.Fatal(err)
	}
	gql, err := BuildSchema(s, sluice.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	plain := lru.New[*ast.QueryDocument](10)
	c := newValidatingCache(plain, gql)
	bounds := documentBounds{limits: DefaultLimits(), cache: plain}
	q := `{ Person(id: "Person/a") { _id name } }`

	ctx := withParsedQuery(context.Background())
	if err := bounds.MutateOperationParameters(ctx, &graphql.RawParams{Query: q}); err != nil {
		t.Fatal(err)
	}
	kept := ctx.Value(parsedQueryKey{}).(*parsedQuery).doc
	if kept == nil {
		t.Fatal("the bounds kept no parsed document")
	}
	if doc, ok := c.Get(ctx, q); !ok || doc != kept {
		t.Errorf("the cache parsed the query again (or refused it: %v)", ok)
	}
	if takeParsed(ctx, q) != nil {
		t.Errorf("the parsed document was handed over twice")
	}

	// Another query text in the operation's context is parsed as usual.
	ctx = withParsedQuery(context.Background())
	if err := bounds.MutateOperationParameters(ctx, &graphql.RawParams{Query: q}); err != nil {
		t.Fatal(err)
	}
	other := `{ Person(id: "Person/b") { _id age } }`
	doc, ok := c.Get(ctx, other)
	if !ok || doc == kept || doc.Operations[0].SelectionSet[0].(*ast.Field).Arguments[0].Value.Raw != "Person/b" {
		t.Errorf("another query got the kept document (or was refused: %v)", ok)
	}

	// A query over the bounds keeps nothing.
	ctx = withParsedQuery(context.Background())
	tiny := documentBounds{limits: Limits{MaxQueryBytes: 10}, cache: plain}
	if err := tiny.MutateOperationParameters(ctx, &graphql.RawParams{Query: `{ Person { name age } }`}); err == nil {
		t.Fatal("a query over the bounds passed them")
	}
	if ctx.Value(parsedQueryKey{}).(*parsedQuery).doc != nil {
		t.Errorf("a query over the bounds was kept")
	}
}

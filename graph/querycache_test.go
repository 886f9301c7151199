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
// exactly the queries gqlgen's own validation accepts (the rules it is
// given, validationRules, as validator.ValidateWithRules runs them), so
// that every other query still gets gqlgen's errors.
func TestValidatingCacheAgreesWithGqlgen(t *testing.T) {
	t.Parallel()
	gql := adminSchema(t, `type Person { name: String! age: Int wealth: BigInt friend: Person } enum Color { RED }`)
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
		c := newValidatingCache(lru.New[*ast.QueryDocument](10), lru.New[struct{}](10), gql)
		_, got := c.Get(context.Background(), q)
		want := false
		if doc, err := parser.ParseQuery(&ast.Source{Input: q}); err == nil && len(doc.Operations) > 0 {
			want = len(validator.ValidateWithRules(gql, doc, validationRules())) == 0
		}
		if got != want {
			t.Errorf("%q: the cache accepts it: %v; gqlgen's validation: %v", q, got, want)
		}
		if _, cached := c.cache.Get(context.Background(), q); cached != want {
			t.Errorf("%q: cached %v, want %v", q, cached, want)
		}
	}
}

// TestValidatingCacheKnowsShapes: queries that differ from one that
// validated only in their strings are not checked by the rules again, but
// annotated with the schema for the executor (and their BigInt literals
// read: bigIntLiterals); what validation reads of a query (which strings
// are equal, numbers, names) still decides. Each query runs through one
// cache, and must be accepted exactly when gqlgen's validation accepts
// it; the arguments of one it accepts can be read.
func TestValidatingCacheKnowsShapes(t *testing.T) {
	t.Parallel()
	gql := adminSchema(t, `type Person { name: String! age: Int wealth: BigInt color: Color } enum Color { RED }`)
	c := newValidatingCache(lru.New[*ast.QueryDocument](100), lru.New[struct{}](100), gql)
	ctx := context.Background()
	for _, tc := range []struct {
		query string
		known bool // its shape validated before
	}{
		{`{ Person(id: "Person/a") { _id name } }`, false},
		{`{ Person(id: "Person/b") { _id name } } # another id`, true},
		{`{ Person(id: """Person/c""") { _id name } }`, false}, // a block string is another token
		// Fields of one response name merge only with equal arguments.
		{`{ a: Person(id: "x") { name } a: Person(id: "x") { name } }`, false},
		{`{ a: Person(id: "y") { name } a: Person(id: "y") { name } }`, true},
		{`{ a: Person(id: "x") { name } a: Person(id: "y") { name } }`, false},
		{`{ a: Person(id: "y") { name } a: Person(id: "x") { name } }`, false},
		// Numbers and names are the shape's own.
		{`{ Person(limit: 1) { name } }`, false},
		{`{ Person(limit: 99999999999) { name } }`, false},
		{`{ Person(filter: {color: {eq: RED}}) { name } }`, false},
		{`{ Person(filter: {color: {eq: BLUE}}) { name } }`, false},
		// A string where an enum value belongs is refused whatever it says.
		{`{ Person(filter: {color: {eq: "RED"}}) { name } }`, false},
		{`{ Person(filter: {color: {eq: "BLUE"}}) { name } }`, false},
		// A BigInt literal too large for an int64 is read as its digits,
		// in a query of a known shape too.
		{`{ Person(id: "a", filter: {wealth: {gt: 99999999999999999999}}) { name } }`, false},
		{`{ Person(id: "b", filter: {wealth: {gt: 99999999999999999999}}) { name } }`, true},
		// ... and is then equal to the string of its digits: which strings
		// it equals is the shape's own.
		{`{ a: Person(filter: {wealth: {gt: 99999999999999999999}}) { name } a: Person(filter: {wealth: {gt: "99999999999999999999"}}) { name } }`, false},
		{`{ a: Person(filter: {wealth: {gt: 99999999999999999999}}) { name } a: Person(filter: {wealth: {gt: "1"}}) { name } }`, false},
	} {
		shape, ok := queryShape(tc.query)
		if !ok {
			t.Fatalf("%q does not lex", tc.query)
		}
		if _, known := c.shapes.Get(ctx, shape); known != tc.known {
			t.Errorf("%q: its shape known before: %v, want %v", tc.query, known, tc.known)
		}
		want := false
		if doc, err := parser.ParseQuery(&ast.Source{Input: tc.query}); err == nil {
			want = len(validator.ValidateWithRules(gql, doc, validationRules())) == 0
		}
		doc, got := c.Get(ctx, tc.query)
		if got != want {
			t.Errorf("%q: the cache accepts it: %v; gqlgen's validation: %v", tc.query, got, want)
		}
		if !got {
			continue
		}
		f := doc.Operations[0].SelectionSet[0].(*ast.Field)
		if f.Definition == nil {
			t.Errorf("%q: not annotated with the schema's definitions", tc.query)
			continue
		}
		for _, a := range f.Arguments {
			if _, err := a.Value.Value(nil); err != nil {
				t.Errorf("%q: argument %s cannot be read: %v", tc.query, a.Name, err)
			}
		}
	}
}

// TestQueryParsedOnce: a query not in the cache is parsed once in an
// operation: the validating cache takes the document the document bounds
// parsed (that very document), once, and for that query text only.
func TestQueryParsedOnce(t *testing.T) {
	t.Parallel()
	gql := adminSchema(t, `type Person { name: String! age: Int }`)
	plain := lru.New[*ast.QueryDocument](10)
	c := newValidatingCache(plain, lru.New[struct{}](10), gql)
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

// FuzzValidatingCacheShapes: after any query, another is accepted exactly
// when gqlgen's validation accepts it, whether or not the two have one
// shape.
func FuzzValidatingCacheShapes(f *testing.F) {
	gql := adminSchema(f, `type Person { name: String! age: Int wealth: BigInt color: Color friend: Person } enum Color { RED }`)
	f.Add(`{ a: Person(id: "x") { name } a: Person(id: "x") { name } }`, `{ a: Person(id: "x") { name } a: Person(id: "y") { name } }`)
	f.Add(`{ a: Person(filter: {wealth: {eq: 99999999999999999999}}) { name } a: Person(filter: {wealth: {eq: "99999999999999999999"}}) { name } }`,
		`{ a: Person(filter: {wealth: {eq: 99999999999999999999}}) { name } a: Person(filter: {wealth: {eq: "9"}}) { name } }`)
	f.Add(`{ Person(id: "a") { name } }`, `{ Person(id: "b\u0041") { name } }`)
	f.Add(`query($v: ID = "a") { Person(id: $v) { name } }`, `query($v: ID = "b") { Person(id: $v) { friend { name } } }`)
	f.Add(`{ Person(filter: {color: {eq: RED}}) { name } }`, `{ Person(filter: {color: {eq: "RED"}}) { name } }`)
	f.Fuzz(func(t *testing.T, first, second string) {
		c := newValidatingCache(lru.New[*ast.QueryDocument](10), lru.New[struct{}](10), gql)
		for _, q := range []string{first, second} {
			want := false
			if doc, err := parser.ParseQuery(&ast.Source{Input: q}); err == nil && len(doc.Operations) > 0 {
				want = len(validator.ValidateWithRules(gql, doc, validationRules())) == 0
			}
			if _, got := c.Get(context.Background(), q); got != want {
				t.Fatalf("%q (after %q): the cache accepts it: %v; gqlgen's validation: %v", q, first, got, want)
			}
		}
	})
}

// adminSchema returns the GraphQL schema an admin sees of sdl.
func adminSchema(t testing.TB, sdl string) *ast.Schema {
	t.Helper()
	s, err := schema.Parse(sdl)
	if err != nil {
		t.Fatal(err)
	}
	gql, err := BuildSchema(s, sluice.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	return gql
}

package graph

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// fragmentBomb returns the document of nested fragment spreads that took
// gqlgen's complexity walk exponential time: each of levels fragments
// spreads the next one twice, so the operation selects 2^(levels+1)
// fields once fragments are expanded, in about 40 bytes a level.
func fragmentBomb(levels int) string {
	var b strings.Builder
	b.WriteString("{ Person { ...F0 } }\n")
	for i := range levels {
		fmt.Fprintf(&b, "fragment F%d on Person { _id ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Person { _id }\n", levels)
	return b.String()
}

// small are limits tight enough to test each one with short documents.
var small = Limits{MaxQueryBytes: 200, MaxTokens: 40, MaxDepth: 3, MaxAliases: 2, MaxFields: 8, MaxFragments: 3}

func TestCheckDocument(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, query string
		want        string // the error message; "" for none
		limit       string // its extensions.limit
	}{
		{name: "within every limit", query: `{ a: Person { b: _id name } }`},
		{name: "bytes", query: "{ Person { _id } }" + strings.Repeat(" ", 190),
			want: "the query is 208 bytes long, more than 200; pass large values as variables (limit graphql_max_query_bytes)", limit: keyMaxQueryBytes},
		{name: "tokens", query: "{ Person(filter: {" + strings.Repeat("a: 1 ", 10) + "}) { _id } }",
			want: "the query has more than 40 tokens (limit graphql_max_tokens)", limit: keyMaxTokens},
		{name: "comments are not tokens", query: "# " + strings.Repeat("x ", 40) + "\n{ Person { _id } }"},
		{name: "depth at the limit", query: `{ Person { friends { _id } } }`},
		{name: "depth", query: `{ Person { friends { friends { _id } } } }`,
			want: "the query nests selections 4 levels deep, more than 3 (limit graphql_max_depth)", limit: keyMaxDepth},
		{name: "depth through fragments", query: `{ Person { ...A } } fragment A on Person { friends { ... on Person { friends { _id } } } }`,
			want: "the query nests selections 4 levels deep, more than 3 (limit graphql_max_depth)", limit: keyMaxDepth},
		{name: "aliases", query: `{ a: Person { b: _id c: name } }`,
			want: "the query has 3 aliased fields once its fragments are expanded, more than 2 (limit graphql_max_aliases)", limit: keyMaxAliases},
		{name: "aliases through fragments", query: `{ Person { ...A ...A } } fragment A on Person { b: _id }`,
			want: "", limit: ""},
		{name: "aliases counted per spread", query: `{ Person { ...A ...A ...A } } fragment A on Person { b: _id }`,
			want: "the query has 3 aliased fields once its fragments are expanded, more than 2 (limit graphql_max_aliases)", limit: keyMaxAliases},
		{name: "fields", query: `{ Person { _id name age score born wealth active tags } }`,
			want: "the query selects 9 fields once its fragments are expanded, more than 8 (limit graphql_max_fields)", limit: keyMaxFields},
		{name: "fields of every operation", query: `query A { Person { _id name age } } query B { Person { _id name age score } }`,
			want: "the query selects 9 fields once its fragments are expanded, more than 8 (limit graphql_max_fields)", limit: keyMaxFields},
		{name: "fields of an unused fragment", query: `{ Person { _id name age } } fragment U on Person { _id name age score born }`,
			want: "the query selects 9 fields once its fragments are expanded, more than 8 (limit graphql_max_fields)", limit: keyMaxFields},
		{name: "a fragment spread twice counts twice", query: `{ Person { ...A ...A } } fragment A on Person { _id name age score }`,
			want: "the query selects 9 fields once its fragments are expanded, more than 8 (limit graphql_max_fields)", limit: keyMaxFields},
		{name: "fragments", query: `{ Person { ...A } } fragment A on Person { _id } fragment B on Person { _id } fragment C on Person { _id } fragment D on Person { _id }`,
			want: "the query defines 4 fragments, more than 3 (limit graphql_max_fragments)", limit: keyMaxFragments},
		{name: "a duplicate fragment name is measured too", query: `{ Person { ...A } } fragment A on Person { _id } fragment A on Person { _id name age score born wealth active }`,
			want: "the query selects 9 fields once its fragments are expanded, more than 8 (limit graphql_max_fields)", limit: keyMaxFields},
		{name: "cycle", query: `{ Person { ...A } } fragment A on Person { ...B } fragment B on Person { _id ...A }`,
			want: `Cannot spread fragment "A" within itself.`},
		{name: "unknown fragment is left to validation", query: `{ Person { ...Nope } }`},
		{name: "syntax error is left to the parser", query: `{ Person { `},
		{name: "lexical error is left to the parser", query: `{ Person { "unterminated`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := checkDocument(tt.query, small)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.want == "":
				return
			case err == nil:
				t.Fatalf("got no error, want %q", tt.want)
			case err.Message != tt.want:
				t.Fatalf("got  %q\nwant %q", err.Message, tt.want)
			case err.Extensions["code"] != "GRAPHQL_VALIDATION_FAILED":
				t.Fatalf("code %v, want GRAPHQL_VALIDATION_FAILED", err.Extensions["code"])
			}
			if tt.limit != "" && err.Extensions["limit"] != tt.limit {
				t.Fatalf("extensions.limit %v, want %s", err.Extensions["limit"], tt.limit)
			}
		})
	}
}

// TestFragmentBombRefused checks that the 30-level bomb (2^31 fields once
// expanded, 1.3 KB) is refused by the fields limit, measuring each of its
// 31 fragments once. BenchmarkFragmentBomb measures its cost through the
// whole handler.
func TestFragmentBombRefused(t *testing.T) {
	t.Parallel()
	q := fragmentBomb(30)
	_, err := checkDocument(q, DefaultLimits())
	want := "the query selects 2147483648 fields once its fragments are expanded, more than 1000 (limit graphql_max_fields)"
	if err == nil || err.Message != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	doc, perr := parser.ParseQuery(&ast.Source{Input: q})
	if perr != nil {
		t.Fatal(perr)
	}
	if _, steps := measureDocument(doc); steps != selectionCount(doc) {
		t.Fatalf("measuring visited %d selections; the document has %d", steps, selectionCount(doc))
	}
	// Deeper still, the counts saturate instead of overflowing.
	_, err = checkDocument(fragmentBomb(70), Limits{MaxQueryBytes: 1 << 20, MaxTokens: 1 << 20, MaxDepth: 20, MaxAliases: 100, MaxFields: 1000, MaxFragments: 100})
	if err == nil || !strings.Contains(err.Message, "selects more than 2305843009213693951 fields") {
		t.Fatalf("70 levels: got %v", err)
	}
}

// TestIntrospectionWithinDefaults checks that introspection as graphql-js
// and GraphiQL send it fits the default limits (the end-to-end test runs
// them).
func TestIntrospectionWithinDefaults(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/introspection.*.graphql")
	if len(files) == 0 {
		t.Fatal("no introspection queries in testdata")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkDocument(string(b), DefaultLimits()); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// selectionCount returns the selections doc holds, not following spreads.
func selectionCount(doc *ast.QueryDocument) int {
	var count func(ast.SelectionSet) int
	count = func(set ast.SelectionSet) int {
		n := len(set)
		for _, s := range set {
			switch s := s.(type) {
			case *ast.Field:
				n += count(s.SelectionSet)
			case *ast.InlineFragment:
				n += count(s.SelectionSet)
			}
		}
		return n
	}
	n := 0
	for _, op := range doc.Operations {
		n += count(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		n += count(f.SelectionSet)
	}
	return n
}

// FuzzCheckDocument checks that the document bounds never panic and stay
// linear: measuring visits each selection of the document at most once,
// whatever its fragments.
func FuzzCheckDocument(f *testing.F) {
	for _, seed := range []string{
		fragmentBomb(3),
		`{ a: Person { b: _id name friends { ...A } } } fragment A on Person { _id ... on Person { name } }`,
		`query Q($x: Int = 1) @dir { Person(limit: $x) { _id } } subscription { Person_added { _id } }`,
		`{ Person { ...A } } fragment A on Person { ...B } fragment B on Person { ...A }`,
		`{ Person { ...A } } fragment A on Person { _id } fragment A on Person { name }`,
		"# comment\n{ __schema { types { name } } }",
		`{ Person { `,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, query string) {
		lim := Limits{MaxQueryBytes: 1 << 16, MaxTokens: 2000, MaxDepth: 10, MaxAliases: 20, MaxFields: 200, MaxFragments: 20}
		_, _ = checkDocument(query, lim)
		doc, err := parser.ParseQuery(&ast.Source{Input: query})
		if err != nil {
			return
		}
		if _, steps := measureDocument(doc); steps > selectionCount(doc) {
			t.Fatalf("measuring visited %d selections; the document has %d", steps, selectionCount(doc))
		}
	})
}

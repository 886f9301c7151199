package graph

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"
)

// validatingCache is the executor's query cache: on a miss it parses and
// validates the query itself, and hands gqlgen the document when it is
// valid. gqlgen's own validation (validator.ValidateWithRules) sorts its
// rule list once per rule on every query, which took about a tenth of
// the daemon's CPU on lookups whose query text changes with every
// request (a literal id); here the rules are sorted once. A query that
// does not parse or validate is a miss, and gqlgen parses and validates it
// again and reports its errors as it always does.
//
// It is given to the executor only: the document bounds (documentBounds)
// read the plain cache, since they must run before anything validates.
//
// Queries that differ only in the text of their string values (a lookup
// of each id in turn) have one shape, and a shape that validated once
// validates again: a new query of a known shape is only annotated with
// the schema's definitions (validator.Walk, which the executor needs), not
// checked by the rules again. gqlparser's rules read string values only to
// compare them with each other (OverlappingFieldsCanBeMerged: two fields
// of one response name need equal arguments), so the shape keeps which
// strings are equal (see queryShape). Numbers and names are kept: an Int
// too large is an error, an enum value must exist. An Int too large for
// an int64 is also numbered among the strings: of type BigInt it is read
// as the string of its digits (bigIntLiteral), equal to that string when
// OverlappingFieldsCanBeMerged compares them. This holds for the
// rules of the gqlparser in go.mod (v2.5.64, read rule by rule); after an
// upgrade, read them again: FuzzValidatingCacheShapes compares the cache
// with gqlparser's own validation, but only finds what it reaches.
type validatingCache struct {
	cache  graphql.Cache[*ast.QueryDocument]
	schema *ast.Schema
	rules  []core.Rule
	// annotate is what a query of a known shape is walked with: the
	// rules that change the document (bigIntLiterals), none that check it.
	annotate *core.Events
	// shapes holds the digests of the shapes of queries that validated.
	shapes graphql.Cache[struct{}]
}

var _ graphql.Cache[*ast.QueryDocument] = (*validatingCache)(nil)

// newValidatingCache returns the cache of schema's queries over cache,
// validating with the rules gqlgen's executor is given
// (validationRules, field and leaf errors with suggestions); shapes
// keeps the shapes of the queries that validated.
func newValidatingCache(cache graphql.Cache[*ast.QueryDocument], shapes graphql.Cache[struct{}], schema *ast.Schema) *validatingCache {
	r := validationRules()
	// As executor.Executor.parseQuery does with suggestions on.
	r.RemoveRule("FieldsOnCorrectTypeWithoutSuggestions")
	r.AddRule(rules.FieldsOnCorrectTypeRule.Name, rules.FieldsOnCorrectTypeRule.RuleFunc)
	r.RemoveRule("ScalarLeafsWithoutSuggestions")
	r.AddRule(rules.ScalarLeafsRule.Name, rules.ScalarLeafsRule.RuleFunc)
	var list []core.Rule
	for name, f := range r.GetInner() {
		list = append(list, core.Rule{Name: name, RuleFunc: f})
	}
	slices.SortFunc(list, func(a, b core.Rule) int { return strings.Compare(a.Name, b.Name) })
	annotate := &core.Events{}
	bigIntLiterals(annotate, nil)
	return &validatingCache{cache: cache, schema: schema, rules: list, annotate: annotate, shapes: shapes}
}

// Get returns the document of query: the cached one, or query parsed and
// validated, then cached; false when query does not parse or validate.
func (c *validatingCache) Get(ctx context.Context, query string) (*ast.QueryDocument, bool) {
	if doc, ok := c.cache.Get(ctx, query); ok {
		return doc, true
	}
	doc := takeParsed(ctx, query)
	if doc == nil {
		var err error
		if doc, err = parser.ParseQuery(&ast.Source{Input: query}); err != nil {
			return nil, false
		}
	}
	if doc == nil || len(doc.Operations) == 0 {
		return nil, false
	}
	shape, ok := queryShape(query)
	known := false
	if ok {
		_, known = c.shapes.Get(ctx, shape)
	}
	if known {
		validator.Walk(c.schema, doc, c.annotate)
	} else {
		if errs := validator.ValidateWithSources(c.schema, doc, c.rules...); len(errs) > 0 {
			return nil, false
		}
		if ok {
			c.shapes.Add(ctx, shape, struct{}{})
		}
	}
	c.cache.Add(ctx, query, doc)
	return doc, true
}

// queryShape returns the digest of query's shape: its tokens, without
// comments, each string value replaced by the number of its first
// appearance among the query's distinct strings (so "a" "b" "a" is 0 1 0,
// as "x" "y" "x" is). An Int too large for an int64 is kept and numbered
// among the strings too (see validatingCache). False when query does not
// lex.
func queryShape(query string) (string, bool) {
	lx := lexer.New(&ast.Source{Input: query})
	var strs map[string]int
	number := func(s string) uint64 {
		n, seen := strs[s]
		if !seen {
			if strs == nil {
				strs = map[string]int{}
			}
			n = len(strs)
			strs[s] = n
		}
		return uint64(n)
	}
	key := make([]byte, 0, len(query)+16)
	for {
		tok, err := lx.ReadToken()
		if err != nil {
			return "", false
		}
		switch tok.Kind {
		case lexer.EOF:
			sum := sha256.Sum256(key)
			return string(sum[:]), true
		case lexer.Comment:
			continue
		case lexer.String, lexer.BlockString:
			key = binary.AppendUvarint(append(key, byte(tok.Kind)), number(tok.Value))
		default:
			key = binary.AppendUvarint(append(key, byte(tok.Kind)), uint64(len(tok.Value)))
			key = append(key, tok.Value...)
			if tok.Kind == lexer.Int {
				if _, err := strconv.ParseInt(tok.Value, 10, 64); err != nil {
					key = binary.AppendUvarint(key, number(tok.Value))
				}
			}
		}
	}
}

// Add caches doc as the document of query.
func (c *validatingCache) Add(ctx context.Context, query string, doc *ast.QueryDocument) {
	c.cache.Add(ctx, query, doc)
}

// parsedQuery hands the document that documentBounds parsed, to check a
// query's size, to the validatingCache of the same operation, which
// would otherwise parse the text again: a query not in the cache (one
// whose text changes with each request, as a lookup by a literal id
// does) was parsed twice, a twentieth of the daemon's CPU on such
// lookups (docs/benchmarks.md, "Measured choices in the code").
// operations puts an empty one in each operation's context.
type parsedQuery struct {
	query string
	doc   *ast.QueryDocument // parsed, not validated
}

type parsedQueryKey struct{}

// withParsedQuery returns ctx with room for the operation's parsed query.
func withParsedQuery(ctx context.Context) context.Context {
	return context.WithValue(ctx, parsedQueryKey{}, &parsedQuery{})
}

// keepParsed keeps doc, query parsed, for the operation of ctx.
func keepParsed(ctx context.Context, query string, doc *ast.QueryDocument) {
	if p, ok := ctx.Value(parsedQueryKey{}).(*parsedQuery); ok {
		p.query, p.doc = query, doc
	}
}

// takeParsed returns the document kept for query in the operation of
// ctx, once; nil when there is none.
func takeParsed(ctx context.Context, query string) *ast.QueryDocument {
	p, ok := ctx.Value(parsedQueryKey{}).(*parsedQuery)
	if !ok || p.doc == nil || p.query != query {
		return nil
	}
	doc := p.doc
	p.doc = nil
	return doc
}

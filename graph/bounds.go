package graph

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/sluice-dev/sluice/internal/jsonesc"
)

// documentBounds is the gqlgen extension that applies the document limits
// to every operation a server runs, whatever the transport: it runs in
// CreateOperationContext before gqlgen parses and validates the query, as
// the first operation parameter mutator. It must be added before
// extension.AutomaticPersistedQuery, so that a query text is bounded
// before that cache keeps it; a request naming a persisted query by hash
// alone then needs no check.
type documentBounds struct {
	limits Limits
	// cache is the server's query cache: gqlgen adds a document to it
	// only once it is parsed and validated, which on this server means it
	// passed these same bounds, so a cached query needs no check.
	cache graphql.Cache[*ast.QueryDocument]
}

var (
	_ graphql.HandlerExtension          = documentBounds{}
	_ graphql.OperationParameterMutator = documentBounds{}
)

func (documentBounds) ExtensionName() string                   { return "DocumentBounds" }
func (documentBounds) Validate(graphql.ExecutableSchema) error { return nil }

func (b documentBounds) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if p.Query == "" {
		return nil // a persisted query's hash; or gqlgen reports the missing query
	}
	if _, ok := b.cache.Get(ctx, p.Query); ok {
		return nil
	}
	doc, err := checkDocument(p.Query, b.limits)
	if err == nil && doc != nil {
		keepParsed(ctx, p.Query, doc)
	}
	return err
}

// checkDocument returns a request error when query is over one of the
// document limits of l; otherwise the query parsed (not validated), or
// nil when it does not lex or parse: gqlgen parses it again and reports
// the syntax error in its usual form. The cost is linear in the query's
// length: fragments are measured once each, not once per spread.
func checkDocument(query string, l Limits) (*ast.QueryDocument, *gqlerror.Error) {
	if len(query) > l.MaxQueryBytes {
		return nil, documentLimitError(keyMaxQueryBytes,
			"the query is %d bytes long, more than %d; pass large values as variables", len(query), l.MaxQueryBytes)
	}
	src := &ast.Source{Input: query}
	lex := lexer.New(src)
	for n := 0; ; {
		tok, err := lex.ReadToken()
		if err != nil {
			return nil, nil
		}
		if tok.Kind == lexer.EOF {
			break
		}
		if tok.Kind == lexer.Comment {
			continue
		}
		if tok.Kind == lexer.String && strings.ContainsRune(tok.Value, utf8.RuneError) {
			if err := loneSurrogate(query, tok); err != nil {
				return nil, err
			}
		}
		if n++; n > l.MaxTokens {
			return nil, documentLimitError(keyMaxTokens, "the query has more than %d tokens", l.MaxTokens)
		}
	}
	doc, err := parser.ParseQuery(src)
	if err != nil {
		return nil, nil
	}
	if n := len(doc.Fragments); n > l.MaxFragments {
		return nil, documentLimitError(keyMaxFragments, "the query defines %d fragments, more than %d", n, l.MaxFragments)
	}
	m, _ := measureDocument(doc)
	switch {
	case m.cycle != "":
		// Measuring cannot expand a cycle; gqlparser would refuse it too.
		err := gqlerror.Errorf("Cannot spread fragment %q within itself.", m.cycle)
		errcode.Set(err, errcode.ValidationFailed)
		return nil, err
	case m.depth > l.MaxDepth:
		return nil, documentLimitError(keyMaxDepth, "the query nests selections %d levels deep, more than %d", m.depth, l.MaxDepth)
	case m.fields > int64(l.MaxFields):
		return nil, documentLimitError(keyMaxFields, "the query selects %s fields once its fragments are expanded, more than %d", countText(m.fields), l.MaxFields)
	case m.aliases > int64(l.MaxAliases):
		return nil, documentLimitError(keyMaxAliases, "the query has %s aliased fields once its fragments are expanded, more than %d", countText(m.aliases), l.MaxAliases)
	}
	return doc, nil
}

// loneSurrogate returns a parse error when the string token tok of query
// holds an escape naming half of a UTF-16 surrogate pair alone, which
// gqlparser reads as U+FFFD (and so would store it); nil otherwise. Its
// caller calls it only for a string whose value holds U+FFFD. (A block
// string holds backslashes as they are.)
func loneSurrogate(query string, tok lexer.Token) *gqlerror.Error {
	// The token's position counts runes: find its bytes.
	start, end, r := -1, len(query), 0
	for i := range query {
		if r == tok.Pos.Start {
			start = i
		}
		if r == tok.Pos.End {
			end = i
			break
		}
		r++
	}
	if start < 0 {
		return nil
	}
	l, bad := jsonesc.Find([]byte(query[start:end]))
	if !bad {
		return nil
	}
	err := gqlerror.ErrorPosf(&tok.Pos, "the string holds the escape %s, half of a UTF-16 surrogate pair without its other half: it names no character, and is refused, not replaced", l.Escape())
	errcode.Set(err, errcode.ParseFailed)
	return err
}

// measure is the size of a selection set with its fragments expanded.
// Counts saturate at countCap: a document of nested spreads doubles them
// at each level.
type measure struct {
	fields, aliases int64
	depth           int
	cycle           string // a fragment that spreads itself, if any
}

const countCap = math.MaxInt64 / 4

func countText(n int64) string {
	if n >= countCap {
		return fmt.Sprintf("more than %d", int64(countCap))
	}
	return fmt.Sprint(n)
}

func (m *measure) add(o measure) {
	m.fields = min(m.fields+o.fields, countCap)
	m.aliases = min(m.aliases+o.aliases, countCap)
	m.depth = max(m.depth, o.depth)
	if m.cycle == "" {
		m.cycle = o.cycle
	}
}

// measureDocument measures every operation of doc, and every fragment no
// operation spreads (gqlparser validates those too), together: depth is
// the deepest, fields and aliases the sums.
//
// It also returns how many selections it visited: at most the number doc
// holds, since each fragment is measured once (tests check it).
func measureDocument(doc *ast.QueryDocument) (measure, int) {
	w := &measurer{frags: map[string]*ast.FragmentDefinition{}, memo: map[string]*measure{}}
	for _, f := range doc.Fragments {
		if _, dup := w.frags[f.Name]; !dup { // spreads use the first, as in gqlparser
			w.frags[f.Name] = f
		}
	}
	var total measure
	for _, op := range doc.Operations {
		total.add(w.selections(op.SelectionSet))
	}
	for _, f := range doc.Fragments {
		if w.frags[f.Name] != f {
			total.add(w.selections(f.SelectionSet)) // a duplicate name
		} else if _, spread := w.memo[f.Name]; !spread {
			total.add(w.fragment(f.Name))
		}
	}
	return total, w.steps
}

// measurer measures selection sets, each fragment once.
type measurer struct {
	frags map[string]*ast.FragmentDefinition
	// memo holds the measure of each fragment reached; nil while it is
	// being measured, so that reaching it again is a cycle.
	memo  map[string]*measure
	steps int
}

func (w *measurer) selections(set ast.SelectionSet) measure {
	var total measure
	for _, s := range set {
		w.steps++
		var m measure
		switch s := s.(type) {
		case *ast.Field:
			m = w.selections(s.SelectionSet)
			m.fields = min(m.fields+1, countCap)
			if s.Alias != s.Name {
				m.aliases = min(m.aliases+1, countCap)
			}
			m.depth++
		case *ast.InlineFragment:
			m = w.selections(s.SelectionSet)
		case *ast.FragmentSpread:
			m = w.fragment(s.Name)
		}
		total.add(m)
	}
	return total
}

func (w *measurer) fragment(name string) measure {
	if m, seen := w.memo[name]; seen {
		if m == nil {
			return measure{cycle: name}
		}
		return *m
	}
	f := w.frags[name]
	if f == nil {
		return measure{} // gqlparser reports the unknown fragment
	}
	w.memo[name] = nil
	m := w.selections(f.SelectionSet)
	w.memo[name] = &m
	return m
}

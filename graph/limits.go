package graph

import (
	"fmt"
	"time"

	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
)

// Limits bound what one GraphQL request may cost, so that no request can
// exhaust the daemon or Postgres. The document limits (the first six) are
// checked on the query text before gqlparser validates it, because some
// validation rules cost more than linear time (OverlappingFieldsCanBeMerged
// compares pairs of fields and of fragments); the statements limit on the
// validated operation, before it runs; the result limits bound the
// memory of executing it. Each is the config key named in its comment;
// zero takes the default (DefaultLimits).
type Limits struct {
	// MaxQueryBytes bounds the query text (graphql_max_query_bytes).
	MaxQueryBytes int
	// MaxTokens bounds the query's lexical tokens, comments excluded
	// (graphql_max_tokens).
	MaxTokens int
	// MaxDepth bounds the nesting of selections, through fragments
	// (graphql_max_depth): `{ a }` is 1 deep.
	MaxDepth int
	// MaxAliases bounds the aliased fields, counted with fragments
	// expanded (graphql_max_aliases): each aliased root field is one SQL
	// statement.
	MaxAliases int
	// MaxFields bounds the field selections with fragments expanded, every
	// operation and unused fragment of the document together
	// (graphql_max_fields).
	MaxFields int
	// MaxFragments bounds the fragment definitions of a document
	// (graphql_max_fragments).
	MaxFragments int
	// MaxStatements bounds the SQL statements the fields of one query or
	// subscription may run, counted on the validated operation before it
	// runs (graphql_max_statements; see countStatements).
	MaxStatements int
	// MaxResultRows bounds the documents one request reads from Postgres,
	// over all its fields, aliases and levels of references together
	// (graphql_max_result_rows).
	MaxResultRows int
	// MaxResponseBytes bounds the JSON of a response's data and errors
	// together (graphql_max_response_bytes).
	MaxResponseBytes int
	// RequestTimeout bounds the time the fields of one query, one read
	// of a live query's result, or the reads of one commit's
	// subscription events, run (graphql_request_timeout): the
	// statements MaxStatements counts may each run up to
	// statement_timeout. Zero is no bound; it has no default here (the
	// daemon's configuration has one).
	RequestTimeout time.Duration
}

// DefaultLimits returns the limits used for zero fields of Limits.
//
// The document limits were chosen against gqlparser's validation: its cost
// is linear in the document except OverlappingFieldsCanBeMerged, which is
// quadratic in the fields sharing a response name and in the fragments
// spread into one selection set, so the limits keep the worst shapes
// found to tens of milliseconds (the figures are in docs/benchmarks.md,
// "Bounded GraphQL requests"). Introspection as GraphiQL 4 and graphql-js
// 16 send it has about 230 expanded fields, 3 fragments, no aliases, 180
// tokens and 2 KB, and nests 15 levels deep
// (testdata/introspection.*.graphql).
func DefaultLimits() Limits {
	return Limits{
		// Large values belong in variables (bounded by max_body_bytes); 64
		// KiB holds any hand-written query, and the query caches are
		// bounded by what their texts weigh (servers.go).
		MaxQueryBytes: 64 << 10,
		// Parsing is linear; the bound keeps the parsed document (about
		// 100 bytes a token) small. 15,000 is gqlparser's suggested limit.
		MaxTokens:  15000,
		MaxDepth:   20,
		MaxAliases: 100,
		MaxFields:  1000,
		// Relay-style applications spread a few dozen fragments per
		// operation.
		MaxFragments: 100,
		// Each statement may run up to statement_timeout whatever it
		// answers (an aggregate, a sorted backlink page), so a request
		// holds a Postgres backend up to this many times that. 25 holds a
		// screen's queries: a dashboard's couple of dozen counts, or a few
		// lists with several levels of references and backlinks; more
		// belong in several requests.
		MaxStatements: 25,
		// 10,000 documents are a few MB in memory and far more than a
		// screen shows; larger reads page with limit and offset.
		MaxResultRows: 10000,
		// 16 MiB holds 10,000 documents of 1.6 KB of JSON each. The
		// response is built in memory (about twice its size with buffer
		// growth and encoding), so this bounds a request's memory too.
		MaxResponseBytes: 16 << 20,
	}
}

// withDefaults returns l with zero fields set to their defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	for _, f := range []struct{ v, def *int }{
		{&l.MaxQueryBytes, &d.MaxQueryBytes},
		{&l.MaxTokens, &d.MaxTokens},
		{&l.MaxDepth, &d.MaxDepth},
		{&l.MaxAliases, &d.MaxAliases},
		{&l.MaxFields, &d.MaxFields},
		{&l.MaxFragments, &d.MaxFragments},
		{&l.MaxStatements, &d.MaxStatements},
		{&l.MaxResultRows, &d.MaxResultRows},
		{&l.MaxResponseBytes, &d.MaxResponseBytes},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return l
}

// The config keys of the limits, named by the errors so that a client
// knows which one it hit and an operator which one to raise.
const (
	keyMaxQueryBytes    = "graphql_max_query_bytes"
	keyMaxTokens        = "graphql_max_tokens"
	keyMaxDepth         = "graphql_max_depth"
	keyMaxAliases       = "graphql_max_aliases"
	keyMaxFields        = "graphql_max_fields"
	keyMaxFragments     = "graphql_max_fragments"
	keyMaxStatements    = "graphql_max_statements"
	keyMaxResultRows    = "graphql_max_result_rows"
	keyMaxResponseBytes = "graphql_max_response_bytes"
	keyMaxPastChanges   = "max_past_changes"
	keyRequestTimeout   = "graphql_request_timeout"
)

// documentLimitError is the request error of a document over limit key:
// a validation failure (the document is refused before it runs), with
// extensions.limit naming the key.
func documentLimitError(key, format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format+" (limit %s)", append(args, key)...)
	errcode.Set(err, errcode.ValidationFailed)
	err.Extensions["limit"] = key
	return err
}

// resultLimitError is the error of a request whose result went over limit
// key while it ran; toGQLError gives it the path of the field that was
// being resolved. A request's own limits (the schema's) are the client's
// to change (CodeInvalid); a live query budget, what a user's or the
// server's live queries hold in all, is a per-user or server bound
// (budget: CodeTooMany), as when it refuses a new live query.
type resultLimitError struct {
	key, msg string
	budget   bool
}

func (e *resultLimitError) Error() string { return e.msg + " (limit " + e.key + ")" }

func (e *resultLimitError) gqlError(path ast.Path) *gqlerror.Error {
	code := sluice.CodeInvalid
	if e.budget {
		code = sluice.CodeTooMany
	}
	ext := sluice.Shown{Code: code, RetryAfter: code.RetryAfter()}.GraphQLExtensions(code.GraphQLCode())
	ext["limit"] = e.key
	return &gqlerror.Error{Message: e.Error(), Path: path, Extensions: ext}
}

func errTooManyRows(max int) error {
	return &resultLimitError{key: keyMaxResultRows,
		msg: fmt.Sprintf("the request reads more than %d documents; use limit and offset to read them page by page", max)}
}

func errResponseTooLarge(max int) error {
	return &resultLimitError{key: keyMaxResponseBytes,
		msg: fmt.Sprintf("the response is larger than %d bytes; select fewer fields, or use limit and offset to read the documents page by page", max)}
}

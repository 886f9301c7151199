package graph

import (
	"context"
	"math/bits"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
)

// statementBounds is the gqlgen extension that refuses a query or
// subscription whose fields may run more SQL statements than
// Limits.MaxStatements, before it runs any. The row and byte limits do
// not bound them: an aggregate reads no document, and a backlink page
// sorts every link of its target before paging, so each such field can
// hold a Postgres backend up to statement_timeout whatever it answers.
// It runs after gqlgen validated the operation (an operation context
// mutator), on every transport, for every operation, cached or not; a
// live query is checked when it starts (and when a schema change
// prepares it again), and each of its runs runs the same statements.
type statementBounds struct {
	es  *ExecutableSchema
	max int
}

var (
	_ graphql.HandlerExtension        = statementBounds{}
	_ graphql.OperationContextMutator = statementBounds{}
)

func (statementBounds) ExtensionName() string                   { return "StatementBounds" }
func (statementBounds) Validate(graphql.ExecutableSchema) error { return nil }

func (b statementBounds) MutateOperationContext(_ context.Context, op *graphql.OperationContext) *gqlerror.Error {
	if op.Operation == nil || op.Operation.Operation == ast.Mutation {
		return nil // a mutation's statements are its write's, one batch
	}
	n := countStatements(b.es.schema, b.es.role, op.Doc, op.Operation.SelectionSet)
	if n > int64(b.max) {
		return documentLimitError(keyMaxStatements,
			"the query may run %s SQL statements (one for each class query, aggregate and backlink field, and one for each level of references below a class query), more than %d; split it into several requests",
			countText(n), b.max)
	}
	return nil
}

// countStatements returns how many SQL statements the root selection set
// sel of a validated query or subscription may run at most, counted with
// its fragments expanded:
//
//   - one for each class query field, aggregate field and _ChangeSet
//     field (each runs its own);
//   - below a class query field, or a per-class field of a change set
//     (each walked by its own prefetch), one for each backlink field
//     (one statement per backlink selection and level) and one for each
//     level of references that holds a reference field (the documents
//     every reference of a level points at are read together).
//
// Fields merged by name, inline fragments whose type never matches and
// statements skipped for want of data count all the same: it is a bound,
// known before anything runs. What it leaves out is bounded otherwise:
// the snapshot's own statements and a read of the past's check are one
// each per request, and a change set's filter through a reference reads
// each document it names by id (lookup), counted by
// graphql_max_result_rows.
func countStatements(s *sluice.Schema, role sluice.Role, doc *ast.QueryDocument, sel ast.SelectionSet) int64 {
	c := &stmtCounter{s: s, role: role, frags: map[string]*ast.FragmentDefinition{}, memo: map[string]*stmtMeasure{}}
	for _, f := range doc.Fragments {
		if _, dup := c.frags[f.Name]; !dup {
			c.frags[f.Name] = f
		}
	}
	return c.selections(sel).total()
}

// stmtMeasure is what a selection set runs, relative to the level of
// prefetch it is walked at: statements already counted in full (fixed),
// backlink fields (one statement each), and the levels, from its own (0),
// that hold reference fields (one statement each level).
type stmtMeasure struct {
	fixed, backlinks int64
	levels           []uint64 // a bit set
}

func (m stmtMeasure) total() int64 {
	n := min(m.fixed+m.backlinks, countCap)
	for _, w := range m.levels {
		n = min(n+int64(bits.OnesCount64(w)), countCap)
	}
	return n
}

// add adds o, walked shift levels below m's own.
func (m *stmtMeasure) add(o stmtMeasure, shift int) {
	m.fixed = min(m.fixed+o.fixed, countCap)
	m.backlinks = min(m.backlinks+o.backlinks, countCap)
	for i, w := range o.levels {
		for b := range 64 {
			if w&(1<<b) != 0 {
				m.setLevel(i*64 + b + shift)
			}
		}
	}
}

func (m *stmtMeasure) setLevel(l int) {
	for len(m.levels) <= l/64 {
		m.levels = append(m.levels, 0)
	}
	m.levels[l/64] |= 1 << (l % 64)
}

// stmtCounter measures selection sets, each fragment once.
type stmtCounter struct {
	s     *sluice.Schema
	role  sluice.Role
	frags map[string]*ast.FragmentDefinition
	// memo holds the measure of each fragment reached; nil while it is
	// being measured (validation refuses cycles; one counts nothing).
	memo map[string]*stmtMeasure
}

func (c *stmtCounter) selections(set ast.SelectionSet) stmtMeasure {
	var total stmtMeasure
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			c.field(&total, s)
		case *ast.InlineFragment:
			total.add(c.selections(s.SelectionSet), 0)
		case *ast.FragmentSpread:
			total.add(c.fragment(s.Name), 0)
		}
	}
	return total
}

// field adds to m what field f runs. The type f is selected on tells
// what it is: a root field, a change set's per-class field, or a field of
// a document or subdocument.
func (c *stmtCounter) field(m *stmtMeasure, f *ast.Field) {
	on := ""
	if f.ObjectDefinition != nil {
		on = f.ObjectDefinition.Name
	}
	switch on {
	case typeQuery, typeSubscription:
		switch f.Name {
		case "__typename", "__schema", "__type":
			return
		}
		m.fixed = min(m.fixed+1, countCap)
		if _, agg := aggregateClass(c.s, f.Name); agg {
			return // its selection is of values computed by that statement
		}
		// A class query's documents are its prefetch's first level; a
		// change set's per-class fields are fields of _ChangeSet, below.
		m.fixed = min(m.fixed+c.selections(f.SelectionSet).total(), countCap)
	case typeChangeSet:
		// Each per-class field's documents are walked by a prefetch of
		// their own.
		m.fixed = min(m.fixed+c.selections(f.SelectionSet).total(), countCap)
	default:
		if len(f.SelectionSet) == 0 {
			return
		}
		sub := c.selections(f.SelectionSet)
		if _, ok := parseBacklink(c.s, c.role, f.Name); ok {
			m.backlinks = min(m.backlinks+1, countCap)
			m.add(sub, 1)
			return
		}
		if c.reference(on, f.Name) {
			m.setLevel(0)
			m.add(sub, 1)
			return
		}
		m.add(sub, 0) // a subdocument (or an aggregate's values): read with its document
	}
}

// reference reports whether field name of GraphQL type on is a reference
// field (or may be: an unknown type counts as one).
func (c *stmtCounter) reference(on, name string) bool {
	class := c.s.Class(on)
	if class == nil {
		return on == "" // not validated: err on the side of a statement
	}
	f := class.Field(name)
	return f != nil && f.Type.Kind == sluice.TypeReference
}

func (c *stmtCounter) fragment(name string) stmtMeasure {
	if m, seen := c.memo[name]; seen {
		if m == nil {
			return stmtMeasure{}
		}
		return *m
	}
	f := c.frags[name]
	if f == nil {
		return stmtMeasure{}
	}
	c.memo[name] = nil
	m := c.selections(f.SelectionSet)
	c.memo[name] = &m
	return m
}

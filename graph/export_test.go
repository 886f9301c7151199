package graph

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/schema"
)

// operationOn parses and validates query text on schema sdl, as the
// admin sees it.
func operationOn(sdl, text string) (*ExecutableSchema, *graphql.OperationContext, error) {
	s, err := schema.Parse(sdl)
	if err != nil {
		return nil, nil, err
	}
	es, err := NewExecutableSchema(nil, s, sluice.RoleAdmin, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, nil, err
	}
	doc, perr := parser.ParseQuery(&ast.Source{Input: text})
	if perr != nil {
		return nil, nil, perr
	}
	if errs := validator.ValidateWithRules(es.gql, doc, nil); len(errs) > 0 {
		return nil, nil, errs
	}
	return es, &graphql.OperationContext{Doc: doc, Operation: doc.Operations[0], Variables: map[string]any{}}, nil
}

// PastCheckSteps checks the first root field of query text on schema sdl
// as a read of a past in which every field can be shown (checkPast,
// under ctx), and returns the calls of checkPastSelection it took.
func PastCheckSteps(ctx context.Context, sdl, text string) (int, error) {
	es, op, err := operationOn(sdl, text)
	if err != nil {
		return 0, err
	}
	x := &execution{ctx: ctx, op: op, es: es, req: &Request{DB: &sluice.Database{ID: 1}}, past: &engine.Past{}}
	cf := x.fields(op.Operation.SelectionSet, typeQuery)[0]
	q, err := x.classDocQuery(cf)
	if err != nil {
		return 0, err
	}
	err = x.checkPast(cf, q)
	return x.pastSteps, err
}

// LiveRefScan prepares live query text on schema sdl and returns the
// document classes its first root field reads through references
// (sorted), and the calls of refScan.selection that found them.
func LiveRefScan(sdl, text string) (refs []string, steps int, err error) {
	es, op, err := operationOn(sdl, text)
	if err != nil {
		return nil, 0, err
	}
	root := typeQuery
	if op.Operation.Operation == ast.Subscription {
		root = typeSubscription
	}
	cf := (&execution{op: op, es: es}).fields(op.Operation.SelectionSet, root)[0]
	rs := newRefScan(es, op, map[string]bool{})
	rs.selection(cf.Name, cf.Selections)
	return slices.Sorted(maps.Keys(rs.refs)), rs.steps, nil
}

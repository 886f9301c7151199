package graph

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
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
	op, err := parseOperation(es, text)
	return es, op, err
}

// parseOperation parses and validates query text on es.
func parseOperation(es *ExecutableSchema, text string) (*graphql.OperationContext, error) {
	doc, perr := parser.ParseQuery(&ast.Source{Input: text})
	if perr != nil {
		return nil, perr
	}
	if errs := validator.ValidateWithRules(es.gql, doc, nil); len(errs) > 0 {
		return nil, errs
	}
	return &graphql.OperationContext{Doc: doc, Operation: doc.Operations[0], Variables: map[string]any{}}, nil
}

// ChangeSetDecodes runs query text as user u on database org/name of
// store (in no snapshot, with no limits), and returns its data and
// errors and the change images its _ChangeSet fields decoded.
func ChangeSetDecodes(ctx context.Context, store Store, u *sluice.User, org, name, text string) (json.RawMessage, gqlerror.List, int, error) {
	db, s, role, err := store.GraphQLDatabase(ctx, u, org, name)
	if err != nil {
		return nil, nil, 0, err
	}
	es, err := NewExecutableSchema(store, s, role, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, 0, err
	}
	op, err := parseOperation(es, text)
	if err != nil {
		return nil, nil, 0, err
	}
	x := &execution{ctx: ctx, op: op, es: es, req: &Request{User: u, DB: db}, cache: map[string]*object{}}
	data := x.query()
	return data, x.errs, x.decodes, nil
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

// ChangeSetEventDecodes evaluates the subscription text as user u on the
// newest commit of database org/name of store, and returns the events it
// gives and the change images its _ChangeSet fields decoded.
func ChangeSetEventDecodes(ctx context.Context, store Store, u *sluice.User, org, name, text string) ([]SubscriptionEvent, int, error) {
	db, s, role, err := store.GraphQLDatabase(ctx, u, org, name)
	if err != nil {
		return nil, 0, err
	}
	es, err := NewExecutableSchema(store, s, role, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, 0, err
	}
	op, err := parseOperation(es, text)
	if err != nil {
		return nil, 0, err
	}
	req := &Request{User: u, DB: db}
	sub, err := es.NewSubscription(op, req)
	if err != nil {
		return nil, 0, err
	}
	c, err := store.CommitChanges(ctx, db, s, role, 0, -1, -1)
	if err != nil {
		return nil, 0, err
	}
	x := &execution{ctx: ctx, op: sub.operationContext(), es: es, req: req, cache: map[string]*object{}}
	events, err := sub.events(x, c, nil)
	return events, x.decodes, err
}

// SubscriptionEvents returns the evaluation of the subscription text as
// user u on commit seq (0: the newest) of database org/name of store, as
// a stream makes it (Events), prepared once.
func SubscriptionEvents(ctx context.Context, store Store, u *sluice.User, org, name, text string, seq int64) (func() ([]SubscriptionEvent, error), error) {
	db, s, role, err := store.GraphQLDatabase(ctx, u, org, name)
	if err != nil {
		return nil, err
	}
	es, err := NewExecutableSchema(store, s, role, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	op, err := parseOperation(es, text)
	if err != nil {
		return nil, err
	}
	req := &Request{User: u, DB: db}
	sub, err := es.NewSubscription(op, req)
	if err != nil {
		return nil, err
	}
	c, err := store.CommitChanges(ctx, db, s, role, seq, -1, -1)
	if err != nil {
		return nil, err
	}
	return func() ([]SubscriptionEvent, error) { return sub.Events(ctx, c) }, nil
}

// SetRequestTimeout sets es's graphql_request_timeout (Limits.RequestTimeout),
// as a Handler sets it on the schemas it builds.
func SetRequestTimeout(es *ExecutableSchema, d time.Duration) { es.limits.RequestTimeout = d }

// IntrospectionSteps runs query text on schema sdl as the admin sees it,
// with its response bounded to maxBytes, and returns its data and errors
// and the objects its introspection fields visited (introSteps).
func IntrospectionSteps(sdl, text string, maxBytes int) (json.RawMessage, gqlerror.List, int, error) {
	es, op, err := operationOn(sdl, text)
	if err != nil {
		return nil, nil, 0, err
	}
	es.limits.MaxResponseBytes = maxBytes
	x := &execution{ctx: context.Background(), op: op, es: es, req: &Request{DB: &sluice.Database{ID: 1}}}
	data := x.query()
	return data, x.errs, x.introSteps, nil
}

package graph

import (
	"context"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// A subscription or a live query is prepared for one schema version of
// its database (its executable schema's), and lives on across schema
// changes. When a change commits (it is a commit of the log, which every
// stream of the database receives: sluice.Commit.NewSchema), or a read
// finds the schema moved (engine.ErrSchemaChanged), the stream revises
// what it prepared: its operation is validated again against the new
// schema, for the same role, and every field it selects and every
// argument value it passes must keep its type. If so, it goes on
// prepared for the new version (a field added, a class added, a field it
// does not use changed); if not, it ends with a Conflict that names the
// change, so that it never delivers a value its GraphQL type forbids.

// operation is what revising needs of an operation: its text, name and
// variables (as coerced, which coerce again to themselves).
type operation struct {
	query, name string
	variables   map[string]any
}

func operationOf(op *graphql.OperationContext) operation {
	return operation{query: op.RawQuery, name: op.OperationName, variables: op.Variables}
}

// Version returns the schema version the executable schema was built for
// (0 when built outside a Handler).
func (es *ExecutableSchema) Version() int { return es.version }

// revise returns the executable schema of the current schema version of
// req's database, for es's role, with req for it and op validated against
// it; es and a nil operation context when the version is es's. what names
// the operation in errors ("this subscription").
func (es *ExecutableSchema) revise(ctx context.Context, req *Request, op operation, what string) (*ExecutableSchema, *Request, *graphql.OperationContext, error) {
	if es.handler == nil {
		return nil, nil, nil, sluice.Errorf(sluice.CodeInternal, "graph: an executable schema outside a handler cannot be revised")
	}
	d, s, err := es.store.CurrentDatabase(ctx, req.DB)
	if err != nil {
		return nil, nil, nil, err
	}
	if d.SchemaVersion == es.version {
		return es, req, nil, nil
	}
	srv, err := es.handler.server(d, s, es.role)
	if err != nil {
		return nil, nil, nil, err
	}
	start := graphql.Now()
	octx := graphql.StartOperationTrace(WithRequest(ctx, &Request{User: req.User, DB: d}))
	next, errs := srv.exec.CreateOperationContext(octx, &graphql.RawParams{Query: op.query, OperationName: op.name, Variables: op.variables,
		ReadTime: graphql.TraceTiming{Start: start, End: start}})
	if errs != nil {
		return nil, nil, nil, changedError(d, es.schema, s, es.role, what+" no longer validates: "+errorMessages(errs))
	}
	if detail := retyped(es, srv.es, next); detail != "" {
		return nil, nil, nil, changedError(d, es.schema, s, es.role, what+" "+detail)
	}
	return srv.es, &Request{User: req.User, DB: d}, next, nil
}

// errorMessages joins the messages of errs.
func errorMessages(errs gqlerror.List) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Message
	}
	return strings.Join(msgs, "; ")
}

// changedError is the error that ends a stream a schema change
// invalidated: it names the database, the new version, what changed and
// what of the operation depends on it.
func changedError(d *sluice.Database, prev, next *sluice.Schema, role sluice.Role, detail string) error {
	// What changed, as far as role sees it: a field hidden from it is not
	// named.
	changed := schema.DescribeChanges(schema.Diff(prev, next), prev, next, role)
	if changed != "" {
		changed = " (" + changed + ")"
	}
	return sluice.Errorf(sluice.CodeConflict, "the schema of %s changed to version %d%s, and %s; run it again against the new schema",
		d.Path(), d.SchemaVersion, changed, detail)
}

// retyped returns what of operation op (validated against next) has
// another type in prev: a field it selects, or an argument or input field
// it passes a value to, or the field's absence; "" when nothing does. A
// reference widened (schema.Widens: owner from Person to Named, every
// class it may point to a Named) keeps its type here, and so does its
// filter: its values are the ones it had, and what op selects of them (a
// field of Named, or of Person in a fragment) reads what it read.
func retyped(prev, next *ExecutableSchema, op *graphql.OperationContext) string {
	seen := map[string]bool{}
	// was is the class in prev of the values of sel when they are of a
	// widened reference ("" for none): a field selected on the
	// reference's new type, an interface, read that class's field.
	var walk func(sel ast.SelectionSet, was string) string
	walk = func(sel ast.SelectionSet, was string) string {
		for _, it := range sel {
			switch it := it.(type) {
			case *ast.Field:
				if strings.HasPrefix(it.Name, "__") || it.Definition == nil || it.ObjectDefinition == nil {
					continue
				}
				parent := it.ObjectDefinition.Name
				at := parent
				if was != "" && it.ObjectDefinition.Kind == ast.Interface {
					at = was
				}
				var pf *ast.FieldDefinition
				if pd := prev.gql.Types[at]; pd != nil {
					pf = pd.Fields.ForName(it.Name)
				}
				if pf == nil {
					return fmt.Sprintf("selects %s.%s, which it did not have", parent, it.Name)
				}
				if !sameType(prev.schema, next.schema, pf.Type, it.Definition.Type) {
					return fmt.Sprintf("selects %s.%s, now of type %s (was %s)", parent, it.Name, it.Definition.Type, pf.Type)
				}
				args := it.ArgumentMap(op.Variables)
				for _, arg := range it.Definition.Arguments {
					v, ok := args[arg.Name]
					if !ok {
						continue
					}
					pa := pf.Arguments.ForName(arg.Name)
					if pa == nil {
						return fmt.Sprintf("passes argument %s of %s.%s, which it did not have", arg.Name, parent, it.Name)
					}
					if d := inputRetyped(prev, next, pa.Type, arg.Type, v, fmt.Sprintf("argument %s of %s.%s", arg.Name, parent, it.Name)); d != "" {
						return "passes " + d
					}
				}
				below := ""
				if a := pf.Type.Name(); a != it.Definition.Type.Name() {
					below = a
				}
				if d := walk(it.SelectionSet, below); d != "" {
					return d
				}
			case *ast.InlineFragment:
				if d := walk(it.SelectionSet, was); d != "" {
					return d
				}
			case *ast.FragmentSpread:
				if seen[it.Name+" "+was] {
					continue
				}
				seen[it.Name+" "+was] = true
				if def := op.Doc.Fragments.ForName(it.Name); def != nil {
					if d := walk(def.SelectionSet, was); d != "" {
						return d
					}
				}
			}
		}
		return ""
	}
	return walk(op.Operation.SelectionSet, "")
}

// sameType reports whether GraphQL type a of schema prev and type b of
// next read the same values: the same type, or the same lists and
// non-nulls of a reference's class widened, or of its filter (widened).
func sameType(prev, next *sluice.Schema, a, b *ast.Type) bool {
	if a.String() == b.String() {
		return true
	}
	for a.Elem != nil && b.Elem != nil && a.NonNull == b.NonNull {
		a, b = a.Elem, b.Elem
	}
	return a.Elem == nil && b.Elem == nil && a.NonNull == b.NonNull && widened(prev, next, a.NamedType, b.NamedType)
}

// widened reports whether GraphQL type a of schema prev is b of next
// with a reference's class widened (schema.Widens): class a is class b,
// or filter a_Filter (a_ListFilter) is b_Filter (b_ListFilter), where a
// reference to a changed to one to b keeps its stored values.
func widened(prev, next *sluice.Schema, a, b string) bool {
	for _, suffix := range []string{suffixFilter, suffixListFilter} {
		if ca, ok := strings.CutSuffix(a, suffix); ok {
			cb, ok := strings.CutSuffix(b, suffix)
			a, b = ca, cb
			if !ok {
				return false
			}
			break
		}
	}
	ca, cb := prev.Class(a), next.Class(b)
	if ca == nil || cb == nil || ca.Kind == sluice.KindSubdocument || cb.Kind == sluice.KindSubdocument {
		return false // not a reference's class
	}
	ref := func(class string) *sluice.Field {
		return &sluice.Field{Type: sluice.FieldType{Kind: sluice.TypeReference, Name: class}}
	}
	return schema.Widens(prev, next, ref(a), ref(b))
}

// inputRetyped returns what of input value v (of type nt in next, pt in
// prev) has another type in prev, named from where; "" when nothing. A
// reference's filter widened keeps its type (sameType).
func inputRetyped(prev, next *ExecutableSchema, pt, nt *ast.Type, v any, where string) string {
	if !sameType(prev.schema, next.schema, pt, nt) {
		return fmt.Sprintf("%s, now of type %s (was %s)", where, nt, pt)
	}
	if nt.Elem != nil {
		items := listArg(v)
		for _, it := range items {
			if d := inputRetyped(prev, next, pt.Elem, nt.Elem, it, where); d != "" {
				return d
			}
		}
		return ""
	}
	nd, pd := next.gql.Types[nt.Name()], prev.gql.Types[pt.Name()]
	m, ok := v.(map[string]any)
	if !ok || nd == nil || pd == nil || nd.Kind != ast.InputObject {
		return ""
	}
	for k, fv := range m {
		nf, pf := nd.Fields.ForName(k), pd.Fields.ForName(k)
		if nf == nil {
			continue // validation refused it already
		}
		if pf == nil {
			return fmt.Sprintf("%s with %s.%s, which it did not have", where, nd.Name, k)
		}
		if d := inputRetyped(prev, next, pf.Type, nf.Type, fv, fmt.Sprintf("%s with %s.%s", where, nd.Name, k)); d != "" {
			return d
		}
	}
	return ""
}

// Revise returns the subscription prepared again for the current schema
// version of its database: s itself when it is the one s was prepared
// for. When the change invalidated s (its operation does not validate
// against the new schema, or a field or argument value it uses has
// another type), the error is a Conflict naming the change.
func (s *Subscription) Revise(ctx context.Context) (*Subscription, error) {
	es, req, op, err := s.es.revise(ctx, s.req, s.op, "this subscription")
	if err != nil || op == nil {
		return s, err
	}
	next, err := es.NewSubscription(op, req)
	if err != nil {
		return nil, changedError(req.DB, s.es.schema, es.schema, es.role, "this subscription is refused by it: "+sluice.ErrorMessage(err))
	}
	next.since = s.since
	return next, nil
}

// checkChangeThen returns the Conflict that ends s at c, the commit of a
// schema change that s meets without having been revised for it: s was
// prepared for that version or a later one (a stream resumed from before
// the change, or started from a position before it). It is the error a
// subscription open at the change got when it was revised for it (Revise),
// judged from the version before the change to the version it made, so
// that both end at the same commit with the same error, rather than the
// resumed one going on with the values the change dropped shown as null.
// An operation that does not validate against the version before the
// change (it selects what a later change made) could be open at no
// stream then: it goes on. This builds the GraphQL schemas of both
// versions, for a replayed schema change only.
func (s *Subscription) checkChangeThen(ctx context.Context, c *sluice.Commit) error {
	if c.SchemaVersion > s.since {
		return nil // revised for it
	}
	before, after, err := s.es.store.SchemaChange(ctx, s.req.DB, c)
	if err != nil || before == nil || after == nil {
		return err
	}
	prev, err := s.es.versionSchema(s.req.DB, c.SchemaVersion-1, before)
	if err != nil {
		return err
	}
	d := *s.req.DB
	d.SchemaVersion = c.SchemaVersion
	req := &Request{User: s.req.User, DB: &d}
	if _, errs := prepareOperation(ctx, prev, req, s.op); errs != nil {
		return nil
	}
	next, err := s.es.versionSchema(s.req.DB, c.SchemaVersion, after)
	if err != nil {
		return err
	}
	op, errs := prepareOperation(ctx, next, req, s.op)
	if errs != nil {
		return changedError(&d, before, after, s.es.role, "this subscription no longer validates: "+errorMessages(errs))
	}
	if detail := retyped(prev, next, op); detail != "" {
		return changedError(&d, before, after, s.es.role, "this subscription "+detail)
	}
	if _, err := next.NewSubscription(op, req); err != nil {
		return changedError(&d, before, after, s.es.role, "this subscription is refused by it: "+sluice.ErrorMessage(err))
	}
	return nil
}

// versionSchema returns the executable schema of s, version v of
// database d, for es's role. Subscriptions resumed at once (after a
// restart) that replay the same schema change build it once between
// them; it is not kept.
func (es *ExecutableSchema) versionSchema(d *sluice.Database, v int, s *sluice.Schema) (*ExecutableSchema, error) {
	if es.handler == nil {
		return NewExecutableSchema(es.store, s, es.role, es.logger)
	}
	x, err, _ := es.handler.building.Do(fmt.Sprintf("version %d/%d/%d", d.ID, es.role, v), func() (any, error) {
		return NewExecutableSchema(es.store, s, es.role, es.logger)
	})
	if err != nil {
		return nil, err
	}
	return x.(*ExecutableSchema), nil
}

// prepareOperation parses and validates op against es, for req, as a
// request's operation is (validationRules); errs is why it does not
// validate.
func prepareOperation(ctx context.Context, es *ExecutableSchema, req *Request, op operation) (*graphql.OperationContext, gqlerror.List) {
	exec := executor.New(es)
	exec.SetDefaultRulesFn(validationRules)
	start := graphql.Now()
	octx := graphql.StartOperationTrace(WithRequest(ctx, req))
	return exec.CreateOperationContext(octx, &graphql.RawParams{Query: op.query, OperationName: op.name, Variables: op.variables,
		ReadTime: graphql.TraceTiming{Start: start, End: start}})
}

// Revise returns the live query prepared again for the current schema
// version of its database, as Subscription.Revise does.
func (q *LiveQuery) Revise(ctx context.Context) (*LiveQuery, error) {
	es, req, op, err := q.es.revise(ctx, q.req, q.op, "this live query")
	if err != nil || op == nil {
		return q, err
	}
	next, err := es.NewLiveQuery(op, req)
	if err != nil {
		return nil, changedError(req.DB, q.es.schema, es.schema, es.role, "this live query is refused by it: "+sluice.ErrorMessage(err))
	}
	return next, nil
}

// Version returns the schema version the subscription was prepared for.
func (s *Subscription) Version() int { return s.es.version }

// Version returns the schema version the live query was prepared for.
func (q *LiveQuery) Version() int { return q.es.version }

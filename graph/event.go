package graph

import (
	"context"
	"encoding/json"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
)

// The entry points below are for subscriptions (the event-stream
// transport): they resolve a selection set against documents taken from
// the commit log instead of a query, with the same machinery as queries
// (references loaded with one statement per level, field protection by the
// schema's role). op is the subscription's operation context, req its
// request; both must come from a request served by es.

// ResolveDocument returns the JSON of doc (a change's after, or before for
// a deletion, as DecodeDocument returns it) for selection sel, presented as
// GraphQL type static (the subscribed class). commit and changeType fill
// its _CommitMetadata (_change_type is "added", "updated" or "deleted").
func (es *ExecutableSchema) ResolveDocument(ctx context.Context, op *graphql.OperationContext, req *Request, doc *sluice.Document, commit *sluice.Commit, changeType string, sel ast.SelectionSet, static string) (json.RawMessage, error) {
	c := es.schema.Class(doc.Type)
	if c == nil {
		return nil, sluice.Errorf(sluice.CodeNotFound, "class %s is not in the schema", doc.Type)
	}
	x := &execution{ctx: ctx, op: op, es: es, req: req, cache: map[string]*object{}}
	o := &object{class: c, id: doc.ID, fields: doc.Fields, commit: commit, changeType: changeType}
	if err := x.prefetch([]pending{{obj: o, sel: sel, static: static}}); err != nil {
		return nil, err
	}
	w := &jsonWriter{}
	x.writeObject(w, o, sel, static)
	return w.Bytes(), nil
}

// ResolveChangeSet returns the JSON of the _ChangeSet object of commit c
// (with its changes) for selection sel. includeChildren is the default of
// the per-class fields' include_children argument.
func (es *ExecutableSchema) ResolveChangeSet(ctx context.Context, op *graphql.OperationContext, req *Request, c *sluice.Commit, sel ast.SelectionSet, includeChildren bool) (json.RawMessage, error) {
	x := &execution{ctx: ctx, op: op, es: es, req: req, cache: map[string]*object{}}
	w := &jsonWriter{}
	if err := x.WriteChangeSet(w, c, sel, includeChildren); err != nil {
		return nil, err
	}
	return w.Bytes(), nil
}

// ParseFilter parses the filter argument of a field on class, as the query
// and subscription fields take it; see package filter for Match.
func (es *ExecutableSchema) ParseFilter(class string, input map[string]any) (filter.Expr, error) {
	return parseFilter(es.schema, class, input)
}

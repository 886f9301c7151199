package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// DepthLimit returns a gqlgen extension that refuses operations whose
// selections nest deeper than max (fragments included), before they run.
func DepthLimit(max int) graphql.HandlerExtension { return depthLimit{max: max} }

type depthLimit struct{ max int }

var (
	_ graphql.HandlerExtension        = depthLimit{}
	_ graphql.OperationContextMutator = depthLimit{}
)

func (depthLimit) ExtensionName() string                   { return "DepthLimit" }
func (depthLimit) Validate(graphql.ExecutableSchema) error { return nil }
func (d depthLimit) MutateOperationContext(_ context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	if rc.Operation == nil {
		return nil
	}
	if n := depth(rc.Operation.SelectionSet, rc.Doc, 0, d.max); n > d.max {
		err := gqlerror.Errorf("the operation nests more than %d levels of selections", d.max)
		errcode.Set(err, errcode.ValidationFailed)
		return err
	}
	return nil
}

// depth returns the nesting depth of sel, stopping once it exceeds max (so
// that fragment cycles, which validation refuses anyway, cannot loop).
func depth(sel ast.SelectionSet, doc *ast.QueryDocument, at, limit int) int {
	if at > limit {
		return at
	}
	deepest := at
	for _, s := range sel {
		var n int
		switch s := s.(type) {
		case *ast.Field:
			if len(s.SelectionSet) == 0 {
				n = at + 1
			} else {
				n = depth(s.SelectionSet, doc, at+1, limit)
			}
		case *ast.InlineFragment:
			n = depth(s.SelectionSet, doc, at, limit)
		case *ast.FragmentSpread:
			if f := doc.Fragments.ForName(s.Name); f != nil {
				n = depth(f.SelectionSet, doc, at, limit)
			}
		}
		deepest = max(deepest, n)
	}
	return deepest
}

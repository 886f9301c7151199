package graph

import (
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/sluice-dev/sluice"
)

// validationRules returns the rules every operation is validated with:
// gqlparser's default rules and bigIntLiterals. The executor's own
// validation (of a query the validating cache refuses, to report its
// errors) and the validating cache use them both.
func validationRules() *rules.Rules {
	r := rules.NewDefaultRules()
	r.AddRule("BigIntLiterals", bigIntLiterals)
	r.RemoveRule(rules.SingleFieldSubscriptionsRule.Name)
	r.AddRule(rules.SingleFieldSubscriptionsRule.Name, singleFieldSubscriptions)
	return r
}

// singleFieldSubscriptions is the GraphQL spec's "Single root field"
// rule, in place of gqlparser's of that name, which tells root fields
// apart by their names: two aliases of one field passed it, and were
// refused only once the subscription was prepared, with an error that
// located neither. As the spec (and graphql-js) has it, a subscription's
// root fields are told apart by their response names (the alias, or the
// name), and the error locates each field past the first response name,
// as graphql-js does. A field that @skip or @include leaves out, or may
// leave out by a variable, is not counted here: the fields are counted
// again when the operation is prepared, its variables known, and refused
// the same way (rootFieldsError). Its other check is gqlparser's: no
// introspection field at the root.
func singleFieldSubscriptions(observers *core.Events, addError core.AddErrFunc) {
	observers.OnOperation(func(w *core.Walker, op *ast.OperationDefinition) {
		if w.Schema.Subscription == nil || op.Operation != ast.Subscription {
			return
		}
		name := subscriptionName(op)
		first := ""
		var extra []core.ErrorOption
		spread := map[string]bool{}
		var walk func(set ast.SelectionSet)
		walk = func(set ast.SelectionSet) {
			for _, sel := range set {
				switch sel := sel.(type) {
				case *ast.Field:
					if strings.HasPrefix(sel.Name, "__") {
						addError(core.Message(`%s must not select an introspection top level field.`, name), core.At(sel.Position))
					}
					if mayBeLeftOut(sel.Directives) {
						continue
					}
					if first == "" {
						first = sel.Alias
					} else if sel.Alias != first {
						extra = append(extra, core.At(sel.Position))
					}
				case *ast.InlineFragment:
					if !mayBeLeftOut(sel.Directives) {
						walk(sel.SelectionSet)
					}
				case *ast.FragmentSpread:
					if sel.Definition != nil && !spread[sel.Name] && !mayBeLeftOut(sel.Directives) {
						spread[sel.Name] = true
						walk(sel.Definition.SelectionSet)
					}
				}
			}
		}
		walk(op.SelectionSet)
		if len(extra) > 0 {
			addError(append([]core.ErrorOption{core.Message(`%s must select only one top level field.`, name)}, extra...)...)
		}
	})
}

// subscriptionName names subscription op in an error, as gqlparser's
// rules do.
func subscriptionName(op *ast.OperationDefinition) string {
	if op.Name == "" {
		return "Anonymous Subscription"
	}
	return "Subscription " + strconv.Quote(op.Name)
}

// mayBeLeftOut reports whether directives leave their selection out, or
// may: @skip(if: true) or @include(if: false), or either with a variable
// (known only when the operation runs).
func mayBeLeftOut(directives ast.DirectiveList) bool {
	leaves := func(name, value string) bool {
		d := directives.ForName(name)
		if d == nil {
			return false
		}
		a := d.Arguments.ForName("if")
		return a != nil && a.Value != nil && (a.Value.Kind == ast.Variable || a.Value.Kind == ast.BooleanValue && a.Value.Raw == value)
	}
	return leaves("skip", "true") || leaves("include", "false")
}

// rootFieldsError returns the error of a subscription operation op whose
// root fields, collected as it runs (its variables known), are roots and
// are not one: as singleFieldSubscriptions refuses those it can tell
// before the variables are known, with the locations of the fields past
// the first.
func rootFieldsError(op *ast.OperationDefinition, roots []graphql.CollectedField) error {
	if len(roots) == 0 {
		return errorf("%s must select one top level field, not none", subscriptionName(op))
	}
	e := &gqlerror.Error{Message: subscriptionName(op) + " must select only one top level field.",
		Extensions: map[string]any{"code": sluice.CodeInvalid.GraphQLCode()}}
	for _, cf := range roots[1:] {
		if p := cf.Field.Position; p != nil {
			e.Locations = append(e.Locations, gqlerror.Location{Line: p.Line, Column: p.Column})
		}
	}
	return newResultError(gqlerror.List{e})
}

// bigIntLiterals is the rule that reads every BigInt literal too large
// for an int64 as the string of its digits (bigIntLiteral), and a BigInt
// literal written with a fraction or an exponent as a document's BigInt
// is read: 100.0 is 100, 1E2 and 100.5 are refused.
func bigIntLiterals(observers *core.Events, addError core.AddErrFunc) {
	observers.OnValue(func(_ *core.Walker, v *ast.Value) {
		if msg := bigIntLiteral(v); msg != "" {
			addError(core.Message("%s", msg), core.At(v.Position))
		}
	})
}

// bigIntLiteral makes v, when it is an Int literal of type BigInt that
// does not fit an int64, a string literal of the same digits. BigInt is
// of any size (a Postgres numeric), and a string of digits is a BigInt
// value wherever one is read (filters, documents), but gqlparser reads
// an Int literal as an int64 (ast.Value.Value): left an Int, such a
// literal made validation refuse the input object holding it with an
// "Expected value of type" error naming neither the field nor the reason,
// and would make ast's ArgumentMap panic. The walker calls it on a value
// before the object or list
// holding it, so the rules that read that object see the string. Values
// past BigInt's bounds are then refused by the checks every BigInt
// passes, naming the field.
//
// A Float literal of type BigInt is held to what a document's BigInt and
// a variable take, digits with at most a zero fraction: 100.0 becomes
// the string "100", and one with an exponent or another fraction is
// refused, the message returned (gqlparser reads a Float literal as a
// float64, in which 1E2 and 100.0 are the same number, so a filter took
// 1E2 as a literal and refused it as a variable).
func bigIntLiteral(v *ast.Value) string {
	if v.Definition == nil || v.Definition.Name != sluice.ScalarBigInt {
		return ""
	}
	switch v.Kind {
	case ast.IntValue:
		if _, err := strconv.ParseInt(v.Raw, 10, 64); err != nil {
			v.Kind = ast.StringValue
		}
	case ast.FloatValue:
		whole, frac, _ := strings.Cut(v.Raw, ".")
		if strings.ContainsAny(v.Raw, "eE") || strings.Trim(frac, "0") != "" {
			return "BigInt cannot represent " + v.Raw + ": write a whole number in decimal digits, without an exponent"
		}
		v.Kind, v.Raw = ast.StringValue, whole
	}
	return ""
}

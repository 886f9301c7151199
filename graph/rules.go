package graph

import (
	"strconv"

	"github.com/vektah/gqlparser/v2/ast"
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
	return r
}

// bigIntLiterals is the rule that reads every BigInt literal too large
// for an int64 as the string of its digits (bigIntLiteral). It refuses
// nothing.
func bigIntLiterals(observers *core.Events, _ core.AddErrFunc) {
	observers.OnValue(bigIntLiteral)
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
func bigIntLiteral(_ *core.Walker, v *ast.Value) {
	if v.Kind != ast.IntValue || v.Definition == nil || v.Definition.Name != sluice.ScalarBigInt {
		return
	}
	if _, err := strconv.ParseInt(v.Raw, 10, 64); err != nil {
		v.Kind = ast.StringValue
	}
}

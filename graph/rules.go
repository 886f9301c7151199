package graph

import (
	"strconv"
	"strings"

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

package graph

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/sluice-dev/sluice"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// operations is the executor the transports run operations with:
// gqlgen's, whose errors for variables that do not coerce to their types
// are said in words a client can act on (variableError) instead of the
// Go names of the values' kinds ("cannot use map as String").
type operations struct {
	*executor.Executor
	schema *ast.Schema
}

// CreateOperationContext parses and validates the operation of params and
// coerces its variables, as gqlgen's executor does; the query is parsed
// once (parsedQuery).
func (o operations) CreateOperationContext(ctx context.Context, params *graphql.RawParams) (*graphql.OperationContext, gqlerror.List) {
	rc, errs := o.Executor.CreateOperationContext(withParsedQuery(ctx), params)
	switch {
	case len(errs) == 0 && rc != nil && rc.Operation != nil:
		if e := strictVariables(o.schema, rc.Operation, params.Variables); e != nil {
			errs = gqlerror.List{e}
		}
	case len(errs) != 1:
	case rc != nil && rc.Operation != nil:
		errs = gqlerror.List{variableError(o.schema, rc.Operation, params.Variables, errs[0])}
	case errs[0].Message == "operation "+params.OperationName+" not found":
		errs = gqlerror.List{operationError(params, errs[0])}
	}
	return rc, errs
}

// operationError returns e, gqlgen's error for an operation it cannot
// pick ("operation  not found": a document of several operations without
// an operationName, or one naming none of them), saying what to do and
// which operations the document holds (the first ten).
func operationError(params *graphql.RawParams, e *gqlerror.Error) *gqlerror.Error {
	doc, err := parser.ParseQuery(&ast.Source{Input: params.Query})
	if err != nil || len(doc.Operations) == 0 {
		return e
	}
	names := make([]string, 0, min(len(doc.Operations), 10))
	for _, op := range doc.Operations[:cap(names)] {
		names = append(names, cmp.Or(op.Name, "(one without a name)"))
	}
	list := strings.Join(names, ", ")
	if len(doc.Operations) > len(names) {
		list += ", …"
	}
	if params.OperationName == "" {
		return withMessage(e, fmt.Sprintf("the document holds %d operations (%s): name the one to run in operationName", len(doc.Operations), list))
	}
	return withMessage(e, fmt.Sprintf("operationName %q names none of the document's operations (%s)", params.OperationName, list))
}

// variableError returns e, an error of op's variables vars coerced to
// their types in schema s, with a message naming the variable (and the
// place in its value), the type it wants and what it was given; any
// other error as it is.
func variableError(s *ast.Schema, op *ast.OperationDefinition, vars map[string]any, e *gqlerror.Error) *gqlerror.Error {
	if len(e.Path) < 2 || e.Path[0] != ast.PathName("variable") || e.Message == "must an input type" {
		return e
	}
	name, _ := e.Path[1].(ast.PathName)
	def := op.VariableDefinitions.ForName(string(name))
	if def == nil {
		return e
	}
	where, typ := "$"+string(name), def.Type
	val, given := vars[string(name)]
	for _, p := range e.Path[2:] {
		switch p := p.(type) {
		case ast.PathIndex:
			where += fmt.Sprintf("[%d]", p)
			if typ.Elem != nil {
				typ = typ.Elem
			}
			if list, ok := val.([]any); ok { // else a single value taken as a list of one
				val, given = nil, int(p) < len(list)
				if given {
					val = list[p]
				}
			}
		case ast.PathName:
			in := typ.Name()
			var field *ast.FieldDefinition
			if d := s.Types[in]; d != nil {
				field = d.Fields.ForName(string(p))
			}
			where += "." + string(p)
			if field == nil {
				return withMessage(e, fmt.Sprintf("variable %s: %s has no field %s", where, in, p))
			}
			m, _ := val.(map[string]any)
			val, given = m[string(p)]
			typ = field.Type
		}
	}
	switch {
	case !given && e.Message == "must be defined":
		return withMessage(e, fmt.Sprintf("variable %s: a value of type %s is required, and none was given", where, typ))
	case !given:
		return e
	}
	want := typ.String()
	if d := s.Types[typ.Name()]; d != nil && d.Kind == ast.Enum && typ.Elem == nil {
		values := make([]string, len(d.EnumValues))
		for i, v := range d.EnumValues {
			values[i] = v.Name
		}
		want += " (one of " + strings.Join(values, ", ") + ")"
	}
	return withMessage(e, fmt.Sprintf("variable %s: expected %s, got %s", where, want, describeValue(val)))
}

// strictVariables checks the variables vars of op, which gqlparser
// accepted, as GraphQL's input coercion has it and gqlparser does not: it
// takes a string for an Int or a Float ("30": JSON numbers and strings are
// one kind to it) and a number for a String (an asOf of 3 read the
// present), any whole number for an Int (3000000000), and an enum
// value in any case ("asc" for ASC), and it does not look at custom
// scalars. Each such value went on to be refused later as a field's error
// (data null, with a message about the argument rather than the
// variable), or was taken (a filter compared age with "30"). Refused here,
// it is a request error naming the variable, as gqlparser's own are. It
// returns nil when every variable fits.
func strictVariables(s *ast.Schema, op *ast.OperationDefinition, vars map[string]any) *gqlerror.Error {
	for _, def := range op.VariableDefinitions {
		v, ok := vars[def.Variable]
		if !ok {
			continue
		}
		if msg := strictValue(s, def.Type, v, &valuePath{name: "$" + def.Variable}); msg != "" {
			e := gqlerror.ErrorPathf(ast.Path{ast.PathName("variable"), ast.PathName(def.Variable)}, "%s", msg)
			errcode.Set(e, errcode.ValidationFailed)
			return e
		}
	}
	return nil
}

// valuePath is the place of a value in a variable ("$d[0].home"), said
// only in an error: a step is a field's name, or (name "") a list's
// index. Built as a string at each step, it cost a Sprintf for every
// element of a list of 90,000 ids.
type valuePath struct {
	parent *valuePath
	name   string
	index  int
}

func (p *valuePath) String() string {
	if p == nil {
		return ""
	}
	if p.name != "" {
		if p.parent == nil {
			return p.name
		}
		return p.parent.String() + "." + p.name
	}
	return fmt.Sprintf("%s[%d]", p.parent, p.index)
}

// strictValue returns what is wrong with value v of input type typ at
// where, "" when nothing is. Only what gqlparser let through is checked:
// the shape (lists, input objects, their fields, nulls) it checked
// already.
func strictValue(s *ast.Schema, typ *ast.Type, v any, where *valuePath) string {
	if v == nil {
		return ""
	}
	if typ.Elem != nil {
		// gqlparser's coercion may have made a slice of another type
		// (one value is a list of one).
		list := reflect.ValueOf(v)
		if list.Kind() != reflect.Slice {
			return strictValue(s, typ.Elem, v, &valuePath{parent: where})
		}
		elem := &valuePath{parent: where}
		for i := range list.Len() {
			elem.index = i
			if msg := strictValue(s, typ.Elem, list.Index(i).Interface(), elem); msg != "" {
				return msg
			}
		}
		return ""
	}
	def := s.Types[typ.NamedType]
	if def == nil {
		return ""
	}
	expected := func(what string) string {
		return fmt.Sprintf("variable %s: expected %s, got %s", where, what, describeValue(v))
	}
	switch def.Kind {
	case ast.InputObject:
		m, _ := v.(map[string]any)
		for _, f := range def.Fields {
			if fv, ok := m[f.Name]; ok {
				if msg := strictValue(s, f.Type, fv, &valuePath{parent: where, name: f.Name}); msg != "" {
					return msg
				}
			}
		}
	case ast.Enum:
		if e, ok := v.(string); !ok || def.EnumValues.ForName(e) == nil {
			values := make([]string, len(def.EnumValues))
			for i, ev := range def.EnumValues {
				values[i] = ev.Name
			}
			return expected(fmt.Sprintf("%s (one of %s)", typ, strings.Join(values, ", ")))
		}
	case ast.Scalar:
		if def.Name == sluice.ScalarString {
			// A JSON number passes gqlparser's check of a String (it is a
			// string to it), and what reads the argument as a string took
			// it for absent: an asOf of 3 read the present.
			if _, ok := v.(string); !ok {
				return expected(typ.String())
			}
			return ""
		}
		if msg := strictScalar(def.Name, v); msg != "" {
			return fmt.Sprintf("variable %s: %s", where, msg)
		}
	}
	return ""
}

// strictScalar returns what is wrong with v as a value of scalar name, ""
// when nothing is: Int a whole JSON number, Float any JSON
// number, ID a string or a whole number, DateTime an RFC 3339 string of
// years 1 to 9999 and at most microseconds (what documents and filters
// take), BigInt a whole number or a string of decimal digits. Boolean
// gqlparser checked, String strictValue; JSON is any value.
func strictScalar(name string, v any) string {
	// What v is, said only when it is wrong: formatting every valid value
	// cost a Sprintf each, 90,000 of them for a list of ids.
	got := func() string { return describeValue(v) }
	switch name {
	case sluice.ScalarInt:
		n, ok := v.(json.Number)
		if !ok {
			if _, isFloat := v.(float64); !isFloat {
				return "expected Int, got " + got()
			}
			n = json.Number(strconv.FormatFloat(v.(float64), 'f', -1, 64))
		}
		// Whole, of any size: limit and offset take any 64-bit count,
		// filters compare numbers exactly, and a document's Int field
		// names its own range when written.
		if f, err := strconv.ParseFloat(string(n), 64); err == nil && f != math.Trunc(f) {
			return "expected Int, got " + got()
		}
	case sluice.ScalarFloat:
		switch n := v.(type) {
		case json.Number:
			if _, err := strconv.ParseFloat(string(n), 64); err != nil {
				return fmt.Sprintf("%s is out of Float's range", got())
			}
		case float64:
		default:
			return "expected Float, got " + got()
		}
	case sluice.ScalarID:
		switch n := v.(type) {
		case string:
		case json.Number:
			if _, err := strconv.ParseInt(string(n), 10, 64); err != nil {
				return "expected ID (a string or a whole number), got " + got()
			}
		default:
			return "expected ID (a string or a whole number), got " + got()
		}
	case sluice.ScalarDateTime:
		const what = "DateTime (RFC 3339, such as 2024-08-01T16:00:00Z)"
		str, ok := v.(string)
		if !ok {
			return "expected " + what + ", got " + got()
		}
		t, err := time.Parse(time.RFC3339Nano, str)
		if err != nil {
			return "expected " + what + ", got " + got()
		}
		if t.Nanosecond()%1000 != 0 {
			return got() + " is more precise than a microsecond, the most a DateTime holds"
		}
		if u := t.UTC(); u.Year() < 1 || u.Year() > 9999 {
			return got() + " is out of DateTime's range (years 1 to 9999 in UTC)"
		}
	case sluice.ScalarBigInt:
		const what = "BigInt (a whole number or a string of decimal digits)"
		var digits string
		switch n := v.(type) {
		case json.Number:
			// A number may have a zero fraction (100.0) but no exponent,
			// as in a document and a filter literal.
			var frac string
			digits, frac, _ = strings.Cut(string(n), ".")
			if strings.Trim(frac, "0") != "" {
				return "expected " + what + ", got " + got()
			}
		case string:
			digits = n
		default:
			return "expected " + what + ", got " + got()
		}
		digits = strings.TrimPrefix(digits, "-")
		if digits == "" || strings.Trim(digits, "0123456789") != "" {
			return "expected " + what + ", got " + got()
		}
	}
	return ""
}

// withMessage returns a copy of e with message msg.
func withMessage(e *gqlerror.Error, msg string) *gqlerror.Error {
	out := *e
	out.Message = msg
	return &out
}

// describeValue says what a JSON value decoded from a request is, in the
// words of its JSON type, showing a scalar (a string cut to 40 bytes).
func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean %t", v)
	case json.Number:
		return "number " + v.String()
	case float64:
		return fmt.Sprintf("number %g", v)
	case string:
		if len(v) > 40 {
			cut := 40
			for cut > 0 && !utf8.RuneStart(v[cut]) {
				cut--
			}
			return fmt.Sprintf("string %q…", v[:cut])
		}
		return fmt.Sprintf("string %q", v)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "a value of another kind"
}

package graph

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
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

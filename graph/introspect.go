package graph

import (
	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/introspection"
	"github.com/vektah/gqlparser/v2/ast"
)

// introspect writes the root field __schema or __type(name:).
//
// Every loop of the writers below stops once w is over its bound (the
// caller then discards the answer and reports the bound), so that they
// visit at most one object per byte of it: an answer grows as the types
// times the square of a type's fields, times the aliases, and resolving
// it to the end after the bound cost seconds of CPU on a schema of a few
// dozen classes for nothing written.
func (x *execution) introspect(w *jsonWriter, cf graphql.CollectedField) {
	if cf.Name == "__schema" {
		x.writeSchema(w, x.es.intro, cf.Selections)
		return
	}
	name, _ := cf.ArgumentMap(x.op.Variables)["name"].(string)
	def := x.es.gql.Types[name]
	if def == nil {
		w.null()
		return
	}
	x.writeType(w, introspection.WrapTypeFromDef(x.es.gql, def), cf.Selections)
}

func (x *execution) writeSchema(w *jsonWriter, s *introspection.Schema, sel ast.SelectionSet) {
	x.introSteps++
	w.WriteByte('{')
	for i, cf := range x.fields(sel, "__Schema") {
		if w.over {
			return
		}
		w.key(cf.Alias, i == 0)
		switch cf.Name {
		case "__typename":
			w.str("__Schema")
		case "description":
			optStr(w, s.Description())
		case "types":
			types := s.Types()
			w.WriteByte('[')
			for j := range types {
				if w.over {
					return
				}
				if j > 0 {
					w.WriteByte(',')
				}
				x.writeType(w, &types[j], cf.Selections)
			}
			w.WriteByte(']')
		case "queryType":
			x.writeType(w, s.QueryType(), cf.Selections)
		case "mutationType":
			x.writeType(w, s.MutationType(), cf.Selections)
		case "subscriptionType":
			x.writeType(w, s.SubscriptionType(), cf.Selections)
		case "directives":
			ds := s.Directives()
			w.WriteByte('[')
			for j := range ds {
				if w.over {
					return
				}
				if j > 0 {
					w.WriteByte(',')
				}
				x.writeDirective(w, &ds[j], cf.Selections)
			}
			w.WriteByte(']')
		default:
			w.null()
		}
	}
	w.WriteByte('}')
}

func optStr(w *jsonWriter, s *string) {
	if s == nil {
		w.null()
		return
	}
	w.str(*s)
}

func includeDeprecated(x *execution, cf graphql.CollectedField) bool {
	b, _ := cf.ArgumentMap(x.op.Variables)["includeDeprecated"].(bool)
	return b
}

func (x *execution) writeType(w *jsonWriter, t *introspection.Type, sel ast.SelectionSet) {
	x.introSteps++
	if t == nil {
		w.null()
		return
	}
	w.WriteByte('{')
	for i, cf := range x.fields(sel, "__Type") {
		if w.over {
			return
		}
		w.key(cf.Alias, i == 0)
		switch cf.Name {
		case "__typename":
			w.str("__Type")
		case "kind":
			w.str(t.Kind())
		case "name":
			optStr(w, t.Name())
		case "description":
			optStr(w, t.Description())
		case "specifiedByURL":
			optStr(w, t.SpecifiedByURL())
		case "isOneOf":
			w.boolean(t.IsOneOf())
		case "fields":
			fs := t.Fields(includeDeprecated(x, cf))
			if fs == nil || !kindHas(t.Kind(), cf.Name) {
				w.null()
				continue
			}
			w.WriteByte('[')
			for j := range fs {
				if w.over {
					return
				}
				if j > 0 {
					w.WriteByte(',')
				}
				x.writeField(w, &fs[j], cf.Selections)
			}
			w.WriteByte(']')
		case "interfaces", "possibleTypes":
			var ts []introspection.Type
			if cf.Name == "interfaces" {
				ts = t.Interfaces()
			} else {
				// Object types only: an interface implementing
				// another is none of its possible types.
				for _, pt := range t.PossibleTypes() {
					if pt.Kind() == "OBJECT" {
						ts = append(ts, pt)
					}
				}
				if ts == nil && kindHas(t.Kind(), cf.Name) {
					ts = []introspection.Type{}
				}
			}
			if ts == nil || !kindHas(t.Kind(), cf.Name) {
				w.null()
				continue
			}
			w.WriteByte('[')
			for j := range ts {
				if w.over {
					return
				}
				if j > 0 {
					w.WriteByte(',')
				}
				x.writeType(w, &ts[j], cf.Selections)
			}
			w.WriteByte(']')
		case "enumValues":
			vs := t.EnumValues(includeDeprecated(x, cf))
			if vs == nil || !kindHas(t.Kind(), cf.Name) {
				w.null()
				continue
			}
			w.WriteByte('[')
			for j := range vs {
				if w.over {
					return
				}
				if j > 0 {
					w.WriteByte(',')
				}
				x.writeEnumValue(w, &vs[j], cf.Selections)
			}
			w.WriteByte(']')
		case "inputFields":
			vs := t.VisibleInputFields(includeDeprecated(x, cf))
			if vs == nil || !kindHas(t.Kind(), cf.Name) {
				w.null()
				continue
			}
			x.writeInputValues(w, vs, cf.Selections)
		case "ofType":
			x.writeType(w, t.OfType(), cf.Selections)
		default:
			w.null()
		}
	}
	w.WriteByte('}')
}

func (x *execution) writeField(w *jsonWriter, f *introspection.Field, sel ast.SelectionSet) {
	x.introSteps++
	w.WriteByte('{')
	for i, cf := range x.fields(sel, "__Field") {
		if w.over {
			return
		}
		w.key(cf.Alias, i == 0)
		switch cf.Name {
		case "__typename":
			w.str("__Field")
		case "name":
			w.str(f.Name)
		case "description":
			optStr(w, f.Description())
		case "args":
			x.writeInputValues(w, f.VisibleArgs(includeDeprecated(x, cf)), cf.Selections)
		case "type":
			x.writeType(w, f.Type, cf.Selections)
		case "isDeprecated":
			w.boolean(f.IsDeprecated())
		case "deprecationReason":
			optStr(w, f.DeprecationReason())
		default:
			w.null()
		}
	}
	w.WriteByte('}')
}

func (x *execution) writeInputValues(w *jsonWriter, vs []introspection.InputValue, sel ast.SelectionSet) {
	w.WriteByte('[')
	for j := range vs {
		if w.over {
			return
		}
		if j > 0 {
			w.WriteByte(',')
		}
		x.introSteps++
		v := &vs[j]
		w.WriteByte('{')
		for i, cf := range x.fields(sel, "__InputValue") {
			if w.over {
				return
			}
			w.key(cf.Alias, i == 0)
			switch cf.Name {
			case "__typename":
				w.str("__InputValue")
			case "name":
				w.str(v.Name)
			case "description":
				optStr(w, v.Description())
			case "type":
				x.writeType(w, v.Type, cf.Selections)
			case "defaultValue":
				optStr(w, v.DefaultValue)
			case "isDeprecated":
				w.boolean(v.IsDeprecated())
			case "deprecationReason":
				optStr(w, v.DeprecationReason())
			default:
				w.null()
			}
		}
		w.WriteByte('}')
	}
	w.WriteByte(']')
}

func (x *execution) writeEnumValue(w *jsonWriter, v *introspection.EnumValue, sel ast.SelectionSet) {
	x.introSteps++
	w.WriteByte('{')
	for i, cf := range x.fields(sel, "__EnumValue") {
		if w.over {
			return
		}
		w.key(cf.Alias, i == 0)
		switch cf.Name {
		case "__typename":
			w.str("__EnumValue")
		case "name":
			w.str(v.Name)
		case "description":
			optStr(w, v.Description())
		case "isDeprecated":
			w.boolean(v.IsDeprecated())
		case "deprecationReason":
			optStr(w, v.DeprecationReason())
		default:
			w.null()
		}
	}
	w.WriteByte('}')
}

func (x *execution) writeDirective(w *jsonWriter, d *introspection.Directive, sel ast.SelectionSet) {
	x.introSteps++
	w.WriteByte('{')
	for i, cf := range x.fields(sel, "__Directive") {
		if w.over {
			return
		}
		w.key(cf.Alias, i == 0)
		switch cf.Name {
		case "__typename":
			w.str("__Directive")
		case "name":
			w.str(d.Name)
		case "description":
			optStr(w, d.Description())
		case "locations":
			w.WriteByte('[')
			first := true
			for _, l := range d.Locations {
				if !specLocation(l) {
					continue
				}
				if !first {
					w.WriteByte(',')
				}
				first = false
				w.str(l)
			}
			w.WriteByte(']')
		case "args":
			x.writeInputValues(w, d.VisibleArgs(includeDeprecated(x, cf)), cf.Selections)
		case "isRepeatable":
			w.boolean(d.IsRepeatable)
		default:
			w.null()
		}
	}
	w.WriteByte('}')
}

// specLocation reports whether l is a directive location of the October 2021
// GraphQL specification. gqlparser's prelude also puts @deprecated on
// DIRECTIVE_DEFINITION, a location of a later draft: graphql-js 16 and
// graphql-core 3.2 (so Python's gql, and GraphiQL) reject the whole
// introspection result for one location they do not know, and no Sluice
// schema defines a directive, so that location is never used.
func specLocation(l string) bool {
	switch l {
	case "QUERY", "MUTATION", "SUBSCRIPTION", "FIELD", "FRAGMENT_DEFINITION", "FRAGMENT_SPREAD",
		"INLINE_FRAGMENT", "VARIABLE_DEFINITION", "SCHEMA", "SCALAR", "OBJECT", "FIELD_DEFINITION",
		"ARGUMENT_DEFINITION", "INTERFACE", "UNION", "ENUM", "ENUM_VALUE", "INPUT_OBJECT",
		"INPUT_FIELD_DEFINITION":
		return true
	}
	return false
}

// kindHas reports whether a type of kind has the __Type field, which the
// GraphQL spec has null for every other kind: fields and interfaces on
// objects and interfaces, possibleTypes on interfaces and unions,
// enumValues on enums, inputFields on input objects (gqlgen's
// introspection answers empty lists for them).
func kindHas(kind, field string) bool {
	switch field {
	case "fields", "interfaces":
		return kind == "OBJECT" || kind == "INTERFACE"
	case "possibleTypes":
		return kind == "INTERFACE" || kind == "UNION"
	case "enumValues":
		return kind == "ENUM"
	case "inputFields":
		return kind == "INPUT_OBJECT"
	}
	return true
}

package filter

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
)

// Expr is a node of a parsed filter: one of *And, *Or, *Not, *IDs, *Compare,
// *Ref, *Sub and *Quant.
type Expr interface{ expr() }

// And holds when every one of its expressions does (an empty And is true).
type And struct{ Exprs []Expr }

// Or holds when any of its expressions does (an empty Or is false).
type Or struct{ Exprs []Expr }

// Not holds when Expr does not.
type Not struct{ Expr Expr }

// IDs holds when the document's id is one of IDs.
type IDs struct{ IDs []string }

// Op is a comparison operator.
type Op string

// The comparison operators.
const (
	OpEq         Op = "eq"
	OpNe         Op = "ne"
	OpLt         Op = "lt"
	OpLe         Op = "le"
	OpGt         Op = "gt"
	OpGe         Op = "ge"
	OpRegex      Op = "regex"
	OpStartsWith Op = "startsWith"
)

// Compare compares a value with a constant. Field is the compared field of
// the current object; nil means the current value itself (an element of a
// list of scalars or enums, inside a Quant).
type Compare struct {
	Field *sluice.Field
	// Type is the type of the compared value (Field.Type when Field is set).
	Type  sluice.FieldType
	Op    Op
	Value Value
}

// Value is a filter constant, held in the forms its type compares by.
type Value struct {
	// Str is the value of a String, ID, enum or reference, the normalized
	// RFC 3339 text of a DateTime, the decimal text of a number, or the
	// pattern of a regex as the client wrote it.
	Str string
	// Num is the exact value of an Int or BigInt (and of a Float's decimal
	// text).
	Num *big.Rat
	// Float is the value of a Float: Floats compare as float64, like the
	// double precision columns that hold them.
	Float float64
	// Time is the instant of a DateTime.
	Time time.Time
	// Bool is the value of a Boolean.
	Bool bool
	// Regex is the compiled pattern of a regex.
	Regex *Regex
}

// Ref holds when the document that the single reference Field names exists
// and matches Expr (evaluated on that document, of class Class).
type Ref struct {
	Field *sluice.Field
	Class string
	Expr  Expr
}

// Sub holds when the single subdocument Field is present and matches Expr.
type Sub struct {
	Field *sluice.Field
	Class string
	Expr  Expr
}

// Quant holds when some (All false) or every (All true) element of the list
// Field matches Elem. Elem is evaluated on the element: a Compare with a nil
// Field for scalars and enums, a document of Field's class for references,
// a subdocument for subdocuments.
type Quant struct {
	Field *sluice.Field
	All   bool
	Elem  Expr
}

func (*And) expr()     {}
func (*Or) expr()      {}
func (*Not) expr()     {}
func (*IDs) expr()     {}
func (*Compare) expr() {}
func (*Ref) expr()     {}
func (*Sub) expr()     {}
func (*Quant) expr()   {}

// Parse checks input, the value of a <class>_Filter argument as gqlgen
// decodes it (map[string]any with string, bool, int64, float64,
// json.Number, []any and map[string]any values; nil means "not given"), and
// returns its typed form. A nil or empty input gives an empty *And (true).
// Every error is a CodeInvalid *sluice.Error naming the path of the bad
// entry, such as `filter.age.ge: expected an Int, got "x"`, including a
// filter over one of the limits (MaxTerms and the others), which names the
// limit and the path where the filter crossed it. Parse stops at the first
// error, so its work is bounded by the limits whatever the input's size.
func Parse(s *sluice.Schema, class string, input map[string]any) (Expr, error) {
	c := s.Class(class)
	if c == nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, "filter: unknown class %q", class)
	}
	p := &parser{s: s, regexes: map[string]*Regex{}}
	return p.object(c, input, "filter", 1)
}

type parser struct {
	s *sluice.Schema
	// terms counts the terms parsed so far, against MaxTerms.
	terms int
	// regexes holds the patterns compiled so far, against MaxRegexes; a
	// pattern given twice is compiled once.
	regexes map[string]*Regex
}

// term counts one term at path.
func (p *parser) term(path string) error {
	p.terms++
	if p.terms > MaxTerms {
		return errorf(path, "the filter has more than %d terms (the limit)", MaxTerms)
	}
	return nil
}

// enter checks the depth of the filter object at path.
func enter(path string, depth int) error {
	if depth > MaxDepth {
		return errorf(path, "the filter nests more than %d levels of objects (the limit)", MaxDepth)
	}
	return nil
}

func errorf(path, format string, args ...any) error {
	return sluice.Errorf(sluice.CodeInvalid, "%s: "+format, append([]any{path}, args...)...)
}

// sortedKeys returns m's keys sorted, so that errors and SQL are
// deterministic.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// object parses the filter of an object of class c (a document or a
// subdocument), the input object at path, depth objects deep.
func (p *parser) object(c *sluice.Class, input map[string]any, path string, depth int) (Expr, error) {
	if err := enter(path, depth); err != nil {
		return nil, err
	}
	and := &And{}
	for _, k := range sortedKeys(input) {
		v := input[k]
		if v == nil {
			continue
		}
		kp := path + "." + k
		if err := p.term(kp); err != nil {
			return nil, err
		}
		switch k {
		case "_and", "_or":
			items := List(v)
			var exprs []Expr
			for i, it := range items {
				ip := fmt.Sprintf("%s[%d]", kp, i)
				if err := p.term(ip); err != nil {
					return nil, err
				}
				m, ok := it.(map[string]any)
				if !ok {
					return nil, errorf(ip, "expected a %s_Filter object, got %s", c.Name, describe(it))
				}
				e, err := p.object(c, m, ip, depth+1)
				if err != nil {
					return nil, err
				}
				exprs = append(exprs, e)
			}
			if k == "_and" {
				and.Exprs = append(and.Exprs, &And{Exprs: exprs})
			} else {
				and.Exprs = append(and.Exprs, &Or{Exprs: exprs})
			}
		case "_not":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, errorf(kp, "expected a %s_Filter object, got %s", c.Name, describe(v))
			}
			e, err := p.object(c, m, kp, depth+1)
			if err != nil {
				return nil, err
			}
			and.Exprs = append(and.Exprs, &Not{Expr: e})
		case "_id", "_ids":
			if c.Kind == sluice.KindSubdocument {
				return nil, errorf(kp, "a subdocument has no id")
			}
			ids, err := parseIDs(p.s, c.Name, k, v, kp)
			if err != nil {
				return nil, err
			}
			and.Exprs = append(and.Exprs, &IDs{IDs: ids})
		default:
			f := c.Field(k)
			if f == nil {
				return nil, errorf(kp, "%s has no field %s", c.Name, k)
			}
			m, ok := v.(map[string]any)
			if !ok {
				return nil, errorf(kp, "expected a filter object, got %s", describe(v))
			}
			e, err := p.field(f, m, kp, depth+1)
			if err != nil {
				return nil, err
			}
			and.Exprs = append(and.Exprs, e)
		}
	}
	return and, nil
}

// List returns the elements of v (not nil), the value of a list-typed
// GraphQL input: a filter's _and, _or or _ids, or an argument (graph's
// listArg). GraphQL's input coercion lets a single value stand for a list
// of one, and gqlgen validates it so: a literal `_ids: "Person/bob"`
// arrives as the string itself, and a variable's single value as a typed
// slice of its own ([]string, []map[string]any), neither of them a []any,
// and both were refused as "expected a list".
func List(v any) []any {
	if items, ok := v.([]any); ok {
		return items
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
		items := make([]any, rv.Len())
		for i := range items {
			items[i] = rv.Index(i).Interface()
		}
		return items
	}
	return []any{v}
}

// IDString returns v, the value of an argument or input field of type
// ID, as the string it stands for: a string, or an integer (GraphQL's ID
// takes both, "4" and 4 alike; gqlgen leaves a literal an int64 and a
// variable a json.Number). Anything else, a float among them, is not an
// ID.
func IDString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return string(x), true
		}
	}
	return "", false
}

// parseIDs parses the value of _id (one ID) or _ids (a list of at most
// MaxIDs) in a filter of class, each id as QualifyID takes it: a key is
// of class, and another class's id is refused.
func parseIDs(s *sluice.Schema, class, key string, v any, path string) ([]string, error) {
	if key == "_id" {
		id, ok := IDString(v)
		if !ok {
			return nil, errorf(path, "expected an ID, got %s", describe(v))
		}
		if err := checkText(path, id); err != nil {
			return nil, err
		}
		full, err := QualifyID(s, class, id)
		if err != nil {
			return nil, errorf(path, "%s", err)
		}
		return []string{full}, nil
	}
	items := List(v)
	if len(items) > MaxIDs {
		return nil, errorf(path, "the list has %d ids, more than %d ids (the limit)", len(items), MaxIDs)
	}
	ids := make([]string, 0, len(items))
	for i, it := range items {
		ip := fmt.Sprintf("%s[%d]", path, i)
		id, ok := IDString(it)
		if !ok {
			return nil, errorf(ip, "expected an ID, got %s", describe(it))
		}
		if err := checkText(ip, id); err != nil {
			return nil, err
		}
		full, err := QualifyID(s, class, id)
		if err != nil {
			return nil, errorf(ip, "%s", err)
		}
		ids = append(ids, full)
	}
	return ids, nil
}

// field parses the filter of field f, the input object at path, depth
// objects deep.
func (p *parser) field(f *sluice.Field, input map[string]any, path string, depth int) (Expr, error) {
	if err := enter(path, depth); err != nil {
		return nil, err
	}
	if f.Type.Kind == sluice.TypeScalar && f.Type.Name == sluice.ScalarJSON {
		return nil, errorf(path, "JSON fields cannot be filtered on")
	}
	if f.List {
		and := &And{}
		for _, k := range sortedKeys(input) {
			v := input[k]
			if v == nil {
				continue
			}
			kp := path + "." + k
			if err := p.term(kp); err != nil {
				return nil, err
			}
			if k != "someHave" && k != "allHave" {
				return nil, errorf(kp, "unknown list operator %s: use someHave or allHave", k)
			}
			m, ok := v.(map[string]any)
			if !ok {
				return nil, errorf(kp, "expected a filter object, got %s", describe(v))
			}
			elem, err := p.element(f, m, kp, depth+1)
			if err != nil {
				return nil, err
			}
			and.Exprs = append(and.Exprs, &Quant{Field: f, All: k == "allHave", Elem: elem})
		}
		return and, nil
	}
	switch f.Type.Kind {
	case sluice.TypeReference:
		// The field's input object is the referenced document's filter.
		e, err := p.object(p.s.Class(f.Type.Name), input, path, depth)
		if err != nil {
			return nil, err
		}
		return &Ref{Field: f, Class: f.Type.Name, Expr: e}, nil
	case sluice.TypeSubdocument:
		e, err := p.object(p.s.Class(f.Type.Name), input, path, depth)
		if err != nil {
			return nil, err
		}
		return &Sub{Field: f, Class: f.Type.Name, Expr: e}, nil
	}
	return p.compares(f, f.Type, input, path)
}

// element parses the filter of one element of the list field f, the input
// object at path, depth objects deep.
func (p *parser) element(f *sluice.Field, input map[string]any, path string, depth int) (Expr, error) {
	switch f.Type.Kind {
	case sluice.TypeReference, sluice.TypeSubdocument:
		return p.object(p.s.Class(f.Type.Name), input, path, depth)
	}
	if err := enter(path, depth); err != nil {
		return nil, err
	}
	return p.compares(nil, f.Type, input, path)
}

// compares parses the operators of a scalar or enum filter.
func (p *parser) compares(f *sluice.Field, t sluice.FieldType, input map[string]any, path string) (Expr, error) {
	and := &And{}
	allowed := scalarOps(t)
	for _, k := range sortedKeys(input) {
		v := input[k]
		if v == nil {
			continue
		}
		kp := path + "." + k
		if err := p.term(kp); err != nil {
			return nil, err
		}
		op := Op(k)
		if !slices.Contains(allowed, op) {
			return nil, errorf(kp, "unknown operator %s for %s: use one of %s", k, t.Name, joinOps(allowed))
		}
		val, err := p.value(t, op, v, kp)
		if err != nil {
			return nil, err
		}
		and.Exprs = append(and.Exprs, &Compare{Field: f, Type: t, Op: op, Value: val})
	}
	return and, nil
}

func joinOps(ops []Op) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}

// scalarOps returns the operators a value of type t can be filtered with.
func scalarOps(t sluice.FieldType) []Op {
	if t.Kind == sluice.TypeEnum {
		return []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe}
	}
	switch t.Name {
	case sluice.ScalarString:
		return []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe, OpRegex, OpStartsWith}
	case sluice.ScalarBoolean, sluice.ScalarID:
		return []Op{OpEq, OpNe}
	}
	return []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe}
}

// checkText refuses a string that Postgres text cannot hold, so that it is
// a bad request rather than a failed statement.
func checkText(path, s string) error {
	if !utf8.ValidString(s) {
		return errorf(path, "the string is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errorf(path, "the string holds a NUL character (\\u0000), which no stored string can")
	}
	return nil
}

// regex compiles the pattern of a regex operator at path.
func (p *parser) regex(pattern, path string) (*Regex, error) {
	if re, ok := p.regexes[pattern]; ok {
		return re, nil
	}
	if len(p.regexes) == MaxRegexes {
		return nil, errorf(path, "the filter has more than %d different regexes (the limit)", MaxRegexes)
	}
	re, err := compileRegex(pattern)
	if err != nil {
		return nil, errorf(path, "%v", err)
	}
	p.regexes[pattern] = re
	return re, nil
}

// value converts the constant v of an operator on type t.
func (p *parser) value(t sluice.FieldType, op Op, v any, path string) (Value, error) {
	if op == OpRegex || op == OpStartsWith {
		s, ok := v.(string)
		if !ok {
			return Value{}, errorf(path, "expected a String, got %s", describe(v))
		}
		if op == OpStartsWith {
			if err := checkText(path, s); err != nil {
				return Value{}, err
			}
			return Value{Str: s}, nil
		}
		re, err := p.regex(s, path)
		if err != nil {
			return Value{}, err
		}
		return Value{Str: s, Regex: re}, nil
	}
	if t.Kind == sluice.TypeEnum {
		s, ok := v.(string)
		e := p.s.Enums[t.Name]
		if !ok || e == nil || !e.Has(s) {
			return Value{}, errorf(path, "expected a value of enum %s, got %s", t.Name, describe(v))
		}
		return Value{Str: s}, nil
	}
	switch t.Name {
	case sluice.ScalarString, sluice.ScalarID:
		s, ok := v.(string)
		if t.Name == sluice.ScalarID {
			s, ok = IDString(v) // 4 stands for "4"
		}
		if !ok {
			return Value{}, errorf(path, "expected a %s, got %s", t.Name, describe(v))
		}
		if err := checkText(path, s); err != nil {
			return Value{}, err
		}
		return Value{Str: s}, nil
	case sluice.ScalarBoolean:
		b, ok := v.(bool)
		if !ok {
			return Value{}, errorf(path, "expected a Boolean, got %s", describe(v))
		}
		return Value{Bool: b}, nil
	case sluice.ScalarDateTime:
		s, ok := v.(string)
		if !ok {
			return Value{}, errorf(path, "expected a DateTime (RFC 3339 string), got %s", describe(v))
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || tm.Year() < 1 || tm.Year() > 9999 {
			return Value{}, errorf(path, "expected a DateTime (RFC 3339 string), got %s", describe(s))
		}
		if tm.Nanosecond()%1000 != 0 {
			// Postgres keeps microseconds: a finer instant would match in
			// SQL as its truncation and in memory (streams) as itself. A
			// document's DateTime is refused the same way.
			return Value{}, errorf(path, "expected a DateTime (RFC 3339 string) of at most microsecond precision, got %s", describe(s))
		}
		tm = tm.UTC()
		return Value{Str: tm.Format(time.RFC3339Nano), Time: tm}, nil
	case sluice.ScalarInt, sluice.ScalarFloat, sluice.ScalarBigInt:
		if !numberSized(v) {
			return Value{}, errorf(path, "the number is longer than %d characters or its exponent is beyond ±%d (the limit)", MaxNumberBytes, MaxNumberBytes)
		}
		r, ok := number(v)
		if !ok {
			return Value{}, errorf(path, "expected a %s, got %s", t.Name, describe(v))
		}
		if t.Name != sluice.ScalarFloat && (!r.IsInt() || hasExponent(v)) {
			// As a document's Int or BigInt is written: digits, with at
			// most a zero fraction (100.0), no exponent (1E2); a
			// variable is held to the same.
			return Value{}, errorf(path, "expected a whole number for %s (decimal digits, without an exponent), got %s", t.Name, describe(v))
		}
		f, _ := r.Float64()
		return Value{Num: r, Float: f, Str: ratString(r, t.Name)}, nil
	}
	return Value{}, errorf(path, "%s values cannot be filtered on", t.Name)
}

// hasExponent reports whether v is a number's text with an exponent.
func hasExponent(v any) bool {
	n, ok := v.(json.Number)
	return ok && strings.ContainsAny(string(n), "eE")
}

// numberSized reports whether v, if it is a number's text, is short enough
// for number to convert it exactly at a bounded cost.
func numberSized(v any) bool {
	var s string
	switch n := v.(type) {
	case json.Number:
		s = string(n)
	case string:
		s = n
	default:
		return true
	}
	if len(s) > MaxNumberBytes {
		return false
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.Atoi(s[i+1:])
	return err == nil && exp >= -MaxNumberBytes && exp <= MaxNumberBytes
}

// ratString returns the decimal text of r for SQL parameters.
func ratString(r *big.Rat, scalar string) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// number returns the exact value of a number as a filter constant or a
// document value holds it. Floats are taken by their shortest decimal text,
// as JSON and Postgres numeric see them.
func number(v any) (*big.Rat, bool) {
	switch n := v.(type) {
	case int64:
		return new(big.Rat).SetInt64(n), true
	case int:
		return new(big.Rat).SetInt64(int64(n)), true
	case int32:
		return new(big.Rat).SetInt64(int64(n)), true
	case float64:
		return new(big.Rat).SetString(strconv.FormatFloat(n, 'g', -1, 64))
	case json.Number:
		return new(big.Rat).SetString(string(n))
	case string: // BigInt values are stored as decimal strings
		// Only decimal digits, as a document's BigInt is written: SetString
		// also reads "0x10", "1/3" and binary exponents ("0x1p9999999",
		// whose decimal text is 3 million digits, a second of CPU each).
		digits := strings.TrimPrefix(n, "-")
		if digits == "" || len(n) > 200000 || strings.Trim(digits, "0123456789") != "" {
			return nil, false
		}
		return new(big.Rat).SetString(n)
	}
	return nil, false
}

// describe names a value's JSON type for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return strconv.Quote(x)
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case int64, int, int32, float64, json.Number:
		return fmt.Sprintf("the number %v", x)
	}
	return fmt.Sprintf("a %T", v)
}

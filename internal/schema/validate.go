package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice"
)

// ValidateDocument checks one document against s and returns it normalized.
// raw is a JSON object decoded with json.Decoder.UseNumber, so its values
// are json.Number, string, bool, nil, []any and map[string]any; float64,
// int, int64 and json.RawMessage are accepted too, so that a document
// ValidateDocument returned validates again to itself.
//
// "@type" must name a class with documents of its own. "@id" is optional:
// when absent (or null) Document.ID is "" and the caller makes one; "key"
// becomes "Type/key"; "Type/key" must name the document's own class (an
// "@id" with a "/" is always read as "Type/key", so a key containing "/"
// must be written in full). "@version", optional, is the version a write
// expects the stored document to have (Document.Expect): a non-empty
// string, or null for none. Other
// keys starting with "@" and fields the class does not have are errors. A
// required field must be present and not null; null for an optional field
// means absent.
//
// Values are normalized as sluice.Document describes:
//   - String, ID: a JSON string (valid UTF-8, no NUL characters, which
//     Postgres cannot store).
//   - Int: a JSON number that is a whole number from -2^31 to 2^31-1, written
//     without an exponent; a zero fraction is accepted (3.0 is 3, because
//     some encoders write whole floats that way) but 3.5, 3e0 and "3" are
//     errors. Stored as int64.
//   - Float: any JSON number within float64 range, stored as float64.
//   - Boolean: true or false.
//   - DateTime: an RFC 3339 string with any offset and at most microsecond
//     precision (what Postgres stores), stored in UTC as time.RFC3339Nano;
//     years 1 to 9999.
//   - BigInt: a whole JSON number (as for Int, without the range) or a
//     string of decimal digits with an optional "-", at most 131072 digits
//     (as Postgres numeric); stored as its canonical decimal string.
//   - JSON: any JSON value that Postgres jsonb can store (no NUL characters
//     in strings, numbers within the range of numeric), stored as compact
//     json.RawMessage.
//   - enum: a string that is one of the enum's values.
//   - reference: "Class/key" where Class is the field's class or a class
//     with documents that inherits from it; {"@id": "Class/key"} is the same.
//   - subdocument: an object checked like a document of the subdocument
//     class; its "@type" may be left out and must be that class if given; it
//     has no "@id". The normalized map carries "@type".
//   - list: a JSON array of such values, none of them null.
//
// Every error is a CodeInvalid *sluice.Error naming the class and the field
// path, as in `Person: field "friends[2]": expected a reference to Person
// ("Person/<key>"), got number 3`; the caller adds which document it was.
func ValidateDocument(s *sluice.Schema, raw map[string]any) (*sluice.Document, error) {
	return validateDocument(s, raw, nil)
}

// validateDocument is ValidateDocument, or ValidateKept when hidden is not
// nil.
func validateDocument(s *sluice.Schema, raw map[string]any, hidden func(*sluice.Field) bool) (*sluice.Document, error) {
	t, ok := raw["@type"]
	if !ok || t == nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, `document has no "@type"`)
	}
	name, ok := t.(string)
	if !ok {
		return nil, sluice.Errorf(sluice.CodeInvalid, `"@type" must be a string, got %s`, describe(t))
	}
	if err := CheckDocumentClass(s, name); err != nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, `invalid "@type": %s`, sluice.ErrorMessage(err))
	}
	doc := &sluice.Document{Type: name}
	if v := raw["@id"]; v != nil {
		id, ok := v.(string)
		if !ok {
			return nil, sluice.Errorf(sluice.CodeInvalid, `%s: "@id" must be a string, got %s`, name, describe(v))
		}
		full, err := normalizeID(s, name, id)
		if err != nil {
			return nil, err
		}
		doc.ID = full
	}
	if v := raw["@version"]; v != nil {
		version, ok := v.(string)
		if !ok || version == "" {
			return nil, sluice.Errorf(sluice.CodeInvalid, `%s: "@version" must be a version string as Sluice gave it (or null), got %s`, name, describe(v))
		}
		doc.Expect.Version = version
	}
	v := &validator{schema: s, root: name, hidden: hidden}
	fields, err := v.object(s.Class(name), raw, "")
	if err != nil {
		return nil, err
	}
	if nesting(fields) > MaxDepth { // fields are the document's own object
		return nil, sluice.Errorf(sluice.CodeInvalid, "%s: the document nests deeper than %d levels of objects and arrays (its own object counted), the most a document may", name, MaxDepth)
	}
	n := countValues(fields) - 1 // its own object not counted
	switch {
	case hidden == nil && n > MaxValues:
		return nil, sluice.Errorf(sluice.CodeInvalid, "%s: the document holds %d values in its fields (every string, number, boolean, null, list and object counted, at any depth), more than %d, the most a document may", name, n, MaxValues)
	case n-v.kept > MaxValues:
		return nil, sluice.Errorf(sluice.CodeInvalid, "%s: the document holds %d values in the fields your role reads or the write gives (every string, number, boolean, null, list and object counted, at any depth), more than %d, the most a document may", name, n-v.kept, MaxValues)
	case n > MaxValues:
		return nil, sluice.Errorf(sluice.CodeInvalid, "%s: with the values it keeps of fields your role cannot read, the document would hold more than %d values (every string, number, boolean, null, list and object counted, at any depth), the most a document may", name, MaxValues)
	}
	doc.Fields = fields
	return doc, nil
}

// Kept holds a value of a document being written that the write keeps as
// stored and that its writer's role cannot read (ValidateKept).
type Kept struct{ Value any }

// ValidateKept is ValidateDocument for a write by a role that cannot read
// the fields hidden reports, of a document raw that holds, as Kept, the
// stored values of such fields that the write keeps (those a replace
// leaves out, those a merge patch does not name). Its errors tell the
// writer nothing of those values, which it never saw and may not learn:
// one that is not valid now (stored before a schema change that refuses
// it, or in SQL) or nests too deep, or a required hidden field missing, is
// an error naming neither the field nor the value; the values counted
// against MaxValues are those the writer reads or gives, and a document
// that only the kept values take past it is refused without counting them.
// What the writer gives of hidden fields itself is checked as
// ValidateDocument checks it.
func ValidateKept(s *sluice.Schema, raw map[string]any, hidden func(*sluice.Field) bool) (*sluice.Document, error) {
	return validateDocument(s, raw, hidden)
}

// MaxDepth is the deepest a document may nest objects and arrays, its own
// object counted (subdocuments, lists and JSON values all nest). Every
// reader of the log decodes documents inside arrays of images, and Go's
// JSON decoder refuses more than 10,000 levels: an image it cannot read
// would stop its database's streams. Migration 17 refuses the same of a
// row written in SQL.
const MaxDepth = 512

// MaxValues is the most values a document may hold in its fields: every
// field's value, and every element, member and value inside a list, a
// subdocument or a JSON value (a subdocument's "@type" too), at any depth.
// Reading a document in GraphQL builds a value for each (about 140 bytes
// apiece, where "0," takes 2 bytes of a body; REST reads rewrite the
// row's text instead), so this bounds what one document costs such a
// read to about 140 MB whatever its bytes; a byte limit alone
// (16 MiB for a row written in SQL, the request body for the API) lets a
// list of small numbers cost 30 times its size. Migration 28 refuses the
// same of a row written in SQL; a stored value past it reads as missing
// (see the postgres package's rowToDocument).
const MaxValues = 1_000_000

// countValues returns how many values v, a validated value, holds: one,
// and those inside it.
func countValues(v any) int {
	n := 1
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			n += countValues(e)
		}
	case []any:
		for _, e := range x {
			n += countValues(e)
		}
	case json.RawMessage:
		n = CountJSONValues(x)
	}
	return n
}

// CountJSONValues returns how many values b, valid JSON text, holds: one
// for b's own value and one for each element and member value inside it,
// at any depth. It reads b once and allocates nothing.
func CountJSONValues(b []byte) int {
	c := valueCounter{n: 1}
	c.count(b)
	return c.n
}

// valueCounter counts the values of JSON text read in pieces: a non-empty
// array or object of k entries has k-1 commas, so the count is one, plus
// the commas outside strings, plus the non-empty arrays and objects.
type valueCounter struct {
	n                         int
	inString, escaped, opened bool
}

func (c *valueCounter) count(b []byte) {
	for _, ch := range b {
		switch {
		case c.escaped:
			c.escaped = false
			continue
		case c.inString:
			c.escaped, c.inString = ch == '\\', ch != '"'
			continue
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			continue
		}
		if c.opened && ch != ']' && ch != '}' {
			c.n++ // the container just opened is not empty
		}
		c.opened = false
		switch ch {
		case '"':
			c.inString = true
		case ',':
			c.n++
		case '[', '{':
			c.opened = true
		}
	}
}

// LimitValues returns a reader of r's JSON text that fails, with a
// CodeInvalid error naming the bound, once the text holds more than max
// values (counted as CountJSONValues counts): decoding a body builds a
// value for each, about twenty times the bytes of a small one, so a body
// is counted as it is read, before it is decoded (json.Decoder reads a
// whole value before it decodes any of it). what names the text in the
// error ("the patch").
func LimitValues(r io.Reader, max int, what string) io.Reader {
	return &valuesReader{r: r, max: max, what: what, c: valueCounter{n: 1}}
}

type valuesReader struct {
	r    io.Reader
	max  int
	what string
	c    valueCounter
}

func (v *valuesReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.c.count(p[:n])
	if v.c.n > v.max {
		return n, sluice.Errorf(sluice.CodeInvalid, "%s holds more than %d values (every string, number, boolean, null, list and object counted, at any depth), the most a document may", v.what, MaxValues)
	}
	return n, err
}

// nesting returns how deep v, a validated value (ValidateDocument's
// fields), nests objects and arrays: 0 for a scalar.
func nesting(v any) int {
	deepest := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			deepest = max(deepest, nesting(e))
		}
		return 1 + deepest
	case []any:
		for _, e := range x {
			deepest = max(deepest, nesting(e))
		}
		return 1 + deepest
	case json.RawMessage: // a JSON value, valid JSON text
		depth, inString, escaped := 0, false, false
		for _, c := range x {
			switch {
			case escaped:
				escaped = false
			case inString:
				escaped, inString = c == '\\', c != '"'
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
				deepest = max(deepest, depth)
			case c == '}' || c == ']':
				depth--
			}
		}
		return deepest
	}
	return 0
}

// validator checks the fields of one document.
type validator struct {
	schema *sluice.Schema
	// root is the document's class, the prefix of every error.
	root string
	// hidden, for ValidateKept, reports the fields the writer's role
	// cannot read; kept counts the values of the Kept ones.
	hidden func(*sluice.Field) bool
	kept   int
	// grown is how many bytes longer than written the numbers of the
	// document's JSON values are in plain decimal form (MaxNumberGrowth).
	grown int
}

// errKept is the error of a document whose kept values, or a required
// field hidden from the writer, make it invalid: it names nothing the
// writer cannot read.
func (v *validator) errKept() error {
	return sluice.Errorf(sluice.CodeInvalid, "%s: a field your role cannot read would not be valid (a value kept as stored that the schema no longer allows, or a required one missing): a role that reads every field must write the document", v.root)
}

// keptValue checks and normalizes k, the kept value of field f at path.
// Its depth is checked here, where its place in the document is known
// (1 for the document's object, and one for each object and list
// around the value), so that only the writer's own values can fail the
// document's check of depth.
func (v *validator) keptValue(f *sluice.Field, k Kept, path string) (any, error) {
	if k.Value == nil {
		return nil, v.errKept()
	}
	grown := v.grown // kept values were stored, so were bounded then
	nv, err := v.value(f, k.Value, path)
	v.grown = grown
	if err != nil || 1+strings.Count(path, ".")+strings.Count(path, "[")+nesting(nv) > MaxDepth {
		return nil, v.errKept()
	}
	v.kept += countValues(nv)
	return nv, nil
}

// errorf returns a CodeInvalid error about the field at path.
func (v *validator) errorf(path, format string, args ...any) error {
	return sluice.Errorf(sluice.CodeInvalid, "%s: field %q: %s", v.root, path, fmt.Sprintf(format, args...))
}

// object checks the fields of m, a document or subdocument of class c whose
// path is prefix ("" for the document itself, "home." for a subdocument in
// field home).
func (v *validator) object(c *sluice.Class, m map[string]any, prefix string) (map[string]any, error) {
	if err := v.checkKeys(c, m, prefix); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(c.Fields)+1)
	for _, f := range c.Fields {
		val, ok := m[f.Name]
		if k, kept := val.(Kept); kept && v.hidden != nil {
			nv, err := v.keptValue(f, k, prefix+f.Name)
			if err != nil {
				return nil, err
			}
			out[f.Name] = nv
			continue
		}
		switch {
		case !ok && f.Required && v.hidden != nil && v.hidden(f):
			return nil, v.errKept()
		case !ok && f.Required:
			return nil, v.errorf(prefix+f.Name, "required field is missing")
		case val == nil && f.Required:
			return nil, v.errorf(prefix+f.Name, "required field is null")
		case val == nil:
			continue
		}
		nv, err := v.value(f, val, prefix+f.Name)
		if err != nil {
			return nil, err
		}
		out[f.Name] = nv
	}
	return out, nil
}

// checkKeys reports the first key of m, in byte order so the error does not
// depend on map order, that is not a field of c: an unknown field or "@"
// key. A document may have "@id" and "@type", a subdocument only "@type"
// (checked by the caller).
func (v *validator) checkKeys(c *sluice.Class, m map[string]any, prefix string) error {
	// Counting the keys that are fields costs one map lookup per field, so
	// valid input is checked in linear time; only an error pays for more.
	known := 0
	for _, f := range c.Fields {
		if _, ok := m[f.Name]; ok {
			known++
		}
	}
	if _, ok := m["@type"]; ok {
		known++
	}
	if c.Kind != sluice.KindSubdocument {
		if _, ok := m["@id"]; ok {
			known++
		}
		if _, ok := m["@version"]; ok && prefix == "" {
			known++
		}
	}
	if known == len(m) {
		return nil
	}
	fields := make(map[string]bool, len(c.Fields))
	for _, f := range c.Fields {
		fields[f.Name] = true
	}
	bad := ""
	found := false
	for k := range m {
		ok := fields[k] || k == "@type" || (k == "@id" && c.Kind != sluice.KindSubdocument) || (k == "@version" && c.Kind != sluice.KindSubdocument && prefix == "")
		if !ok && (!found || k < bad) {
			bad, found = k, true
		}
	}
	switch {
	case bad == "@id":
		return v.errorf(strings.TrimSuffix(prefix, "."), `a subdocument has no "@id"`)
	case strings.HasPrefix(bad, "@") && c.Kind == sluice.KindSubdocument:
		return sluice.Errorf(sluice.CodeInvalid, "%s: unknown key %s: in a subdocument only \"@type\" starts with @", v.root, quote(prefix+bad))
	case strings.HasPrefix(bad, "@"):
		return sluice.Errorf(sluice.CodeInvalid, "%s: unknown key %s: only \"@id\", \"@type\" and \"@version\" start with @", v.root, quote(prefix+bad))
	}
	return sluice.Errorf(sluice.CodeInvalid, "%s: unknown field %s: %s has no such field", v.root, quote(prefix+bad), c.Name)
}

// value checks and normalizes the value of field f.
func (v *validator) value(f *sluice.Field, val any, path string) (any, error) {
	if !f.List {
		return v.element(f.Type, val, path)
	}
	list, ok := val.([]any)
	if !ok {
		return nil, v.errorf(path, "expected a list of %s, got %s", f.Type.Name, describe(val))
	}
	out := make([]any, len(list))
	for i, e := range list {
		p := path + "[" + strconv.Itoa(i) + "]"
		if e == nil {
			return nil, v.errorf(p, "list elements cannot be null")
		}
		nv, err := v.element(f.Type, e, p)
		if err != nil {
			return nil, err
		}
		out[i] = nv
	}
	return out, nil
}

// element checks and normalizes one value of type t.
func (v *validator) element(t sluice.FieldType, val any, path string) (any, error) {
	switch t.Kind {
	case sluice.TypeEnum:
		e := v.schema.Enums[t.Name]
		if s, ok := val.(string); ok && e.Has(s) {
			return s, nil
		}
		return nil, v.errorf(path, "expected %s (one of %s), got %s", t.Name, enumValues(e), describe(val))
	case sluice.TypeReference:
		return v.reference(t.Name, val, path)
	case sluice.TypeSubdocument:
		return v.subdocument(t.Name, val, path)
	}
	nv, err := scalar(t.Name, val, &v.grown)
	if err != nil {
		// Declared here, not above: &e makes it escape, an allocation
		// per value even when there is no error.
		var e *sluice.Error
		if errors.As(err, &e) {
			return nil, v.errorf(path, "%s", e.Message)
		}
	}
	if v.grown > MaxNumberGrowth {
		return nil, v.errorf(path, "with the JSON values before it, the document's JSON numbers are more than %d bytes longer in plain decimal form, as reads answer them (1e100 is 101 digits), than written, the most a document may", MaxNumberGrowth)
	}
	return nv, err
}

// reference checks a reference to a document of class (or a subclass).
func (v *validator) reference(class string, val any, path string) (string, error) {
	if m, ok := val.(map[string]any); ok {
		id, ok := m["@id"]
		if !ok || len(m) != 1 {
			return "", v.errorf(path, `a reference object has exactly one key, "@id"`)
		}
		val = id
	}
	id, ok := val.(string)
	if !ok {
		return "", v.errorf(path, "expected a reference to %s (\"%s/<key>\"), got %s", class, class, describe(val))
	}
	target, _, err := ParseID(v.schema, id)
	if err != nil {
		return "", v.errorf(path, "%s", sluice.ErrorMessage(err))
	}
	if !inherits(v.schema, target, class) {
		return "", v.errorf(path, "%s: class %s is neither %s nor a subclass of it", quote(id), target, class)
	}
	return id, nil
}

// inherits reports whether class sub is ancestor or inherits from it.
// Unlike sluice.Schema.IsA it visits each class once, so a schema full of
// diamonds (each level implementing both interfaces of the level above)
// costs linear, not exponential, time.
func inherits(s *sluice.Schema, sub, ancestor string) bool {
	if sub == ancestor {
		return true
	}
	seen := map[string]bool{sub: true}
	stack := []string{sub}
	for len(stack) > 0 {
		c := s.Classes[stack[len(stack)-1]]
		stack = stack[:len(stack)-1]
		if c == nil {
			continue
		}
		for _, p := range c.Parents {
			if p == ancestor {
				return true
			}
			if !seen[p] {
				seen[p] = true
				stack = append(stack, p)
			}
		}
	}
	return false
}

// subdocument checks an embedded subdocument of class name.
func (v *validator) subdocument(name string, val any, path string) (map[string]any, error) {
	m, ok := val.(map[string]any)
	if !ok {
		return nil, v.errorf(path, "expected subdocument %s (an object), got %s", name, describe(val))
	}
	if t := m["@type"]; t != nil && t != name {
		return nil, v.errorf(path, `"@type" must be %s, got %s`, quote(name), describe(t))
	}
	out, err := v.object(v.schema.Class(name), m, path+".")
	if err != nil {
		return nil, err
	}
	out["@type"] = name
	return out, nil
}

// enumValues lists e's values for a message, shortened for long enums.
func enumValues(e *sluice.Enum) string {
	const max = 10
	if len(e.Values) <= max {
		return strings.Join(e.Values, ", ")
	}
	return strings.Join(e.Values[:max], ", ") + ", …"
}

// describe names the JSON type and, for scalars, the value of val, for
// messages such as `expected Int, got string "x"`.
func describe(val any) string {
	switch x := val.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case string:
		return "string " + quote(x)
	case []any:
		return "list"
	case map[string]any:
		return "object"
	case json.RawMessage:
		return "JSON"
	}
	if n, ok := number(val); ok {
		return "number " + shorten(n)
	}
	return fmt.Sprintf("%T", val)
}

// MaxNumberGrowth is how many bytes longer than written the numbers of a
// document's JSON values may be, together, in the plain decimal form in
// which Postgres's jsonb prints them, and so every read of the document
// answers them (1e131000, 8 bytes, is 131,001 digits): as much as a row
// written in SQL may hold whole. Without it a document's reads grew
// without bound by the bytes written: 9 KB of 1e131000 was read back as
// 131 MB, and four such reads at once took the daemon to 2.3 GB. Any
// float64 a JSON encoder writes grows by at most about 330 bytes. (The
// fast path of RawDocument.Validate, a validator per field, reads 32
// numbers at most, which cannot reach it.)
const MaxNumberGrowth = 16 << 20

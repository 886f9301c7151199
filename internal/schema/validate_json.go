package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/jsondup"
)

// RawDocument is one document of a write request before validation: the
// JSON text of one value as the client sent it (a REST body, split into
// documents but not otherwise checked: Validate checks its syntax) or, when
// JSON is nil, an object already decoded with json.Decoder.UseNumber (a
// GraphQL mutation's input).
type RawDocument struct {
	JSON []byte
	Map  map[string]any
	// Line is the line an NDJSON body's document starts on (from 1),
	// for its errors; 0 for others.
	Line int
}

// Label names the document in an error: its "@id" (ID) and, in an
// NDJSON body, its line ("p1, line 4"); "" when it has neither. An @id
// that is long or not plain is quoted and cut (sluice.EchoPlain): a
// 200 KB @id came back whole in the error, and in the log, and an
// override reversed the message after it where a browser showed it.
func (r RawDocument) Label() string {
	id := sluice.EchoPlain(r.ID())
	switch {
	case r.Line == 0:
		return id
	case id == "":
		return "line " + strconv.Itoa(r.Line)
	}
	return id + ", line " + strconv.Itoa(r.Line)
}

// Validate checks the document against s as ValidateDocument does and
// returns it normalized.
//
// JSON text takes a fast path when it is a flat object (no nested objects or
// arrays, no escapes in keys or strings, valid UTF-8, no repeated key) whose
// document validates: it is read straight into the document, without the
// map encoding/json would build, and that reading checks its syntax too.
// That is most documents of a bulk write, and encoding/json's decoding cost
// more CPU than anything else a write does. Anything else, including every
// invalid document, is decoded by encoding/json (which reports a syntax
// error) into a map and goes through ValidateDocument, so both paths give
// the same documents and the same errors (FuzzValidateJSON compares them).
func (r RawDocument) Validate(s *sluice.Schema) (*sluice.Document, error) {
	if r.JSON == nil {
		return ValidateDocument(s, r.Map)
	}
	if doc, ok := validateFlat(s, r.JSON); ok {
		return doc, nil
	}
	if err := r.checkValues(); err != nil {
		return nil, err
	}
	m, err := r.decode()
	if err != nil {
		return nil, err
	}
	return ValidateDocument(s, m)
}

// checkValues refuses JSON text of more values than a document may hold
// (MaxValues in its fields; its own object, "@type", "@id" and "@version"
// besides) before it is decoded: decoding builds a value for each, about
// twenty times the bytes of a small one ([0,0,…]), which a body of
// max_body_bytes would make gigabytes. Each value takes a byte at least,
// so shorter text needs no count.
func (r RawDocument) checkValues() error {
	if len(r.JSON) > MaxValues && CountJSONValues(r.JSON) > MaxValues+4 {
		return sluice.Errorf(sluice.CodeInvalid, "the document holds more than %d values in its fields (every string, number, boolean, null, list and object counted, at any depth), the most a document may", MaxValues)
	}
	return nil
}

// ID returns the document's "@id" as given, or "" when it has none or it is
// not a string: for error messages, which name the document. JSON text is
// read for "@id" alone (encoding/json skips the other members without
// building them: a document refused for its size is not decoded for its
// name).
func (r RawDocument) ID() string {
	if r.JSON == nil {
		id, _ := r.Map["@id"].(string)
		return id
	}
	var named struct {
		ID any `json:"@id"`
	}
	if json.Unmarshal(r.JSON, &named) != nil {
		return ""
	}
	id, _ := named.ID.(string)
	return id
}

func (r RawDocument) decode() (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(r.JSON))
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		// In words, with the byte (counted in the document), as every
		// other JSON body's error: "invalid JSON: an unexpected
		// character '}' at byte 29".
		return nil, sluice.DecodeError(err)
	case err != nil || m == nil:
		return nil, sluice.Errorf(sluice.CodeInvalid, "not a JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, sluice.Errorf(sluice.CodeInvalid, "invalid JSON: unexpected data after the object")
	}
	// encoding/json kept the last of a member given twice: a document
	// that gives one twice is refused, whatever the member (a field,
	// "@type", "@id"), at any depth. (The flat path never takes such a
	// document: it leaves it here.)
	if rep, ok := jsondup.Find(r.JSON); ok {
		return nil, sluice.Errorf(sluice.CodeInvalid, "invalid JSON: %s", rep.Message())
	}
	return m, nil
}

// flatMember is one member of a flat JSON object.
type flatMember struct {
	key []byte
	// kind is '"' for a string, '0' for a number, 't', 'f' or 'n' for the
	// literals.
	kind byte
	// value is a string's bytes between its quotes, or a number as written.
	value []byte
}

// maxFlatMembers is the most members the fast path reads; larger objects
// take the general path.
const maxFlatMembers = 32

// validateFlat is Validate's fast path for b, the JSON text of an object.
// It returns ok false, having done nothing, for anything but a flat
// object that is a valid document.
func validateFlat(s *sluice.Schema, b []byte) (doc *sluice.Document, ok bool) {
	var buf [maxFlatMembers]flatMember
	members, ok := scanFlatObject(b, buf[:0])
	if !ok {
		return nil, false
	}
	var typ, id, version *flatMember
	for i := range members {
		m := &members[i]
		switch string(m.key) {
		case "@type":
			typ = m
		case "@id":
			id = m
		case "@version":
			version = m
		}
	}
	if typ == nil || typ.kind != '"' {
		return nil, false
	}
	c := s.Classes[string(typ.value)]
	if c == nil || c.Kind != sluice.KindDocument {
		return nil, false
	}
	name := c.Name
	doc = &sluice.Document{Type: name}
	if id != nil && id.kind != 'n' {
		if id.kind != '"' {
			return nil, false
		}
		full, err := normalizeID(s, name, string(id.value))
		if err != nil {
			return nil, false
		}
		doc.ID = full
	}
	if version != nil && version.kind != 'n' {
		if version.kind != '"' || len(version.value) == 0 {
			return nil, false
		}
		doc.Expect.Version = string(version.value)
	}
	// The values go into Values, in field order, not into a map (see
	// sluice.Document).
	values := make([]any, len(c.Fields))
	for i := range members {
		m := &members[i]
		if m == typ || m == id || m == version {
			continue
		}
		k := fieldIndex(c, m.key)
		if k < 0 {
			return nil, false
		}
		f := c.Fields[k]
		if m.kind == 'n' {
			if f.Required {
				return nil, false
			}
			continue // null for an optional field means absent
		}
		nv, ok := flatScalar(f, m)
		if !ok {
			var val any
			switch m.kind {
			case '"':
				val = string(m.value)
			case '0':
				val = json.Number(m.value)
			case 't':
				val = true
			case 'f':
				val = false
			}
			var err error
			v := &validator{schema: s, root: name}
			if nv, err = v.value(f, val, f.Name); err != nil {
				return nil, false
			}
		}
		values[k] = nv
	}
	for k, f := range c.Fields {
		if f.Required && values[k] == nil {
			return nil, false
		}
	}
	doc.Values = values
	return doc, true
}

// flatScalar normalizes the commonest values without the representation
// encoding/json would decode them to (which costs an allocation or two
// each): a string for String and ID, a whole number without fraction or
// exponent for Int, a number for Float, a boolean for Boolean. It gives what
// scalar gives for the same value, or ok false for the general path.
func flatScalar(f *sluice.Field, m *flatMember) (v any, ok bool) {
	if f.List || f.Type.Kind != sluice.TypeScalar {
		return nil, false
	}
	switch f.Type.Name {
	case sluice.ScalarString, sluice.ScalarID:
		// scanString let through neither invalid UTF-8 nor control
		// characters, so checkText has nothing to refuse.
		return string(m.value), m.kind == '"'
	case sluice.ScalarBoolean:
		return m.kind == 't', m.kind == 't' || m.kind == 'f'
	case sluice.ScalarInt:
		if m.kind != '0' || bytes.ContainsAny(m.value, ".eE") {
			return nil, false
		}
		i, err := strconv.ParseInt(string(m.value), 10, 32)
		return i, err == nil
	case sluice.ScalarFloat:
		if m.kind != '0' {
			return nil, false
		}
		f, err := strconv.ParseFloat(string(m.value), 64)
		return f, err == nil
	}
	return nil, false
}

// fieldIndex returns the index in c.Fields of the field with a name in
// bytes, without converting it, or -1.
func fieldIndex(c *sluice.Class, name []byte) int {
	for i, f := range c.Fields {
		if f.Name == string(name) {
			return i
		}
	}
	return -1
}

// scanFlatObject appends the members of the JSON object b to out. It
// returns ok false when b is not an object, or when a value is an object
// or an array, a key or string has an escape or invalid UTF-8, a key is
// repeated, or there are more than maxFlatMembers members: the cases whose
// meaning encoding/json decides (it replaces invalid UTF-8 and keeps a
// repeated key's last value), left to the general path, and when b is not
// valid JSON: ok true means b is a syntactically valid object.
func scanFlatObject(b []byte, out []flatMember) ([]flatMember, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return out, skipSpace(b, i+1) == len(b)
	}
	for {
		var m flatMember
		var ok bool
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		if m.key, i, ok = scanString(b, i); !ok {
			return nil, false
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return nil, false
		}
		switch c := b[i]; {
		case c == '"':
			m.kind = '"'
			if m.value, i, ok = scanString(b, i); !ok {
				return nil, false
			}
		case c == '-' || ('0' <= c && c <= '9'):
			m.kind = '0'
			start := i
			if i, ok = scanNumber(b, i); !ok {
				return nil, false
			}
			m.value = b[start:i]
		case bytes.HasPrefix(b[i:], []byte("true")):
			m.kind, i = 't', i+4
		case bytes.HasPrefix(b[i:], []byte("false")):
			m.kind, i = 'f', i+5
		case bytes.HasPrefix(b[i:], []byte("null")):
			m.kind, i = 'n', i+4
		default:
			return nil, false // an object, an array, or bad syntax
		}
		if len(out) == maxFlatMembers {
			return nil, false
		}
		for _, o := range out {
			if bytes.Equal(o.key, m.key) {
				return nil, false
			}
		}
		out = append(out, m)
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return out, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// scanString reads the string starting at b[i] (a quote) and returns its
// contents and the index after it; ok is false for an escape, a control
// character, invalid UTF-8 or a missing closing quote.
func scanString(b []byte, i int) (s []byte, next int, ok bool) {
	start := i + 1
	ascii := true
	for j := start; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s = b[start:j]
			if !ascii && !utf8.Valid(s) {
				return nil, 0, false
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, 0, false
}

// scanNumber reads the JSON number starting at b[i] and returns the index
// after it; ok is false when the text there is not one.
func scanNumber(b []byte, i int) (next int, ok bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

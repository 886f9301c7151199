package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/jsondup"
)

// requireInvalid fails t unless err is a CodeInvalid *sluice.Error.
func requireInvalid(t *testing.T, err error) *sluice.Error {
	t.Helper()
	var e *sluice.Error
	if !errors.As(err, &e) || e.Code != sluice.CodeInvalid {
		t.Fatalf("error %v (%T) is not a CodeInvalid *sluice.Error", err, err)
	}
	return e
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "# comment", representative, docSchema,
		"type {", "enum X {}", "type A { a: [[Int]] }", "type A_B { a: Int }",
		"interface A implements B { a: Int }\ninterface B implements A { b: Int }",
		"type A @subdocument { b: B! }\ntype B @subdocument { a: A! }",
		"interface A { x: Int }\ntype T implements A { x: String }",
		"interface A { x: Int }\ninterface B { x: String }\ntype T implements A & B",
		"type A { a: Int @protected(role: \"write\") b: Int @private }",
		"union U = A\ninput I { a: Int }\nscalar S\nextend type A { b: Int }\nschema { query: A }\ndirective @d on FIELD",
		"type A { b(x: Int = 1): Int @deprecated(reason: \"\"\"x\"\"\") }",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sdl string) {
		s, err := Parse(sdl)
		// A client's schema is held to bounds a stored one is not: it
		// admits nothing Parse refuses, and what it admits is Parse's
		// schema, which a change to it admits again (ParseChange).
		n, nerr := ParseNew(sdl)
		if nerr != nil {
			requireInvalid(t, nerr)
		}
		if err != nil {
			if e := requireInvalid(t, err); !strings.HasPrefix(e.Message, "line ") {
				t.Fatalf("error %q does not start with its position", e.Message)
			}
			if nerr == nil {
				t.Fatalf("ParseNew admits what Parse refuses: %v", err)
			}
			return
		}
		checkSchema(t, s)
		if nerr == nil {
			if !reflect.DeepEqual(n, s) {
				t.Fatalf("ParseNew and Parse disagree")
			}
			if _, err := ParseChange(sdl, s); err != nil {
				t.Fatalf("ParseChange refuses the schema it replaces: %v", err)
			}
		}
	})
}

// checkSchema fails t when s breaks an invariant Parse promises.
func checkSchema(t *testing.T, s *sluice.Schema) {
	t.Helper()
	if len(s.Order) != len(s.Classes) || len(s.EnumOrder) != len(s.Enums) {
		t.Fatalf("order and maps disagree: %v %v", s.Order, s.EnumOrder)
	}
	for _, name := range s.Order {
		c := s.Classes[name]
		if c == nil || c.Name != name || !isTypeName(name) || s.Enums[name] != nil {
			t.Fatalf("bad class %q", name)
		}
		for _, p := range c.Parents {
			pc := s.Classes[p]
			if pc == nil || pc.Kind == sluice.KindSubdocument || c.Kind == sluice.KindSubdocument {
				t.Fatalf("%s has bad parent %s", name, p)
			}
			for _, pf := range pc.Fields {
				if cf := c.Field(pf.Name); cf == nil || !sameField(cf, pf) || cf == pf {
					t.Fatalf("%s does not inherit %s.%s", name, p, pf.Name)
				}
			}
		}
		seen := map[string]bool{}
		for _, f := range c.Fields {
			if seen[f.Name] || !isFieldName(f.Name) || f.ReadRole < sluice.RoleRead || f.ReadRole > sluice.RoleAdmin {
				t.Fatalf("bad field %s.%s", name, f.Name)
			}
			seen[f.Name] = true
			ok := false
			switch f.Type.Kind {
			case sluice.TypeScalar:
				ok = isBuiltinScalar(f.Type.Name)
			case sluice.TypeEnum:
				ok = s.Enums[f.Type.Name] != nil
			case sluice.TypeReference:
				ok = s.Classes[f.Type.Name] != nil && s.Classes[f.Type.Name].Kind != sluice.KindSubdocument
			case sluice.TypeSubdocument:
				ok = s.Classes[f.Type.Name] != nil && s.Classes[f.Type.Name].Kind == sluice.KindSubdocument
			}
			if !ok {
				t.Fatalf("field %s.%s has bad type %+v", name, f.Name, f.Type)
			}
		}
	}
	for _, name := range s.EnumOrder {
		if e := s.Enums[name]; e == nil || len(e.Values) == 0 {
			t.Fatalf("bad enum %q", name)
		}
	}
	if d := Diff(s, s); len(d) != 0 {
		t.Fatalf("Diff(s, s) = %v", d)
	}
	for _, c := range Diff(nil, s) {
		if c.Destructive || (c.Kind != AddClass && c.Kind != AddEnum) {
			t.Fatalf("Diff(nil, s) has %v", c)
		}
	}
}

func FuzzValidateDocument(f *testing.F) {
	s := mustParse(f, docSchema)
	for _, d := range []string{
		`{"@type":"Person","name":"Ann"}`,
		`{"@type":"Person","@id":"ann","name":"Ann","age":3.0,"score":1e3,"active":true,"born":"2024-08-01T18:30:00.5+02:00","big":"-007"}`,
		`{"@type":"Person","name":"A","meta":{"a":[1,null,"<&>"]},"color":"RED","colors":["GREEN"]}`,
		`{"@type":"Person","name":"A","friends":["Person/b",{"@id":"Person/c"}],"pet":"Cat/tom","animal":"Dog/rex"}`,
		`{"@type":"Person","name":"A","home":{"city":"Oslo","tags":["x"],"geo":{"lat":1,"lon":2.5}},"homes":[{"@type":"Address","city":"B"}]}`,
		`{"@type":"Cat","@id":"Cat/tom","name":"Tom","lives":9}`,
		`{"@type":"Cat","@id":"Cat/tom","@version":"k2","name":"Tom","lives":9}`,
		`{"@type":"Wide","ints":[1,2,-0]}`,
		`{"@type":"Person","name":"a\u0000"}`,
		`{"@type":"Animal"}`,
		`null`,
		`{}`,
		`{"@type":"Person","name":"Ann","age":01}`,
	} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var raw map[string]any
		if d.Decode(&raw) != nil {
			return
		}
		doc, err := ValidateDocument(s, raw)
		if err != nil {
			requireInvalid(t, err)
			return
		}
		if doc.ID != "" {
			if class, _, err := ParseID(s, doc.ID); err != nil || class != doc.Type {
				t.Fatalf("document id %q of type %s: %v", doc.ID, doc.Type, err)
			}
		}
		again, err := ValidateDocument(s, documentMap(doc))
		if err != nil {
			t.Fatalf("validating %#v again: %v", doc, err)
		}
		if !reflect.DeepEqual(again, doc) {
			t.Fatalf("validating again changed\n%#v\nto\n%#v", doc, again)
		}
		if _, err := json.Marshal(doc.Fields); err != nil {
			t.Fatalf("encode %#v: %v", doc.Fields, err)
		}
	})
}

func FuzzParseID(f *testing.F) {
	s := mustParse(f, docSchema)
	for _, id := range []string{"Person/ann", "ann", "Person/", "Person/a/b", "Animal/x", "Cat/\u00e9", "Cat/a\u2028b"} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		class, key, err := ParseID(s, id)
		if err != nil {
			requireInvalid(t, err)
			return
		}
		if class+"/"+key != id || s.Class(class).Kind != sluice.KindDocument || CheckKey(key) != nil {
			t.Fatalf("ParseID(%q) = %q, %q", id, class, key)
		}
	})
}

// FuzzValidateJSON checks that RawDocument.Validate of JSON text, with its
// fast path, gives exactly what ValidateDocument gives for the same text
// decoded by encoding/json: the same document or the same error; that
// text that is not valid JSON is refused, never read by the fast path;
// and that text giving a member twice (which encoding/json decodes to its
// last) is refused naming it.
func FuzzValidateJSON(f *testing.F) {
	s := mustParse(f, docSchema)
	for _, d := range []string{
		`{"@type":"Person","@id":"p1","name":"Ann","nick":"a","age":-0,"score":1.5e3,"active":false,"color":"RED","pet":"Cat/tom"}`,
		`{ "name" : "Ann" , "@type" : "Person" , "age" : null , "big" : 12 , "born" : "2024-08-01T18:30:00Z" }`,
		`{"@type":"Person","name":"Ann","name":"Bob"}`,
		`{"@type":"Person","name":"caf\u00e9 ` + "\xff" + `"}`,
		`{"@type":"Person","name":"Ann","age":2147483648}`,
		`{"@type":"Person","name":"Ann","age":3.0,"score":-1E-2}`,
		`{"@type":"Person","name":"Ann","meta":"x","colors":null,"friends":[]}`,
		`{"@type":"Person","@id":null,"name":"Ann","@x":1}`,
		`{"@type":"Person","@id":"p1","@version":"3f","name":"Ann"}`,
		`{"@type":"Person","@version":"","name":"Ann"}`,
		`{"@type":"Person","@version":null,"name":"Ann"}`,
		`{"@type":"Person","@version":3,"name":"Ann"}`,
		`{"@type":"Cat","@id":"Dog/rex","name":"Tom"}`,
		`{"@type":"Person","name":true}`,
		`{"@type":"Animal","name":"x"}`,
		`{"@type":"Person"}`,
		`{}`,
		`{"@type":"Person","name":"Ann","age":01}`,
	} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			if _, ok := validateFlat(s, data); ok {
				t.Fatalf("the fast path read invalid JSON")
			}
			if _, err := (RawDocument{JSON: data}).Validate(s); sluice.ErrorCode(err) != sluice.CodeInvalid {
				t.Fatalf("invalid JSON: error %v, want BadRequest", err)
			}
			return
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var raw map[string]any
		if d.Decode(&raw) != nil || raw == nil {
			return // not an object: the reader refuses it first
		}
		if rep, ok := jsondup.Find(data); ok {
			_, err := RawDocument{JSON: data}.Validate(s)
			if sluice.ErrorCode(err) != sluice.CodeInvalid || !strings.Contains(sluice.ErrorMessage(err), rep.Message()) {
				t.Fatalf("%q gives %q twice: error %v", data, rep.Path, err)
			}
			return
		}
		want, wantErr := ValidateDocument(s, raw)
		got, err := RawDocument{JSON: data}.Validate(s)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("error %v, want %v", err, wantErr)
		}
		if got != nil && got.Values != nil {
			got = withFields(s, got)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("document\n%#v\nwant\n%#v", got, want)
		}
		if id, _ := raw["@id"].(string); (RawDocument{JSON: data}).ID() != id {
			t.Fatalf("ID() = %q, want %q", RawDocument{JSON: data}.ID(), id)
		}
	})
}

// withFields returns doc, whose values are in Values, with them in Fields
// instead: the form ValidateDocument gives.
func withFields(s *sluice.Schema, doc *sluice.Document) *sluice.Document {
	out := &sluice.Document{ID: doc.ID, Type: doc.Type, Expect: doc.Expect, Fields: map[string]any{}}
	for i, f := range s.Classes[doc.Type].Fields {
		if v, ok := doc.Value(i, f.Name); ok {
			out.Fields[f.Name] = v
		}
	}
	return out
}

package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// A replace (REST PUT, a POST or PUT with create, GraphQL's replace
// mutations) writes the whole document. A writer whose role cannot read a
// field (@private, @protected) never saw its value, so leaving it out of
// the replacement is not asking to remove it: the stored value is kept,
// as column permissions keep the columns a role may not see. A replacement
// that names such a field writes it, as a merge patch does; only a merge
// patch can remove one (null). The same holds in single subdocuments, a
// replaced subdocument of the same type keeping its hidden fields. A list
// of subdocuments that the replacement sends as the role reads it (a
// writer that read the document and changed other fields) is kept as
// stored, hidden fields of its items included; a changed list is replaced
// as a whole, its items' hidden fields with it, since which stored item a
// changed one was cannot be told. "@type" is optional on input, so a
// subdocument that leaves it out is compared as one of its field's type
// (sameSubdocuments): a merge patch is compared as sent, before
// validation gives its subdocuments their "@type".

// keepHidden returns the postgres.WriteSpec.Keep of a replace by role in
// schema s, nil when role can read every field.
func keepHidden(role sluice.Role, s *sluice.Schema) func(replacement, stored []byte) (*sluice.Document, error) {
	if !hidesFields(role, s) {
		return nil
	}
	return func(replacement, stored []byte) (*sluice.Document, error) {
		next, err := decodeDocument(replacement)
		if err != nil {
			return nil, err
		}
		// The stored document is decoded whole, its hidden fields kept:
		// one stored past the bound of values a document may hold
		// (written before it) is refused before it is decoded, a value
		// each, rather than kept whole or losing what the role cannot
		// see.
		if len(stored) > schema.MaxValues && schema.CountJSONValues(stored) > schema.MaxValues+4 {
			return nil, sluice.Errorf(sluice.CodeConflict, "document %s: its stored values, which a replace by your role keeps where your role cannot read them, hold more than %d values, the most a document may (stored before that bound): an admin must change it first", next["@id"], schema.MaxValues)
		}
		cur, err := decodeDocument(stored)
		if err != nil {
			return nil, err
		}
		typ, _ := next["@type"].(string)
		c := s.Classes[typ]
		if curTyp, _ := cur["@type"].(string); c == nil || curTyp != typ || !keepMap(role, s, c, next, cur) {
			return nil, nil
		}
		delete(next, "@version")
		doc, err := schema.ValidateKept(s, next, func(f *sluice.Field) bool { return hiddenFrom(role, s, f) })
		if err != nil {
			// The stored values were valid: a schema change since
			// (applied in place) may make one invalid now, and they may
			// take the document past the bound of values. The error
			// tells nothing of them (schema.ValidateKept).
			return nil, sluice.Errorf(sluice.ErrorCode(err), "document %s: with the stored values of the fields your role cannot read, kept, it is invalid: %s", next["@id"], sluice.ErrorMessage(err))
		}
		return doc, nil
	}
}

// markKept wraps, in place, as schema.Kept each value in v, the stored
// value of subdocument field f in API form (decoded JSON), of a field
// hidden from role, at any depth, and returns v: a write keeps them as
// stored, and validation must tell the writer nothing of them
// (schema.ValidateKept). v is decoded for this write alone.
func markKept(role sluice.Role, s *sluice.Schema, f *sluice.Field, v any) any {
	switch v := v.(type) {
	case []any:
		for i, e := range v {
			v[i] = markKept(role, s, f, e)
		}
	case map[string]any:
		c := subdocumentClass(s, f, v)
		if c == nil {
			return v
		}
		for _, sf := range c.Fields {
			e, ok := v[sf.Name]
			switch {
			case !ok || e == nil:
			case hiddenFrom(role, s, sf):
				v[sf.Name] = schema.Kept{Value: e}
			case sf.Type.Kind == sluice.TypeSubdocument:
				v[sf.Name] = markKept(role, s, sf, e)
			}
		}
	}
	return v
}

// hidesFields reports whether some field of s needs a stronger role than
// role to read.
func hidesFields(role sluice.Role, s *sluice.Schema) bool {
	for _, c := range s.Classes {
		for _, f := range c.Fields {
			if f.ReadRole > role {
				return true
			}
		}
	}
	return false
}

// keepMap copies into next (an object of class c) the values in cur of
// the fields hidden from role that next leaves out, in single subdocuments
// of the same type too, and the stored lists of subdocuments that next
// holds as role reads them, and reports whether it copied any.
func keepMap(role sluice.Role, s *sluice.Schema, c *sluice.Class, next, cur map[string]any) bool {
	changed := false
	for _, f := range c.Fields {
		if hiddenFrom(role, s, f) {
			if _, named := next[f.Name]; !named {
				if v, ok := cur[f.Name]; ok && v != nil {
					next[f.Name] = schema.Kept{Value: v}
					changed = true
				}
			}
			continue
		}
		if f.Type.Kind != sluice.TypeSubdocument {
			continue
		}
		if f.List {
			o, ok := cur[f.Name].([]any)
			if !ok {
				continue
			}
			if seen := visible(role, s, f, o); !reflect.DeepEqual(seen, o) && sameSubdocuments(s, f, seen, next[f.Name]) {
				next[f.Name] = markKept(role, s, f, o)
				changed = true
			}
			continue
		}
		n, ok1 := next[f.Name].(map[string]any)
		o, ok2 := cur[f.Name].(map[string]any)
		if !ok1 || !ok2 {
			continue
		}
		if sc := subdocumentClass(s, f, n); sc != nil && sc == subdocumentClass(s, f, o) && keepMap(role, s, sc, n, o) {
			changed = true
		}
	}
	return changed
}

// keepInPatch returns patch, a merge patch of an object of class c whose
// stored value is cur, with each list of subdocuments it names as role
// reads the stored one replaced by the stored list, in the single
// subdocuments it merges into too. The patch is not validated yet: its
// subdocuments may leave "@type" out, which sameSubdocuments allows for.
// patch itself is not changed (a write may run again, on another stored
// value).
func keepInPatch(role sluice.Role, s *sluice.Schema, c *sluice.Class, patch, cur map[string]any) map[string]any {
	out := patch
	set := func(name string, v any) {
		if reflect.ValueOf(out).Pointer() == reflect.ValueOf(patch).Pointer() {
			out = maps.Clone(patch)
		}
		out[name] = v
	}
	for _, f := range c.Fields {
		p, named := patch[f.Name]
		if !named || hiddenFrom(role, s, f) || f.Type.Kind != sluice.TypeSubdocument {
			continue
		}
		if f.List {
			o, ok := cur[f.Name].([]any)
			if !ok {
				continue
			}
			if seen := visible(role, s, f, o); !reflect.DeepEqual(seen, o) && sameSubdocuments(s, f, seen, p) {
				set(f.Name, o)
			}
			continue
		}
		n, ok1 := p.(map[string]any)
		o, ok2 := cur[f.Name].(map[string]any)
		if !ok1 || !ok2 {
			continue
		}
		sc := subdocumentClass(s, f, o)
		// A "@type" of null is left out, as validation takes it.
		if n["@type"] != nil && subdocumentClass(s, f, n) != sc {
			continue
		}
		if sc != nil {
			if kept := keepInPatch(role, s, sc, n, o); reflect.ValueOf(kept).Pointer() != reflect.ValueOf(n).Pointer() {
				set(f.Name, kept)
			}
		}
	}
	return out
}

// sameSubdocuments reports whether a and b, values of subdocument field f
// in API form (decoded JSON), are the same value once each subdocument
// they hold, at any depth, names its class. "@type" is optional on input:
// validation gives a subdocument that leaves it out (or sends null) its
// field's type, so a list a merge patch sends back without "@type" is
// the list as read, not a change. A stored subdocument may leave it out
// too (written in SQL).
func sameSubdocuments(s *sluice.Schema, f *sluice.Field, a, b any) bool {
	return sameJSON(typed(s, f, a), typed(s, f, b))
}

// typed returns v, a value of subdocument field f in API form (decoded
// JSON), with "@type" set to the field's type in each subdocument, at any
// depth, that leaves it out or gives null, as validation sets it. v
// itself is not changed.
func typed(s *sluice.Schema, f *sluice.Field, v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = typed(s, f, e)
		}
		return out
	case map[string]any:
		out := maps.Clone(v)
		if out["@type"] == nil {
			out["@type"] = f.Type.Name
		}
		c := subdocumentClass(s, f, out)
		if c == nil {
			return out
		}
		for _, sf := range c.Fields {
			if e, ok := out[sf.Name]; ok && sf.Type.Kind == sluice.TypeSubdocument {
				out[sf.Name] = typed(s, sf, e)
			}
		}
		return out
	}
	return v
}

// sameJSON reports whether a and b, decoded JSON, are the same JSON value,
// numbers compared by value as a client reads them: a patch's values come
// decoded from JSON or from GraphQL input, whose numbers are not
// json.Number, and a client that reads numbers as doubles (JSON.parse)
// sends a stored 9.90 back as 9.9.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	if bytes.Equal(x, y) {
		return true
	}
	var u, v any
	return json.Unmarshal(x, &u) == nil && json.Unmarshal(y, &v) == nil && reflect.DeepEqual(u, v)
}

// visible returns v, the stored value of subdocument field f in API form
// (decoded JSON), as role reads it: without the fields hidden from role
// in the subdocuments it holds, at any depth. v itself is not changed.
func visible(role sluice.Role, s *sluice.Schema, f *sluice.Field, v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = visible(role, s, f, e)
		}
		return out
	case map[string]any:
		c := subdocumentClass(s, f, v)
		if c == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = e
		}
		for _, sf := range c.Fields {
			switch {
			case hiddenFrom(role, s, sf):
				delete(out, sf.Name)
			case sf.Type.Kind == sluice.TypeSubdocument:
				if e, ok := out[sf.Name]; ok {
					out[sf.Name] = visible(role, s, sf, e)
				}
			}
		}
		return out
	}
	return v
}

// decodeDocument decodes a document's API-form JSON, numbers as
// json.Number.
func decodeDocument(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode document: %w", err)
	}
	return m, nil
}

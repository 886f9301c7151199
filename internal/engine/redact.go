package engine

import (
	"fmt"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// redactFor removes from doc every field, at any depth of subdocuments, that
// needs a stronger role than role. Documents of classes without such fields
// are returned unchanged.
func redactFor(role sluice.Role, s *sluice.Schema, doc []byte) ([]byte, error) {
	if doc == nil || role >= sluice.RoleAdmin {
		return doc, nil
	}
	m, err := schema.DecodeImage(doc)
	if err != nil {
		return nil, fmt.Errorf("redact: %w", err)
	}
	typ, _ := m["@type"].(string)
	c := s.Classes[typ]
	if c == nil {
		return doc, nil
	}
	if !redactMap(role, s, c, m) {
		return doc, nil
	}
	id, _ := m["@id"].(string)
	version, _ := m["@version"].(string)
	fields := make(map[string]any, len(m))
	for k, v := range m {
		if k != "@id" && k != "@type" && k != "@version" {
			fields[k] = v
		}
	}
	return postgres.DocumentJSON(c, &sluice.Document{ID: id, Type: typ, Version: version, Fields: fields})
}

// hiddenFrom reports whether a reader with role does not see field f of
// schema s: it needs a stronger role, or it is of a subdocument type that
// role sees no field of. The role's GraphQL schema and SDL leave the
// latter out (schema.Visibility), and so does every answer, rather than
// show {"@type": …} alone; a replace keeps it as it keeps a protected
// field, since the writer never saw it.
func hiddenFrom(role sluice.Role, s *sluice.Schema, f *sluice.Field) bool {
	if f.ReadRole > role {
		return true
	}
	if f.Type.Kind != sluice.TypeSubdocument {
		return false
	}
	c := s.Class(f.Type.Name)
	return c != nil && c.SeenFrom > role
}

// subdocumentClass returns the class of sub, a subdocument that field f
// holds: the class its "@type" names or, when it names none, f's type. A
// subdocument written in SQL may leave "@type" out, and subdocument types
// implement no interface, so f's type is the only class it can be: every
// role check of a subdocument goes by it (judged by "@type" alone, an
// untyped subdocument's hidden fields were shown to readers). Nil when
// "@type" names a class s lacks, or is not a string.
func subdocumentClass(s *sluice.Schema, f *sluice.Field, sub map[string]any) *sluice.Class {
	t, named := sub["@type"]
	if !named {
		return s.Class(f.Type.Name)
	}
	typ, _ := t.(string)
	return s.Class(typ)
}

// redactMap deletes hidden fields from m (an object of class c) and reports
// whether it deleted any. A subdocument of a class the schema lacks, which
// cannot be judged, is deleted with its field.
func redactMap(role sluice.Role, s *sluice.Schema, c *sluice.Class, m map[string]any) bool {
	changed := false
	for _, f := range c.Fields {
		v, ok := m[f.Name]
		if !ok {
			continue
		}
		if hiddenFrom(role, s, f) {
			delete(m, f.Name)
			changed = true
			continue
		}
		if f.Type.Kind != sluice.TypeSubdocument {
			continue
		}
		items := []any{v}
		if f.List {
			items, _ = v.([]any)
		}
		for _, it := range items {
			sub, ok := it.(map[string]any)
			if !ok {
				continue
			}
			sc := subdocumentClass(s, f, sub)
			if sc == nil {
				delete(m, f.Name)
				changed = true
				break
			}
			if redactMap(role, s, sc, sub) {
				changed = true
			}
		}
	}
	return changed
}

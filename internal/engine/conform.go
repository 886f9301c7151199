package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// A schema change alters stored documents in two ways. Columns it drops
// or retypes, and tables it drops, are Postgres DDL (postgres.ChangeSchema).
// The rest is inside the values it keeps, and is found by walking them
// (conformer): the fields a change drops or retypes inside subdocuments,
// which are JSON, at any depth and in lists; references to documents of
// a class that no longer fits the reference's type (a class dropped, no
// longer a document class, or no longer implementing the interface),
// single, in lists or in subdocuments; values of an enum that the change
// drops; and required fields that documents or subdocuments lack once the
// change is made (added or made required, changed to a required type
// whose values are dropped, or a required reference dropped). The first
// two a forced change drops; the last two refuse it, force or not, so
// that no stored document is left invalid.

// conformer finds what a schema change (changes, from prev to next) does
// to the stored values it keeps. It holds no state between documents.
type conformer struct {
	prev, next *sluice.Schema
	changes    []schema.Change
	// dropped holds, for each enum with values dropped, the change that
	// drops each value.
	dropped map[string]map[string]int
	// required holds the fields stored documents may lack after the
	// change, with the change that makes them required (added, made
	// required, or retyped to a required type), or -1 for a required
	// reference whose references the change may drop.
	required map[fieldKey]int
	// touched says which field types hold values the change may alter or
	// refuse (touches).
	touched map[sluice.FieldType]bool
}

// newConformer returns the conformer of the change from prev to next.
func newConformer(prev, next *sluice.Schema, changes []schema.Change) *conformer {
	c := &conformer{prev: prev, next: next, changes: changes,
		dropped: map[string]map[string]int{}, required: map[fieldKey]int{}, touched: map[sluice.FieldType]bool{}}
	for i, ch := range changes {
		switch ch.Kind {
		case schema.DropEnumValue:
			if c.dropped[ch.Class] == nil {
				c.dropped[ch.Class] = map[string]int{}
			}
			c.dropped[ch.Class][ch.Field] = i
			c.touched[sluice.FieldType{Kind: sluice.TypeEnum, Name: ch.Class}] = true
		case schema.AddRequiredField, schema.RequireField:
			c.required[fieldKey{ch.Class, ch.Field}] = i
		case schema.AlterField:
			// Its values are dropped: every stored value lacks it after.
			if next.Class(ch.Class).Field(ch.Field).Required {
				c.required[fieldKey{ch.Class, ch.Field}] = i
			}
		}
	}
	for _, name := range next.Order {
		if c.loses(name) {
			c.touched[sluice.FieldType{Kind: sluice.TypeReference, Name: name}] = true
		}
	}
	for _, name := range next.Order {
		cl := next.Classes[name]
		for _, f := range cl.Fields {
			k := fieldKey{name, f.Name}
			if _, ok := c.required[k]; !ok && f.Required && !f.List && c.touched[f.Type] && c.kept(cl.Name, f) {
				c.required[k] = -1
			}
		}
	}
	for _, name := range next.Order {
		if next.Classes[name].Kind == sluice.KindSubdocument && prev.Class(name) != nil && prev.Classes[name].Kind == sluice.KindSubdocument {
			c.touched[sluice.FieldType{Kind: sluice.TypeSubdocument, Name: name}] = c.subdocumentTouched(name, map[string]bool{})
		}
	}
	return c
}

// loses reports whether a reference to class (or an interface) may no
// longer fit: some class whose documents it could point to before the
// change cannot after.
func (c *conformer) loses(class string) bool {
	for _, name := range c.prev.Order {
		if fits(c.prev, name, class) && !fits(c.next, name, class) {
			return true
		}
	}
	return false
}

// fits reports whether, in s, a reference to class may point to a
// document of class doc.
func fits(s *sluice.Schema, doc, class string) bool {
	dc := s.Class(doc)
	return dc != nil && dc.Kind == sluice.KindDocument && s.IsA(doc, class)
}

// kept reports whether field f of class in next has stored values that
// the change keeps: prev's class had it, of the same type, or a
// reference that the change widens (schema.Widens).
func (c *conformer) kept(class string, f *sluice.Field) bool {
	pc := c.prev.Class(class)
	if pc == nil {
		return false
	}
	pf := pc.Field(f.Name)
	return pf != nil && (pf.Type == f.Type && pf.List == f.List || schema.Widens(c.prev, c.next, pf, f))
}

// subdocumentTouched reports whether the stored subdocuments of type name
// hold what the change alters or refuses: a field it drops or retypes, a
// field they may lack, or a kept field of a touched type (a subdocument
// type's, nested, found by walking the types from name; seen holds those
// walked).
func (c *conformer) subdocumentTouched(name string, seen map[string]bool) bool {
	if seen[name] {
		return false
	}
	seen[name] = true
	pc, nc := c.prev.Class(name), c.next.Class(name)
	for _, pf := range pc.Fields {
		if nf := nc.Field(pf.Name); nf == nil || !c.kept(name, nf) {
			return true
		}
	}
	for _, f := range nc.Fields {
		if _, ok := c.required[fieldKey{name, f.Name}]; ok {
			return true
		}
		if !c.kept(name, f) {
			continue
		}
		if f.Type.Kind == sluice.TypeSubdocument && c.subdocumentTouched(f.Type.Name, seen) || c.touched[f.Type] {
			return true
		}
	}
	return false
}

// scans returns what of each table that keeps its documents through the
// change must be read: the kept columns of touched types or that may be
// lacking, and the rows that hold the first or lack the second (every
// row when a required field has no kept column: all of them lack it).
func (c *conformer) scans() []postgres.StoredValues {
	var out []postgres.StoredValues
	for _, name := range c.next.Order {
		pc, nc := c.prev.Class(name), c.next.Classes[name]
		if nc.Kind != sluice.KindDocument || pc == nil || pc.Kind != sluice.KindDocument {
			continue
		}
		s := postgres.StoredValues{Class: name}
		for _, f := range nc.Fields {
			_, required := c.required[fieldKey{name, f.Name}]
			kept := c.kept(name, f)
			if required && !kept {
				s.Every = true
			}
			if !kept || !required && !c.touched[f.Type] {
				continue
			}
			s.Fields = append(s.Fields, f)
			if required {
				s.Lacking = append(s.Lacking, f.Name)
			}
			if c.touched[f.Type] {
				s.Held = append(s.Held, f.Name)
			}
		}
		if s.Every || len(s.Fields) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// hit is one thing a change finds in a stored document: a value it drops
// or an enum value it drops (change, an index of changes), or a required
// field the document lacks (lacks; change is the change that requires it
// or -1).
type hit struct {
	change int
	lacks  fieldKey
}

// hits are what a change finds in one document, with the path of the
// first value found of each (for messages).
type hits map[hit]string

// document returns the columns of row, the columns of a stored document
// of class that its scan reads, that the change alters, with their new
// values (nil: none left), and adds to h what it finds.
func (c *conformer) document(class string, row map[string]any, h hits) map[string]any {
	set := map[string]any{}
	for _, f := range c.next.Class(class).Fields {
		v, ok := row[f.Name]
		if !ok {
			continue
		}
		if nv, changed := c.value(f, v, class+"."+f.Name, h); changed {
			set[f.Name] = nv
		}
	}
	c.lacking(class, func(f *sluice.Field) bool {
		v, ok := set[f.Name]
		if !ok {
			_, ok = row[f.Name]
			return ok
		}
		return v != nil
	}, h)
	return set
}

// value returns v, a stored value of field f at path, as the change
// leaves it, and whether it changed it; nil when it drops it.
func (c *conformer) value(f *sluice.Field, v any, path string, h hits) (any, bool) {
	if !c.touched[f.Type] {
		return v, false
	}
	if !f.List {
		return c.element(f.Type, v, path, h)
	}
	items, _ := v.([]any)
	out := make([]any, 0, len(items))
	changed := false
	for _, it := range items {
		nv, ch := c.element(f.Type, it, path, h)
		changed = changed || ch
		if nv != nil {
			out = append(out, nv)
		}
	}
	return out, changed
}

// element is value for one value (of a list, or not) of type t.
func (c *conformer) element(t sluice.FieldType, v any, path string, h hits) (any, bool) {
	switch t.Kind {
	case sluice.TypeEnum:
		if s, ok := v.(string); ok {
			if i, ok := c.dropped[t.Name][s]; ok {
				h.add(hit{change: i}, path)
			}
		}
	case sluice.TypeReference:
		id, _ := v.(string)
		doc, _, _ := strings.Cut(id, "/")
		// Only what fitted before: the change drops no more than it
		// took away.
		if fits(c.prev, doc, t.Name) && !fits(c.next, doc, t.Name) {
			h.add(hit{change: c.classChange(doc)}, path)
			return nil, true
		}
	case sluice.TypeSubdocument:
		if m, ok := v.(map[string]any); ok {
			return m, c.object(t.Name, m, path+".", h)
		}
	}
	return v, false
}

// object brings m, a stored subdocument of type name at path, to what
// the change leaves of it (in place), reports whether it changed it, and
// adds to h what it finds.
func (c *conformer) object(name string, m map[string]any, path string, h hits) bool {
	pc, nc := c.prev.Class(name), c.next.Class(name)
	changed := false
	for _, pf := range pc.Fields {
		v, ok := m[pf.Name]
		if !ok {
			continue
		}
		nf := nc.Field(pf.Name)
		if nf == nil || !c.kept(name, nf) {
			delete(m, pf.Name)
			changed = true
			h.add(hit{change: c.fieldChange(name, pf.Name)}, path+pf.Name)
			continue
		}
		nv, ch := c.value(nf, v, path+pf.Name, h)
		if !ch {
			continue
		}
		changed = true
		if nv == nil {
			delete(m, pf.Name)
		} else {
			m[pf.Name] = nv
		}
	}
	c.lacking(name, func(f *sluice.Field) bool { _, ok := m[f.Name]; return ok }, h)
	return changed
}

// lacking adds to h the fields of class that the change may leave
// missing and that has says are missing.
func (c *conformer) lacking(class string, has func(f *sluice.Field) bool, h hits) {
	for _, f := range c.next.Class(class).Fields {
		k := fieldKey{class, f.Name}
		if i, ok := c.required[k]; ok && !has(f) {
			h.add(hit{change: i, lacks: k}, "")
		}
	}
}

// add records x, found at path, unless it was found before.
func (h hits) add(x hit, path string) {
	if _, ok := h[x]; !ok {
		h[x] = path
	}
}

// fieldChange returns the index of the change that drops or retypes
// field of class (-1 when there is none).
func (c *conformer) fieldChange(class, field string) int {
	return slices.IndexFunc(c.changes, func(ch schema.Change) bool {
		return (ch.Kind == schema.DropField || ch.Kind == schema.AlterField) && ch.Class == class && ch.Field == field
	})
}

// classChange returns the index of the change that makes references to
// class's documents no longer fit (-1 when there is none).
func (c *conformer) classChange(class string) int {
	return slices.IndexFunc(c.changes, func(ch schema.Change) bool {
		return (ch.Kind == schema.DropClass || ch.Kind == schema.ChangeClassKind || ch.Kind == schema.ChangeParents) && ch.Class == class
	})
}

// found is how many stored documents hold one hit, the first of them in
// scan order (at most previewIDs), and the path of the first value.
type found struct {
	count int64
	ids   []string
	path  string
}

// tally adds up the hits of the documents a change walks.
type tally map[hit]*found

// add counts document id's hits.
func (t tally) add(id string, h hits) {
	for x, path := range h {
		f := t[x]
		if f == nil {
			f = &found{path: path}
			t[x] = f
		}
		f.count++
		if len(f.ids) < previewIDs {
			f.ids = append(f.ids, id)
		}
	}
}

// walkStored walks the stored documents that the change may alter or
// refuse (c.scans) in tx, rewriting them as the change leaves them when
// write is set, and returns what it found.
func walkStored(ctx context.Context, tx *postgres.Tx, d *sluice.Database, c *conformer, write bool) (tally, error) {
	t := tally{}
	for _, s := range c.scans() {
		err := tx.RewriteStored(ctx, d, s, func(id string, row map[string]any) (map[string]any, error) {
			h := hits{}
			set := c.document(s.Class, row, h)
			t.add(id, h)
			if !write {
				return nil, nil
			}
			return set, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// refusals returns why the change is refused whatever force says, given
// t: stored documents that would hold a dropped enum value, or lack a
// required field. One reason a hit, in the order of the changes.
func (c *conformer) refusals(t tally) []string {
	keys := make([]hit, 0, len(t))
	for x := range t {
		keys = append(keys, x)
	}
	slices.SortFunc(keys, func(a, b hit) int {
		return cmp.Or(cmp.Compare(uint(a.change), uint(b.change)), cmp.Compare(a.lacks.class, b.lacks.class), cmp.Compare(a.lacks.field, b.lacks.field))
	})
	var out []string
	for _, x := range keys {
		n := t[x].count
		switch {
		case x.lacks.class != "" && x.change < 0:
			f := c.next.Class(x.lacks.class).Field(x.lacks.field)
			out = append(out, fmt.Sprintf("cannot drop the references of required field %s.%s that no longer fit its type %s: %d stored documents would lack it", x.lacks.class, x.lacks.field, f.Type.Name, n))
		case x.lacks.class != "" && c.changes[x.change].Kind == schema.AlterField:
			out = append(out, fmt.Sprintf("cannot make %s.%s required: %d stored documents would lack it once its stored values are dropped", x.lacks.class, x.lacks.field, n))
		case x.lacks.class != "":
			out = append(out, fmt.Sprintf("cannot make %s.%s required: %d stored documents lack it", x.lacks.class, x.lacks.field, n))
		case x.change >= 0 && c.changes[x.change].Kind == schema.DropEnumValue:
			ch := c.changes[x.change]
			out = append(out, fmt.Sprintf("cannot drop value %s of enum %s: %d stored documents hold it in %s; change them first", ch.Field, ch.Class, n, t[x].path))
		}
	}
	return out
}

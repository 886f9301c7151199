package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// A schema change may leave stored documents invalid in two ways that
// force does not excuse, and it is refused while any would be: values of
// an enum that it drops, and required fields that documents lack once
// it is made (added or made required, or changed to a required type,
// whose values are dropped). Both are found by walking the values the
// change keeps (conformer): columns, and the subdocuments inside them,
// which are JSON, at any depth and in lists.

// conformer finds what a schema change (changes, from prev to next) finds
// in the stored values it keeps. It holds no state between documents.
type conformer struct {
	prev, next *sluice.Schema
	changes    []schema.Change
	// dropped holds, for each enum with values dropped, the change that
	// drops each value.
	dropped map[string]map[string]int
	// required holds the fields stored documents may lack after the
	// change, with the change that makes them required (added, made
	// required, or retyped to a required type).
	required map[fieldKey]int
	// touched says which field types hold values the change may refuse:
	// an enum with values dropped, a subdocument type with a field in
	// required or a kept field of a touched type.
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
		if next.Classes[name].Kind == sluice.KindSubdocument && prev.Class(name) != nil && prev.Classes[name].Kind == sluice.KindSubdocument {
			c.touched[sluice.FieldType{Kind: sluice.TypeSubdocument, Name: name}] = c.subdocumentTouched(name, map[string]bool{})
		}
	}
	return c
}

// kept reports whether field f of class in next has stored values that
// the change keeps: prev's class had it, of the same type.
func (c *conformer) kept(class string, f *sluice.Field) bool {
	pc := c.prev.Class(class)
	if pc == nil {
		return false
	}
	pf := pc.Field(f.Name)
	return pf != nil && pf.Type == f.Type && pf.List == f.List
}

// subdocumentTouched reports whether the stored subdocuments of type name
// hold what the change refuses: a field they may lack, or a kept field of
// a touched type (a subdocument type's, nested, found by walking the
// types from name; seen holds those walked).
func (c *conformer) subdocumentTouched(name string, seen map[string]bool) bool {
	if seen[name] {
		return false
	}
	seen[name] = true
	for _, f := range c.next.Class(name).Fields {
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

// hit is one thing a change finds in a stored document: an enum value it
// drops (change, an index of changes), or a required field the document
// lacks (lacks; change is the change that requires it).
type hit struct {
	change int
	lacks  fieldKey
}

// hits are what a change finds in one document, with the path of the
// first value found of each (for messages).
type hits map[hit]string

// document adds to h what the change finds in row, the columns of a
// stored document of class that its scan reads.
func (c *conformer) document(class string, row map[string]any, h hits) {
	for _, f := range c.next.Class(class).Fields {
		if v, ok := row[f.Name]; ok {
			c.value(f, v, class+"."+f.Name, h)
		}
	}
	c.lacking(class, func(f *sluice.Field) bool { _, ok := row[f.Name]; return ok }, h)
}

// value adds to h what the change finds in v, a stored value of field f
// at path.
func (c *conformer) value(f *sluice.Field, v any, path string, h hits) {
	if !c.touched[f.Type] {
		return
	}
	if !f.List {
		c.element(f.Type, v, path, h)
		return
	}
	items, _ := v.([]any)
	for _, it := range items {
		c.element(f.Type, it, path, h)
	}
}

// element is value for one value (of a list, or not) of type t.
func (c *conformer) element(t sluice.FieldType, v any, path string, h hits) {
	switch t.Kind {
	case sluice.TypeEnum:
		if s, ok := v.(string); ok {
			if i, ok := c.dropped[t.Name][s]; ok {
				h.add(hit{change: i}, path)
			}
		}
	case sluice.TypeSubdocument:
		if m, ok := v.(map[string]any); ok {
			c.object(t.Name, m, path+".", h)
		}
	}
}

// object adds to h what the change finds in m, a stored subdocument of
// type name at path.
func (c *conformer) object(name string, m map[string]any, path string, h hits) {
	for _, f := range c.next.Class(name).Fields {
		if v, ok := m[f.Name]; ok && c.kept(name, f) {
			c.value(f, v, path+f.Name, h)
		}
	}
	// A value of a field retyped is dropped: it does not count.
	c.lacking(name, func(f *sluice.Field) bool { _, ok := m[f.Name]; return ok && c.kept(name, f) }, h)
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

// walkStored walks the stored documents that the change may refuse
// (c.scans) in tx, and returns what it found.
func walkStored(ctx context.Context, tx *postgres.Tx, d *sluice.Database, c *conformer) (tally, error) {
	t := tally{}
	for _, s := range c.scans() {
		err := tx.ReadStored(ctx, d, s, func(id string, row map[string]any) error {
			h := hits{}
			c.document(s.Class, row, h)
			t.add(id, h)
			return nil
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
		return cmp.Or(cmp.Compare(a.change, b.change), cmp.Compare(a.lacks.class, b.lacks.class), cmp.Compare(a.lacks.field, b.lacks.field))
	})
	var out []string
	for _, x := range keys {
		n, ch := t[x].count, c.changes[x.change]
		switch {
		case x.lacks.class != "" && ch.Kind == schema.AlterField:
			out = append(out, fmt.Sprintf("cannot make %s.%s required: %d stored documents would lack it once its stored values are dropped", x.lacks.class, x.lacks.field, n))
		case x.lacks.class != "":
			out = append(out, fmt.Sprintf("cannot make %s.%s required: %d stored documents lack it", x.lacks.class, x.lacks.field, n))
		case ch.Kind == schema.DropEnumValue:
			out = append(out, fmt.Sprintf("cannot drop value %s of enum %s: %d stored documents hold it in %s; change them first", ch.Field, ch.Class, n, t[x].path))
		}
	}
	return out
}

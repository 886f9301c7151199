package schema

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice"
)

// ChangeKind says what a Change does.
type ChangeKind int

// The kinds of schema change. Field changes are listed per class over the
// class's full field list, inherited fields included, so that storage can
// apply them table by table.
const (
	// AddEnum adds an enum; Class names it.
	AddEnum ChangeKind = iota + 1
	// AddEnumValue adds the value Field to the enum Class.
	AddEnumValue
	// AddClass adds a class with all its fields (no AddField follows).
	AddClass
	// ChangeClassKind changes a class between document, abstract and
	// subdocument; destructive when the class had documents of its own.
	ChangeClassKind
	// ChangeParents changes the set of a class's ancestors. It is
	// destructive when a class with documents loses an ancestor: references
	// typed as that ancestor may point to its documents.
	ChangeParents
	// AddField adds an optional field.
	AddField
	// AddRequiredField adds a required field. Documents stored before the
	// change lack it: like RequireField, the caller must check the data.
	AddRequiredField
	// DropField drops a field and its values.
	DropField
	// AlterField changes a field's type or list-ness (and maybe whether it
	// is required).
	AlterField
	// RequireField makes an optional field required. It is not marked
	// destructive: the caller must check that every stored value is present.
	RequireField
	// RelaxField makes a required field optional.
	RelaxField
	// ChangeFieldRole changes the role needed to read a field.
	ChangeFieldRole
	// DropClass drops a class and its documents.
	DropClass
	// DropEnumValue drops the value Field of the enum Class.
	DropEnumValue
	// DropEnum drops an enum; Class names it.
	DropEnum
	// AddIndex adds an index (@index) to a document class's table; Field
	// lists its fields, comma-separated. Never destructive.
	AddIndex
	// DropIndex drops an index of a document class's table; Field lists
	// its fields, comma-separated. Never destructive: no data is lost.
	DropIndex
	// WidenReference changes a reference field's type to one that every
	// class its references may point to still fits (Widens): its stored
	// references are kept. Never destructive. A change of whether it is
	// required follows as RequireField or RelaxField.
	WidenReference
)

// String returns the kind's name, as spelled in Go.
func (k ChangeKind) String() string {
	switch k {
	case AddEnum:
		return "AddEnum"
	case AddEnumValue:
		return "AddEnumValue"
	case AddClass:
		return "AddClass"
	case ChangeClassKind:
		return "ChangeClassKind"
	case ChangeParents:
		return "ChangeParents"
	case AddField:
		return "AddField"
	case AddRequiredField:
		return "AddRequiredField"
	case DropField:
		return "DropField"
	case AlterField:
		return "AlterField"
	case RequireField:
		return "RequireField"
	case RelaxField:
		return "RelaxField"
	case ChangeFieldRole:
		return "ChangeFieldRole"
	case DropClass:
		return "DropClass"
	case DropEnumValue:
		return "DropEnumValue"
	case DropEnum:
		return "DropEnum"
	case AddIndex:
		return "AddIndex"
	case DropIndex:
		return "DropIndex"
	case WidenReference:
		return "WidenReference"
	}
	return fmt.Sprintf("ChangeKind(%d)", int(k))
}

// Change is one difference between two schemas.
type Change struct {
	Kind ChangeKind
	// Class names the class, or the enum for enum changes.
	Class string
	// Field names the field, or the value for enum value changes; "" for
	// class and enum changes.
	Field string
	// Destructive is true when applying the change loses or invalidates
	// stored data.
	Destructive bool
	// Reason says what the change does, for people: "drops field
	// Person.age and its values".
	Reason string
}

// Diff returns the changes that turn schema from into schema to (either may
// be nil, meaning empty). The order is stable and safe to apply in: added
// enums and enum values first, then each class of to (its class-level
// changes, then its field changes in its field order, then its dropped
// fields), then dropped classes, then dropped enum values and enums. Each
// group follows declaration order, of to for what is added or kept and of
// from for what is dropped.
func Diff(from, to *sluice.Schema) []Change {
	old, next := orEmpty(from), orEmpty(to)
	var out []Change
	for _, name := range next.EnumOrder {
		oe, ne := old.Enums[name], next.Enums[name]
		if oe == nil {
			out = append(out, Change{Kind: AddEnum, Class: name, Reason: "adds enum " + name})
			continue
		}
		for _, v := range ne.Values {
			if !oe.Has(v) {
				out = append(out, Change{Kind: AddEnumValue, Class: name, Field: v,
					Reason: fmt.Sprintf("adds value %s to enum %s", v, name)})
			}
		}
	}
	for _, name := range next.Order {
		out = append(out, diffClass(old, next, name)...)
	}
	for _, name := range old.Order {
		if next.Classes[name] == nil {
			c := old.Classes[name]
			out = append(out, Change{Kind: DropClass, Class: name, Destructive: c.Kind != sluice.KindAbstract,
				Reason: "drops " + describeClass(c) + " " + name + droppedData(c.Kind, " and its documents", " and its values in documents")})
		}
	}
	for _, name := range old.EnumOrder {
		oe, ne := old.Enums[name], next.Enums[name]
		if ne == nil {
			out = append(out, Change{Kind: DropEnum, Class: name, Destructive: true,
				Reason: "drops enum " + name + "; stored values of it become invalid"})
			continue
		}
		for _, v := range oe.Values {
			if !ne.Has(v) {
				out = append(out, Change{Kind: DropEnumValue, Class: name, Field: v, Destructive: true,
					Reason: fmt.Sprintf("drops value %s of enum %s; stored %s values become invalid", v, name, v)})
			}
		}
	}
	return out
}

// diffClass returns the changes to the class name of next.
func diffClass(old, next *sluice.Schema, name string) []Change {
	oc, nc := old.Classes[name], next.Classes[name]
	if oc == nil {
		return []Change{{Kind: AddClass, Class: name, Reason: "adds " + describeClass(nc) + " " + name}}
	}
	var out []Change
	// Only documents and subdocuments hold values: changing the fields of
	// an abstract class loses nothing by itself (its descendants get their
	// own changes).
	holdsData := oc.Kind != sluice.KindAbstract
	valuesLost, valuesDropped := "", ""
	if holdsData {
		valuesLost, valuesDropped = " and its values", "; its stored values are dropped"
	}
	if oc.Kind != nc.Kind {
		out = append(out, Change{Kind: ChangeClassKind, Class: name, Destructive: oc.Kind == sluice.KindDocument,
			Reason: fmt.Sprintf("changes %s from %s to %s%s", name, describeClass(oc), describeClass(nc),
				droppedData(oc.Kind, ", dropping its documents", ""))})
	}
	oa, na := ancestors(old, name), ancestors(next, name)
	if !slices.Equal(oa, na) {
		var lost, gained []string
		for _, a := range oa {
			if !slices.Contains(na, a) {
				lost = append(lost, a)
			}
		}
		for _, a := range na {
			if !slices.Contains(oa, a) {
				gained = append(gained, a)
			}
		}
		var parts []string
		if len(gained) > 0 {
			parts = append(parts, "makes "+name+" inherit from "+strings.Join(gained, ", "))
		}
		if len(lost) > 0 {
			parts = append(parts, "makes "+name+" no longer inherit from "+strings.Join(lost, ", "))
		}
		reason := strings.Join(parts, " and ")
		destructive := len(lost) > 0 && oc.Kind == sluice.KindDocument
		if destructive {
			reason += "; references to " + strings.Join(lost, " or ") + " may point to " + name + " documents"
		}
		out = append(out, Change{Kind: ChangeParents, Class: name, Destructive: destructive, Reason: reason})
	}
	oldFields, newFields := fieldsByName(oc), fieldsByName(nc)
	for _, nf := range nc.Fields {
		of := oldFields[nf.Name]
		path := name + "." + nf.Name
		switch {
		case of == nil && nf.Required:
			out = append(out, Change{Kind: AddRequiredField, Class: name, Field: nf.Name,
				Reason: fmt.Sprintf("adds required field %s %s; existing %s values must have it", path, typeString(nf), name)})
		case of == nil:
			out = append(out, Change{Kind: AddField, Class: name, Field: nf.Name,
				Reason: fmt.Sprintf("adds field %s %s", path, typeString(nf))})
		case Widens(old, next, of, nf):
			out = append(out, Change{Kind: WidenReference, Class: name, Field: nf.Name,
				Reason: fmt.Sprintf("changes field %s from %s to %s; its stored references are kept (each class they may point to is a %s)", path, typeString(of), typeString(nf), nf.Type.Name)})
			switch {
			case !of.Required && nf.Required:
				out = append(out, Change{Kind: RequireField, Class: name, Field: nf.Name,
					Reason: fmt.Sprintf("makes field %s required; existing %s values must have it", path, name)})
			case of.Required && !nf.Required:
				out = append(out, Change{Kind: RelaxField, Class: name, Field: nf.Name,
					Reason: fmt.Sprintf("makes field %s optional", path)})
			}
		case of.Type != nf.Type || of.List != nf.List:
			from, to := typeString(of), typeString(nf)
			if of.Type.Kind != nf.Type.Kind {
				from, to = typeKindWord(of.Type.Kind)+from, typeKindWord(nf.Type.Kind)+to
			}
			out = append(out, Change{Kind: AlterField, Class: name, Field: nf.Name, Destructive: holdsData,
				Reason: fmt.Sprintf("changes field %s from %s to %s%s", path, from, to, valuesDropped)})
		case !of.Required && nf.Required:
			out = append(out, Change{Kind: RequireField, Class: name, Field: nf.Name,
				Reason: fmt.Sprintf("makes field %s required; existing %s values must have it", path, name)})
		case of.Required && !nf.Required:
			out = append(out, Change{Kind: RelaxField, Class: name, Field: nf.Name,
				Reason: fmt.Sprintf("makes field %s optional", path)})
		}
		if of != nil && of.ReadRole != nf.ReadRole {
			out = append(out, Change{Kind: ChangeFieldRole, Class: name, Field: nf.Name,
				Reason: fmt.Sprintf("changes the role needed to read %s from %s to %s", path, of.ReadRole, nf.ReadRole)})
		}
	}
	for _, of := range oc.Fields {
		if newFields[of.Name] == nil {
			out = append(out, Change{Kind: DropField, Class: name, Field: of.Name, Destructive: holdsData,
				Reason: fmt.Sprintf("drops field %s.%s%s", name, of.Name, valuesLost)})
		}
	}
	return append(out, diffIndexes(oc, nc)...)
}

// Widens reports whether field of of schema from, changed to nf in
// schema to, keeps its stored values as they are: both are references
// of another type, both single or both lists, and every document class
// a reference of of's type may point to in from is a document class that
// one of nf's type may point to in to (owner: Person to owner: Named,
// with Person implementing Named). Its column, and every reference in
// it, stays.
func Widens(from, to *sluice.Schema, of, nf *sluice.Field) bool {
	if of.Type == nf.Type || of.List != nf.List || of.Type.Kind != sluice.TypeReference || nf.Type.Kind != sluice.TypeReference {
		return false
	}
	for _, name := range orEmpty(from).Order {
		if fitsReference(from, name, of.Type.Name) && !fitsReference(to, name, nf.Type.Name) {
			return false
		}
	}
	return true
}

// fitsReference reports whether, in s, a reference to class may point to
// a document of class doc.
func fitsReference(s *sluice.Schema, doc, class string) bool {
	s = orEmpty(s)
	dc := s.Class(doc)
	return dc != nil && dc.Kind == sluice.KindDocument && s.IsA(doc, class)
}

// diffIndexes returns the indexes added to and dropped from the table of
// document class nc (oc before). Only document classes have tables.
func diffIndexes(oc, nc *sluice.Class) []Change {
	if nc.Kind != sluice.KindDocument {
		return nil
	}
	var before []sluice.Index
	if oc.Kind == sluice.KindDocument {
		before = oc.Indexes
	}
	// Sets of their fields: a stored schema's classes may have any number
	// of indexes (MaxIndexes bounds new ones), and comparing each with
	// every other cost the square of their number.
	set := func(list []sluice.Index) map[string]bool {
		m := make(map[string]bool, len(list))
		for _, ix := range list {
			m[strings.Join(ix.Fields, "\x00")] = true
		}
		return m
	}
	had, has := set(before), set(nc.Indexes)
	var out []Change
	for _, ix := range nc.Indexes {
		if !had[strings.Join(ix.Fields, "\x00")] {
			fields := strings.Join(ix.Fields, ", ")
			out = append(out, Change{Kind: AddIndex, Class: nc.Name, Field: fields,
				Reason: fmt.Sprintf("adds an index on %s(%s)", nc.Name, fields)})
		}
	}
	for _, ix := range before {
		if !has[strings.Join(ix.Fields, "\x00")] {
			fields := strings.Join(ix.Fields, ", ")
			out = append(out, Change{Kind: DropIndex, Class: nc.Name, Field: fields,
				Reason: fmt.Sprintf("drops the index on %s(%s)", nc.Name, fields)})
		}
	}
	return out
}

// fieldsByName indexes c's fields by name.
func fieldsByName(c *sluice.Class) map[string]*sluice.Field {
	m := make(map[string]*sluice.Field, len(c.Fields))
	for _, f := range c.Fields {
		m[f.Name] = f
	}
	return m
}

// ancestors returns every class name inherits from, directly or not, sorted.
func ancestors(s *sluice.Schema, name string) []string {
	var out []string
	seen := map[string]bool{name: true}
	stack := []string{name}
	for len(stack) > 0 {
		c := s.Classes[stack[len(stack)-1]]
		stack = stack[:len(stack)-1]
		if c == nil {
			continue
		}
		for _, p := range c.Parents {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
				stack = append(stack, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// typeKindWord names a kind of field type for a reason that would otherwise
// read "from B to B".
func typeKindWord(k sluice.TypeKind) string {
	switch k {
	case sluice.TypeEnum:
		return "enum "
	case sluice.TypeReference:
		return "reference to "
	case sluice.TypeSubdocument:
		return "subdocument "
	}
	return "scalar "
}

// describeClass names a class's kind for a reason.
func describeClass(c *sluice.Class) string {
	switch c.Kind {
	case sluice.KindAbstract:
		return "abstract class"
	case sluice.KindSubdocument:
		return "subdocument"
	}
	return "class"
}

// droppedData returns what is lost with a class of kind k: document for a
// document class, sub for a subdocument, nothing for an abstract class.
func droppedData(k sluice.ClassKind, document, sub string) string {
	switch k {
	case sluice.KindDocument:
		return document
	case sluice.KindSubdocument:
		return sub
	}
	return ""
}

// orEmpty returns s, or an empty schema for nil.
func orEmpty(s *sluice.Schema) *sluice.Schema {
	if s == nil {
		return &sluice.Schema{}
	}
	return s
}

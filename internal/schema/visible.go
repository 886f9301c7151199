package schema

import (
	"fmt"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/sluice-dev/sluice"
)

// VisibleSDL returns the schema text sdl as a user with role on its
// database may see it: the source itself for an admin, and otherwise the
// schema without what role may not read, printed again: the fields it may
// not read (@private, or @protected by a stronger role), the subdocuments
// it sees no field of, with the fields of their types (see Visibility),
// and every @index that names a field it may not read. A reader learns no
// more from the schema than from the GraphQL schema its role is served,
// which leaves all of them out too.
//
// An @index naming a hidden field is left out whole rather than without
// that name: @index(fields: ["name", "salaryBand"]) less salaryBand
// would claim an index on name alone, which the database does not have,
// and orders it does not serve (name then _id); the role's GraphQL schema
// does not list that index's orders either.
//
// The reprint drops comments: a comment may describe a hidden field, and
// the parser attaches a comment to the token after it, so a comment
// cannot be told apart from its neighbour's. Descriptions stay with their
// fields and types.
func VisibleSDL(sdl string, role sluice.Role) (string, error) {
	if role >= sluice.RoleAdmin {
		return sdl, nil
	}
	s, err := Parse(sdl)
	if err != nil {
		return "", err
	}
	vis := VisibilityOf(s, role)
	doc, err := parser.ParseSchema(&ast.Source{Name: "schema", Input: sdl})
	if err != nil {
		return "", err
	}
	defs := doc.Definitions[:0]
	for _, def := range doc.Definitions {
		c := s.Class(def.Name)
		if c == nil { // an enum
			defs = append(defs, def)
			continue
		}
		if !vis.Class(c) {
			continue
		}
		fields := def.Fields[:0]
		for _, fd := range def.Fields {
			if vis.Field(c.Field(fd.Name)) {
				fields = append(fields, fd)
			}
		}
		def.Fields = fields
		dirs := def.Directives[:0]
		for _, d := range def.Directives {
			if d.Name == dirIndex && !indexVisible(d, c, vis) {
				continue
			}
			dirs = append(dirs, d)
		}
		def.Directives = dirs
		defs = append(defs, def)
	}
	doc.Definitions = defs
	var b strings.Builder
	formatter.NewFormatter(&b, formatter.WithIndent("  ")).FormatSchemaDocument(doc)
	return b.String(), nil
}

// indexVisible reports whether the reader sees every field that d, an
// @index(fields: […]) of class c, names.
func indexVisible(d *ast.Directive, c *sluice.Class, vis *Visibility) bool {
	ix, err := typeIndex(d, c.Name)
	if err != nil {
		return false // Parse accepted it; not showing it is the safe side
	}
	for _, name := range ix.Fields {
		if f := c.Field(name); f == nil || !vis.Field(f) {
			return false
		}
	}
	return true
}

// Visibility says which classes and fields of a schema a reader with one
// role sees. It sees a field its role may read, unless the field's type
// is a subdocument it sees nothing of; it sees a subdocument class when
// it sees one of its fields. A subdocument whose fields are all hidden
// from the role, or are all of such subdocuments, would be an object
// type without fields, which GraphQL does not have: the role's schema
// leaves it out, with every field of its type.
//
// A subdocument that holds only itself (type Node @subdocument { next:
// Node }) is seen: only a chain of fields that ends in hidden ones
// empties a class, so a role's schema loses nothing more than it must.
type Visibility struct {
	role  sluice.Role
	empty map[string]bool
}

// VisibilityOf returns what a reader with role sees of s, computed in
// time linear in s's fields.
func VisibilityOf(s *sluice.Schema, role sluice.Role) *Visibility {
	v := &Visibility{role: role, empty: map[string]bool{}}
	// shown counts the fields of each subdocument that role may read and
	// that are not known to be of an empty subdocument; users lists, for
	// each subdocument, the subdocuments with a field of its type that
	// role may read, once per field.
	shown := map[string]int{}
	users := map[string][]string{}
	var queue []string
	for _, name := range s.Order {
		c := s.Classes[name]
		if c.Kind != sluice.KindSubdocument {
			continue
		}
		for _, f := range c.Fields {
			if f.ReadRole > role {
				continue
			}
			shown[name]++
			if f.Type.Kind == sluice.TypeSubdocument {
				users[f.Type.Name] = append(users[f.Type.Name], name)
			}
		}
		if shown[name] == 0 {
			v.empty[name] = true
			queue = append(queue, name)
		}
	}
	for len(queue) > 0 {
		name := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, u := range users[name] {
			if shown[u]--; shown[u] == 0 {
				v.empty[u] = true
				queue = append(queue, u)
			}
		}
	}
	return v
}

// Class reports whether the reader sees class c: every document class
// and interface, and a subdocument with a field the reader sees.
func (v *Visibility) Class(c *sluice.Class) bool { return !v.empty[c.Name] }

// Field reports whether the reader sees field f.
func (v *Visibility) Field(f *sluice.Field) bool {
	return f.ReadRole <= v.role && !(f.Type.Kind == sluice.TypeSubdocument && v.empty[f.Type.Name])
}

// Fields returns the fields of c the reader sees, in c's order.
func (v *Visibility) Fields(c *sluice.Class) []*sluice.Field {
	var out []*sluice.Field
	for _, f := range c.Fields {
		if v.Field(f) {
			out = append(out, f)
		}
	}
	return out
}

// SeenReasons returns the reasons of changes (which turn schema from into
// schema to) that a reader with role sees, in order, and how many more
// changes there are that it does not see. A reader sees a change when
// everything the change names is visible to it in each of the two
// schemas that has it: a field made @private is not seen (its reason
// names the new role), nor a field added as one, nor an index on a
// hidden field. Enums are seen, as VisibleSDL shows them. What the change
// names reaches readers in commit messages and in the error that ends a
// stream, and a field hidden from them must not be named there either.
func SeenReasons(changes []Change, from, to *sluice.Schema, role sluice.Role) (seen []string, unseen int) {
	if role >= sluice.RoleAdmin {
		for _, c := range changes {
			seen = append(seen, c.Reason)
		}
		return seen, 0
	}
	from, to = orEmpty(from), orEmpty(to)
	fv, tv := VisibilityOf(from, role), VisibilityOf(to, role)
	for _, c := range changes {
		if changeSeen(c, from, fv) && changeSeen(c, to, tv) {
			seen = append(seen, c.Reason)
		} else {
			unseen++
		}
	}
	return seen, unseen
}

// changeSeen reports whether what change c names is visible in s (as vis
// says) where s has it.
func changeSeen(c Change, s *sluice.Schema, vis *Visibility) bool {
	switch c.Kind {
	case AddEnum, AddEnumValue, DropEnum, DropEnumValue:
		return true
	}
	cl := s.Classes[c.Class]
	if cl == nil {
		return true
	}
	if !vis.Class(cl) {
		return false
	}
	var fields []string
	switch c.Kind {
	case AddField, AddRequiredField, DropField, AlterField, RequireField, RelaxField, ChangeFieldRole, WidenReference:
		fields = []string{c.Field}
	case AddIndex, DropIndex:
		fields = strings.Split(c.Field, ", ")
	}
	for _, name := range fields {
		if f := cl.Field(name); f != nil && !vis.Field(f) {
			return false
		}
	}
	return true
}

// DescribeChanges is the reasons of changes a reader with role sees (as
// SeenReasons), joined by "; ", followed by a count of the ones it does
// not see ("2 changes not shown: they concern what role read may not
// see"); "" when there are no changes.
func DescribeChanges(changes []Change, from, to *sluice.Schema, role sluice.Role) string {
	seen, unseen := SeenReasons(changes, from, to, role)
	switch {
	case unseen == 1:
		seen = append(seen, fmt.Sprintf("1 change not shown: it concerns what role %s may not see", role))
	case unseen > 1:
		seen = append(seen, fmt.Sprintf("%d changes not shown: they concern what role %s may not see", unseen, role))
	}
	return strings.Join(seen, "; ")
}

package graph

import (
	"strings"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// Backlinks. Every reference field f of a class C (single or a list)
// gives the class it points at, and each class below it, the field
// _<f>_of_<C>: the documents of C (and its subclasses) whose f points at
// the document. Its name cannot be a user's field (a leading underscore
// is reserved) nor another backlink's: a class name has no underscore,
// so the text after the last "_of_" is C and the rest is f.

// backlink is the backlink of reference field field of class class.
type backlink struct {
	field *sluice.Field
	class *sluice.Class
}

func (b backlink) name() string { return "_" + b.field.Name + "_of_" + b.class.Name }

// backlinksByTarget returns, for every class with an id, the backlinks
// it has that a reader with role may see, in schema order: those of the
// reference fields, readable by role, of every class with an id, that
// point at the class or at one it inherits from. A hidden reference field
// gives no backlink: which documents point at one through it is what the
// field would tell. Each referenced class's descendants are listed once,
// so the cost is that of the reference fields and the classes, not of
// their product.
func backlinksByTarget(s *sluice.Schema, role sluice.Role) map[string][]backlink {
	out := map[string][]backlink{}
	below := map[string][]string{}
	for _, c := range queryClasses(s) {
		for _, f := range c.Fields {
			if f.Type.Kind != sluice.TypeReference || f.ReadRole > role {
				continue
			}
			targets, ok := below[f.Type.Name]
			if !ok {
				targets = s.Descendants(f.Type.Name)
				below[f.Type.Name] = targets
			}
			for _, t := range targets {
				if s.Classes[t].Kind != sluice.KindSubdocument {
					out[t] = append(out[t], backlink{field: f, class: c})
				}
			}
		}
	}
	return out
}

// parseBacklink returns the backlink named name, when it is one a reader
// with role may see.
func parseBacklink(s *sluice.Schema, role sluice.Role, name string) (backlink, bool) {
	if !strings.HasPrefix(name, "_") {
		return backlink{}, false
	}
	i := strings.LastIndex(name, "_of_")
	if i < 2 {
		return backlink{}, false
	}
	c := s.Class(name[i+len("_of_"):])
	if c == nil || c.Kind == sluice.KindSubdocument {
		return backlink{}, false
	}
	f := c.Field(name[1:i])
	if f == nil || f.Type.Kind != sluice.TypeReference || f.ReadRole > role {
		return backlink{}, false
	}
	return backlink{field: f, class: c}, true
}

// mayBeBacklink reports whether a field named name may be a backlink,
// whatever the schema: for checks that err on the side of yes.
func mayBeBacklink(name string) bool {
	return strings.HasPrefix(name, "_") && strings.Contains(name, "_of_")
}

// backlinks writes the backlink fields of class c.
func (g *sdlGen) backlinks(c *sluice.Class) {
	if g.links == nil {
		g.links = backlinksByTarget(g.s, g.role)
	}
	for _, b := range g.links[c.Name] {
		kind := "is this document"
		if b.field.List {
			kind = "holds this document"
		}
		g.description("  ", "The "+b.class.Name+" documents (of its subclasses too) whose "+b.field.Name+" "+kind+" (a backlink): filtered, sorted and paged as the query field "+b.class.Name+" is.")
		g.p("  %s(filter: %s%s, orderBy: %s%s, limit: Int, offset: Int): [%s!]!\n",
			b.name(), b.class.Name, suffixFilter, b.class.Name, suffixOrdering, b.class.Name)
	}
}

// backlinkKey names the result of one backlink selection for one
// document: the selection's field node (its arguments) and the id of the
// document it is on.
type backlinkKey struct {
	field *ast.Field
	id    string
}

// backlinkGroup is one backlink selection's reads for one level of a
// result: the documents it is selected on.
type backlinkGroup struct {
	link    backlink
	field   *ast.Field
	sel     ast.SelectionSet
	targets []string
	seen    map[string]bool
}

// loadBacklinks reads the backlinks of groups, one statement each, into
// x.backlinks, and returns the documents read, with their selections,
// for the next level of prefetch.
func (x *execution) loadBacklinks(groups []*backlinkGroup) ([]pending, error) {
	var next []pending
	for _, g := range groups {
		q, err := ParseQueryArgs(x.es.schema, g.link.class.Name, g.field, x.op.Variables)
		if err != nil {
			return nil, err
		}
		q.Fields = selectedFields(x.op.Doc, g.sel)
		// Each document's list is bounded by the rows the request has
		// left, and so are all of them together: Postgres never sends
		// more than one document past the bound. An evaluation that
		// counts no rows bounds each backlink read by the configured
		// bound all the same: how many documents point at one is data.
		total, own := x.rowBudget(), false
		if max := x.es.limits.MaxResultRows; total < 0 && max > 0 {
			total, own = max+1, true
		}
		if total >= 0 && (q.Limit < 0 || q.Limit > int64(total)) {
			q.Limit = int64(total)
		}
		lists, err := x.es.store.Backlinks(x.ctx, x.req.DB, x.es.schema, engine.BacklinkQuery{
			Query: q, Field: g.link.field.Name, Targets: g.targets, Total: int64(total)})
		if err != nil {
			return nil, x.readErr(err)
		}
		n := 0
		for _, l := range lists {
			n += len(l)
		}
		if err := x.readRows(n); err != nil {
			return nil, err
		}
		if own && n > x.es.limits.MaxResultRows {
			return nil, errTooManyRows(x.es.limits.MaxResultRows)
		}
		if x.backlinks == nil {
			x.backlinks = map[backlinkKey][]*object{}
		}
		for i, l := range lists {
			objs := make([]*object, len(l))
			for j, d := range l {
				o := docObject(x.es.schema, d.Doc, d.Commit)
				o.partial = true
				objs[j] = o
				next = append(next, pending{obj: o, sel: g.sel, static: g.link.class.Name})
			}
			x.backlinks[backlinkKey{g.field, g.targets[i]}] = objs
		}
	}
	return next, nil
}

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
// document: the selection's field node (its arguments), the selection
// set collected for it there (selKey) and the id of the document it is
// on. The collected set is the field node's merged with those of the
// fields of the same alias that apply to the document's type (fragments
// on it), so one field node has a set for each type: the documents read
// for one set lack the fields another selects.
type backlinkKey struct {
	field *ast.Field
	sel   string
	id    string
}

// backlinkGroup is one backlink field node's reads for one level of a
// result, one statement: the documents it is selected on, with each
// selection set it is collected with there (backlinkSel).
type backlinkGroup struct {
	link    backlink
	field   *ast.Field
	sels    []*backlinkSel
	bySel   map[string]*backlinkSel
	targets []string // of every set, once each
	seen    map[string]bool
}

// backlinkSel is a selection set a backlink field node is collected with
// (selKey) and the documents it is on.
type backlinkSel struct {
	key     string
	sel     ast.SelectionSet
	targets []string
	seen    map[string]bool
}

// add adds document id, on which the group's field is collected with
// selection set sel, of key key (selKey).
func (g *backlinkGroup) add(key string, sel ast.SelectionSet, id string) {
	if g.bySel == nil {
		g.bySel, g.seen = map[string]*backlinkSel{}, map[string]bool{}
	}
	s := g.bySel[key]
	if s == nil {
		s = &backlinkSel{key: key, sel: sel, seen: map[string]bool{}}
		g.bySel[key] = s
		g.sels = append(g.sels, s)
	}
	if !s.seen[id] {
		s.seen[id] = true
		s.targets = append(s.targets, id)
	}
	if !g.seen[id] {
		g.seen[id] = true
		g.targets = append(g.targets, id)
	}
}

// loadBacklinks reads the backlinks of groups, one statement each (with
// the fields of all the group's selection sets), into x.backlinks, and
// returns the documents read, with each selection set they are read
// for, for the next level of prefetch.
func (x *execution) loadBacklinks(groups []*backlinkGroup) ([]pending, error) {
	var next []pending
	for _, g := range groups {
		q, err := ParseQueryArgs(x.es.schema, g.link.class.Name, g.field, x.op.Variables)
		if err != nil {
			// The field's error, at its path (its every place in the
			// response): writeDocField records it where it writes the
			// field, as any field's, and the null goes up from there.
			// Nothing is read for it.
			if x.backlinkErrs == nil {
				x.backlinkErrs = map[*ast.Field]error{}
			}
			x.backlinkErrs[g.field] = err
			continue
		}
		var all ast.SelectionSet
		for _, s := range g.sels {
			all = append(all, s.sel...)
		}
		q.Fields = selectedFields(x.op.Doc, all)
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
		byTarget := make(map[string][]*object, len(lists))
		for i, l := range lists {
			objs := make([]*object, len(l))
			for j, d := range l {
				o := docObject(x.es.schema, d.Doc, d.Commit)
				o.partial = true
				objs[j] = o
			}
			byTarget[g.targets[i]] = objs
		}
		for _, s := range g.sels {
			for _, id := range s.targets {
				objs := byTarget[id]
				x.backlinks[backlinkKey{g.field, s.key, id}] = objs
				for _, o := range objs {
					next = append(next, pending{obj: o, sel: s.sel, static: g.link.class.Name})
				}
			}
		}
	}
	return next, nil
}

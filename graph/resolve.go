package graph

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/sluice-dev/sluice"
)

// object is a document or subdocument being resolved.
type object struct {
	class *sluice.Class
	id    string // "" for subdocuments
	// version is a document's version (_version): as read, or the one
	// the change of an event gave it.
	version string
	fields  map[string]any
	// commit is the commit that last wrote a document (nil when pruned).
	commit *sluice.Commit
	// changeType is set on documents of subscription events.
	changeType string
	// partial is set when fields holds only the fields one selection
	// needed (a projected query); such objects are not reused for
	// references.
	partial bool
}

func docObject(s *sluice.Schema, d *sluice.Document, c *sluice.Commit) *object {
	return &object{class: s.Class(d.Type), id: d.ID, version: d.Version, fields: d.Fields, commit: c}
}

// pending is an object waiting for its references to be loaded.
type pending struct {
	obj    *object
	sel    ast.SelectionSet
	static string // the GraphQL type the selection is on
}

// documentClass returns class name of s when it has documents of its own,
// nil otherwise. A change image's class may have been dropped since, or
// made an interface or a subdocument type: such a document cannot be shown
// as any GraphQL object type (an interface's name is no __typename, and
// every fragment on its implementations would apply), so a change set or
// subscription leaves it out, as it leaves out a dropped class's.
func documentClass(s *sluice.Schema, name string) *sluice.Class {
	if c := s.Class(name); c != nil && c.Kind == sluice.KindDocument {
		return c
	}
	return nil
}

// runtimeType returns the object type an object of class is presented as
// where the schema expects type static: its own class for an interface
// (abstract parent), static otherwise (a concrete parent presents its
// subclasses' documents as itself, with _type telling the class).
func (x *execution) runtimeType(static string, class *sluice.Class) string {
	def := x.es.gql.Types[static]
	if def != nil && def.Kind == ast.Interface {
		if d := x.es.gql.Types[class.Name]; d != nil && d.Kind == ast.Object {
			return class.Name
		}
	}
	return static
}

func (x *execution) fields(sel ast.SelectionSet, runtime string) []graphql.CollectedField {
	return graphql.CollectFields(x.op, sel, x.es.sat[runtime])
}

// prefetch loads every document the selections of level reference or
// link back to, level by level: one statement per level of references,
// and one per backlink field node and level, whatever the number of
// documents (with the fields of every selection set the node is
// collected with on that level's documents' types).
//
// Its work is bounded by the documents read, not by the answer: a
// document is walked once per selection set and GraphQL type it is
// reached with (walkKey), however many times the answer holds it. A
// reference held n times, or documents that list each other, make an
// answer that grows as n^depth, which the response bytes limit bounds as
// it is written (the writer reads the cache lazily); walking each
// occurrence here instead made the walk grow as n^depth, unbounded by
// any limit, with the read snapshot's connection held. The walk also
// counts the objects and references it visits against the response
// bytes bound (walkStep), and stops when the request's context ends.
func (x *execution) prefetch(level []pending) error {
	seen := map[walkKey]bool{}
	for len(level) > 0 {
		var next []pending
		var want []string
		wanted := map[string]bool{}
		var groups []*backlinkGroup
		byField := map[*ast.Field]*backlinkGroup{}
		var walk func(p pending) error
		walk = func(p pending) error {
			if err := x.walkStep(1); err != nil {
				return err
			}
			rt := x.runtimeType(p.static, p.obj.class)
			for _, cf := range x.fields(p.sel, rt) {
				if len(cf.Selections) == 0 {
					continue
				}
				if bl, ok := parseBacklink(x.es.schema, x.es.role, cf.Name); ok && p.obj.id != "" {
					g := byField[cf.Field]
					if g == nil {
						g = &backlinkGroup{link: bl, field: cf.Field}
						byField[cf.Field] = g
						groups = append(groups, g)
					}
					g.add(x.selKey(cf.Selections), cf.Selections, p.obj.id)
					continue
				}
				f := p.obj.class.Field(cf.Name)
				if f == nil || f.ReadRole > x.es.role {
					continue
				}
				v, ok := p.obj.fields[f.Name]
				if !ok {
					continue
				}
				items := []any{v}
				if f.List {
					items, _ = v.([]any)
				}
				if err := x.walkStep(len(items)); err != nil {
					return err
				}
				sel := ""
				if f.Type.Kind == sluice.TypeReference {
					sel = x.selKey(cf.Selections)
				}
				for _, it := range items {
					switch f.Type.Kind {
					case sluice.TypeReference:
						id, ok := refID(it)
						if !ok || !x.refersTo(id, f.Type.Name) {
							continue
						}
						if o, cached := x.cache[id]; (!cached || o != nil && o.partial) && !wanted[id] {
							wanted[id] = true
							want = append(want, id)
						}
						k := walkKey{id: id, static: f.Type.Name, sel: sel}
						if seen[k] {
							continue // walked, or to be, with this selection
						}
						seen[k] = true
						next = append(next, pending{obj: &object{id: id}, sel: cf.Selections, static: f.Type.Name})
					case sluice.TypeSubdocument:
						if m, ok := it.(map[string]any); ok {
							if err := walk(pending{obj: subObject(x.es.schema, f.Type.Name, m), sel: cf.Selections, static: f.Type.Name}); err != nil {
								return err
							}
						}
					}
				}
			}
			return nil
		}
		for _, p := range level {
			if err := walk(p); err != nil {
				return err
			}
		}
		if len(want) > 0 {
			docs, err := x.es.store.DocumentsByID(x.ctx, x.req.DB, x.es.schema, want, x.rowBudget())
			if err != nil {
				return x.readErr(err)
			}
			if err := x.readRows(len(docs)); err != nil {
				return err
			}
			found := make(map[string]bool, len(docs))
			for _, d := range docs {
				x.cache[d.Doc.ID] = docObject(x.es.schema, d.Doc, d.Commit)
				found[d.Doc.ID] = true
			}
			for _, id := range want {
				if !found[id] {
					x.cache[id] = nil
				}
			}
		}
		linked, err := x.loadBacklinks(groups)
		if err != nil {
			return err
		}
		level = level[:0]
		for _, p := range next {
			if o := x.cache[p.obj.id]; o != nil && !o.partial {
				level = append(level, pending{obj: o, sel: p.sel, static: p.static})
			}
		}
		for _, p := range linked {
			// A document in the backlinks of several documents is
			// walked once (backlinks are read with their selection's
			// fields only: partial, keyed apart from whole documents).
			k := walkKey{id: p.obj.id, static: p.static, sel: x.selKey(p.sel), partial: true}
			if !seen[k] {
				seen[k] = true
				level = append(level, p)
			}
		}
	}
	return nil
}

// walkKey names a walk of prefetch: a document, the GraphQL type it is
// presented as, and the selection set on it (selKey). Walking it again
// finds the same references (the objects of the root fields are not
// keyed: a subscription event's document is the change's image, not the
// one a reference reads).
type walkKey struct {
	id, static, sel string
	partial         bool
}

// selKey returns a key of selection set sel: the identities of its
// selections. The selections of a field selected more than once are
// merged into a new slice each time the fields are collected, so the
// slice itself cannot be the key; its elements are the same nodes.
func (x *execution) selKey(sel ast.SelectionSet) string {
	if x.selIDs == nil {
		x.selIDs = map[ast.Selection]uint64{}
	}
	b := make([]byte, 0, 2*len(sel))
	for _, s := range sel {
		id, ok := x.selIDs[s]
		if !ok {
			id = uint64(len(x.selIDs))
			x.selIDs[s] = id
		}
		b = binary.AppendUvarint(b, id)
	}
	return string(b)
}

// walkStep counts n objects or references visited by prefetch and fails
// once they pass the response bytes bound, or the request's context is
// done. Every object walked, and every reference it holds that is not
// dangling, is written in the answer at least once, in at least two
// bytes ({}), so a walk past the bound is of an answer past it. A
// subscription resolves the events of a commit (or piece) together, each
// bounded by the response bytes bound on its own: their walk may visit
// that many for each event (walkBound), still linear in what is sent.
func (x *execution) walkStep(n int) error {
	x.walked += n
	if x.walked>>10 != (x.walked-n)>>10 || n >= 1<<10 {
		if err := x.ctx.Err(); err != nil {
			return err
		}
	}
	if max := x.walkBound(); max > 0 && x.walked > max {
		return x.tooMuchWalked()
	}
	return nil
}

func subObject(s *sluice.Schema, class string, m map[string]any) *object {
	return &object{class: s.Class(class), fields: m}
}

func refID(v any) (string, bool) {
	switch r := v.(type) {
	case string:
		return r, true
	case map[string]any:
		id, ok := r["@id"].(string)
		return id, ok
	}
	return "", false
}

// pathSeg is one step of the path to a value being written: a field's
// response name, or (name "") an index in a list. Plain values, not
// ast.PathElement (an interface: a step per field written would
// allocate); an ast.Path is made only for an error (nullField).
type pathSeg struct {
	name  string
	index int
}

// writeObjects writes a list of objects of GraphQL type static, a list of
// non-null elements ([X!]). It returns false, having written nothing,
// when an element could not be written (writeObject): a list of non-null
// elements holding a null is null itself, which the caller's type
// decides the fate of.
func (x *execution) writeObjects(w *jsonWriter, objs []*object, sel ast.SelectionSet, static string) bool {
	start := w.Len()
	w.WriteByte('[')
	for i, o := range objs {
		if w.over {
			return true // the rest would be dropped; stop walking it
		}
		if i > 0 {
			w.WriteByte(',')
		}
		x.path = append(x.path, pathSeg{index: i})
		ok := x.writeObject(w, o, sel, static)
		x.path = x.path[:len(x.path)-1]
		if !ok {
			w.Truncate(start)
			return false
		}
	}
	w.WriteByte(']')
	return true
}

// writeObject writes one object of GraphQL type static with its selection.
// References must have been loaded by prefetch. It returns false when a
// non-null field of the object has no value that can be written (see
// writeDocField): as GraphQL has it, the object is then null, and what it
// wrote is to be dropped by the caller, whose type says whether the null
// goes further up.
func (x *execution) writeObject(w *jsonWriter, o *object, sel ast.SelectionSet, static string) bool {
	rt := x.runtimeType(static, o.class)
	w.WriteByte('{')
	for i, cf := range x.fields(sel, rt) {
		w.key(cf.Alias, i == 0)
		x.path = append(x.path, pathSeg{name: cf.Alias})
		ok := x.writeDocField(w, o, cf, rt)
		x.path = x.path[:len(x.path)-1]
		if !ok {
			return false
		}
	}
	w.WriteByte('}')
	return true
}

// writeDocField writes the value of field cf of object o, whose runtime type
// is rt; x.path ends with cf. A field without a value that can be written
// (missing, null, of another type or enum value: a document read as of a
// position before today's schema required it, an old change image, a row
// written in SQL before Sluice checked what it reads) is null when its
// type is nullable; when it is not, writeField records the error at the
// field's path and returns false, and the null goes up to the nearest
// nullable parent, as GraphQL requires: a client typed from the schema
// never reads a null the schema says cannot be.
func (x *execution) writeDocField(w *jsonWriter, o *object, cf graphql.CollectedField, rt string) bool {
	switch cf.Name {
	case "__typename":
		w.str(rt)
		return true
	case fieldID:
		if o.id == "" {
			// Only a class's objects have _id (ID!), and each has an id.
			x.nullField(rt, cf.Name, "ID!")
			return false
		}
		w.str(o.id)
		return true
	case fieldType:
		w.str(o.class.Name)
		return true
	case fieldVersion:
		w.str(o.version)
		return true
	case fieldCommit:
		if o.commit == nil {
			w.null()
		} else {
			writeCommit(x, w, o.commit, o.changeType, cf.Selections)
		}
		return true
	}
	if bl, ok := parseBacklink(x.es.schema, x.es.role, cf.Name); ok && o.id != "" {
		if err, refused := x.backlinkErrs[cf.Field]; refused {
			// Its arguments were refused: the field's error, at its
			// path, and the null goes up (the list is non-null).
			x.fail(x.pathNow(), err)
			return false
		}
		// Read by prefetch: the documents pointing at o, read for this
		// merged selection (it depends on o's type). The list is
		// non-null ([X!]!).
		return x.writeObjects(w, x.backlinks[backlinkKey{cf.Field, x.selKey(cf.Selections), o.id}], cf.Selections, bl.class.Name)
	}
	f := o.class.Field(cf.Name)
	if f == nil {
		w.null()
		return true
	}
	nonNull := f.Required && (f.List || f.Type.Kind != sluice.TypeReference)
	start := w.Len()
	v, ok := o.fields[cf.Name]
	if ok && v != nil && f.ReadRole <= x.es.role {
		if f.List {
			ok = x.writeList(w, o.class.Name, f, v, cf.Selections)
		} else {
			ok = x.writeValue(w, o.class.Name, f, v, cf.Selections, nonNull)
		}
		if ok {
			return true
		}
		w.Truncate(start)
	} else if nonNull {
		x.nullField(o.class.Name, f.Name, outputType(f))
	}
	if nonNull {
		return false
	}
	w.null()
	return true
}

// writeList writes the list value v of list field f ([T!]) of type owner. A dangling
// reference is left out of it; any other element without a value of T
// makes the list null (false, its error recorded at the element's path).
func (x *execution) writeList(w *jsonWriter, owner string, f *sluice.Field, v any, sel ast.SelectionSet) bool {
	items, ok := v.([]any)
	if !ok {
		x.nullField(owner, f.Name, outputType(f))
		return false
	}
	w.WriteByte('[')
	n := 0
	for _, it := range items {
		if w.over {
			break
		}
		if f.Type.Kind == sluice.TypeReference && x.refObject(it, f.Type.Name) == nil {
			continue // a dangling reference is left out of the list
		}
		if n > 0 {
			w.WriteByte(',')
		}
		x.path = append(x.path, pathSeg{index: n})
		ok := x.writeValue(w, owner, f, it, sel, true)
		x.path = x.path[:len(x.path)-1]
		if !ok {
			return false
		}
		n++
	}
	w.WriteByte(']')
	return true
}

// refObject returns the document reference v names, read for a field of
// type class; nil when it is dangling, or names a document of another
// class (a row written in SQL may hold any id).
func (x *execution) refObject(v any, class string) *object {
	id, ok := refID(v)
	if !ok || !x.refersTo(id, class) {
		return nil
	}
	return x.cache[id]
}

// refersTo reports whether document id is of class or a subclass, as a
// reference of a field of type class must be.
func (x *execution) refersTo(id, class string) bool {
	c, _, _ := strings.Cut(id, "/")
	return c == class || x.es.schema.IsA(c, class)
}

// writeValue writes one (element) value of field f of type owner. It returns false when
// there is none to write (the caller drops what it wrote): v is not a
// value of f's type (a scalar or enum value an old image or a row written
// in SQL holds, a dangling reference), or a non-null field of the object
// it is has none. When nonNull (the value's place is non-null: a required
// field, a list's element), v not being one is recorded as an error at
// x.path; an object's own null is recorded where it arises.
func (x *execution) writeValue(w *jsonWriter, owner string, f *sluice.Field, v any, sel ast.SelectionSet, nonNull bool) bool {
	switch f.Type.Kind {
	case sluice.TypeReference:
		if o := x.refObject(v, f.Type.Name); o != nil {
			return x.writeObject(w, o, sel, f.Type.Name)
		}
	case sluice.TypeSubdocument:
		if m, ok := v.(map[string]any); ok {
			return x.writeObject(w, subObject(x.es.schema, f.Type.Name, m), sel, f.Type.Name)
		}
	case sluice.TypeEnum:
		// A value the enum no longer has (history) is none.
		if e, ok := v.(string); ok && x.es.schema.Enums[f.Type.Name] != nil && x.es.schema.Enums[f.Type.Name].Has(e) {
			w.str(e)
			return true
		}
	default:
		if writeScalar(w, f.Type.Name, v) {
			return true
		}
	}
	if nonNull {
		what := f.Type.Name
		if f.List {
			what = "an element of " + outputType(f)
		}
		x.nullField(owner, f.Name, what)
	}
	return false
}

// writeScalar writes a scalar value of a normalized document (or of change
// JSON decoded with UseNumber), and reports whether it did. A value that
// is not of the scalar's type is not written (false): only a change image
// written under an older schema version, in which the field had another
// type, or a row written in SQL before Sluice checked it holds one, and
// GraphQL promises the field's type.
func writeScalar(w *jsonWriter, scalar string, v any) bool {
	switch scalar {
	case sluice.ScalarInt:
		switch n := v.(type) {
		case int64:
			if n >= math.MinInt32 && n <= math.MaxInt32 {
				w.int(n)
				return true
			}
		case json.Number:
			if i, err := strconv.ParseInt(string(n), 10, 32); err == nil {
				w.int(i)
				return true
			}
		case float64:
			if n == math.Trunc(n) && n >= math.MinInt32 && n <= math.MaxInt32 {
				w.int(int64(n))
				return true
			}
		}
	case sluice.ScalarFloat:
		switch n := v.(type) {
		case float64:
			if !math.IsNaN(n) && !math.IsInf(n, 0) {
				w.WriteString(strconv.FormatFloat(n, 'g', -1, 64))
				return true
			}
		case json.Number:
			if _, err := strconv.ParseFloat(string(n), 64); err == nil {
				w.WriteString(string(n))
				return true
			}
		case int64:
			w.int(n)
			return true
		}
	case sluice.ScalarBoolean:
		if b, ok := v.(bool); ok {
			w.boolean(b)
			return true
		}
	case sluice.ScalarJSON: // a json.RawMessage: compacted, <, > and & escaped
		w.any(v)
		return true
	case sluice.ScalarBigInt: // a decimal string; a number in older images
		switch n := v.(type) {
		case string:
			w.str(n)
			return true
		case json.Number:
			if _, ok := new(big.Int).SetString(string(n), 10); ok {
				w.str(string(n))
				return true
			}
		}
	default: // String, ID, DateTime: strings
		if s, ok := v.(string); ok {
			w.str(s)
			return true
		}
	}
	return false
}

// nullField records the error of non-null field class.field (of GraphQL
// type typ) having no value to write, at x.path.
func (x *execution) nullField(class, field, typ string) {
	x.failValue(x.pathNow(), sluice.Errorf(sluice.CodeUnprocessable,
		"cannot return null for non-null field %s.%s (%s): the document has no value for it that can be read as one "+
			"(read as of a position before the schema required it or gave it this type, or written in SQL before Sluice checked it)",
		class, field, typ))
}

// pathNow returns x.path, the path of the value being written, as a
// GraphQL error's path.
func (x *execution) pathNow() ast.Path {
	path := make(ast.Path, len(x.path))
	for i, s := range x.path {
		if s.name != "" {
			path[i] = ast.PathName(s.name)
		} else {
			path[i] = ast.PathIndex(s.index)
		}
	}
	return path
}

// writeCommit writes a _CommitMetadata object.
func writeCommit(x *execution, w *jsonWriter, c *sluice.Commit, changeType string, sel ast.SelectionSet) {
	w.WriteByte('{')
	for i, cf := range x.fields(sel, typeCommitMetadata) {
		w.key(cf.Alias, i == 0)
		switch cf.Name {
		case "__typename":
			w.str(typeCommitMetadata)
		case "_id":
			w.str(c.ID())
		case "_timestamp":
			w.WriteString(strconv.FormatFloat(float64(c.Time.UnixMicro())/1e6, 'f', -1, 64))
		case "_datetime":
			w.str(c.Time.UTC().Format("2006-01-02T15:04:05.999999Z07:00"))
		case "_author":
			w.str(c.Author)
		case "_user":
			w.str(c.User)
		case "_message":
			w.str(c.Message)
		case "_change_type":
			if changeType == "" {
				w.null()
			} else {
				w.str(changeType)
			}
		default:
			w.null()
		}
	}
	w.WriteByte('}')
}

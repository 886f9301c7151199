package graph

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/schema"
)

// query runs a query operation and returns its data.
func (x *execution) query() json.RawMessage { return x.queryOn(typeQuery) }

// queryOn runs the query fields selected on root (Query, or Subscription
// for the live query fields, which are Query's again) and returns their
// data.
func (x *execution) queryOn(root string) json.RawMessage {
	w := x.newWriter()
	x.out = w
	defer func() { x.out = nil }()
	w.WriteByte('{')
	for i, cf := range x.rootFields(root) {
		if x.overRows() {
			return nil // the error is recorded; later fields would only add to it
		}
		w.key(cf.Alias, i == 0)
		switch cf.Name {
		case "__typename":
			w.str(root)
		case "__schema", "__type":
			if x.op.DisableIntrospection {
				x.fail(fieldPath(cf), sluice.Errorf(sluice.CodeForbidden, "introspection is disabled"))
				w.null()
				continue
			}
			x.introspect(w, cf)
		case fieldChangeSet:
			x.changeSetField(w, cf)
		default:
			// A class's list ([X!]!) and its aggregate
			// (<Class>_Aggregate!) are non-null: an error nulls their
			// parent, data, whatever the other fields answer, so those
			// after it are not run (each could take a statement up to
			// statement_timeout: a hundred aliases of a slow filter held
			// a Postgres backend for their sum).
			if c, ok := aggregateClass(x.es.schema, cf.Name); ok {
				if !x.aggregateQuery(w, cf, c) {
					return nil
				}
				break
			}
			if !x.classQuery(w, cf) {
				return nil
			}
		}
		if w.over {
			x.fail(fieldPath(cf), x.tooLarge())
			return nil
		}
	}
	w.WriteByte('}')
	if w.over {
		x.fail(nil, x.tooLarge())
		return nil
	}
	return w.Bytes()
}

// classQuery writes the result of a class query field; on error it writes
// null, records the error and returns false.
func (x *execution) classQuery(w *jsonWriter, cf graphql.CollectedField) bool {
	objs, err := x.runClassQuery(cf)
	if err == nil {
		err = x.prefetch(pendings(objs, cf.Selections, cf.Name))
	}
	if err != nil {
		x.fail(fieldPath(cf), err)
		w.null()
		return false
	}
	// A list of non-null elements, non-null itself ([X!]!): a document
	// with a required field it has no value for (writeDocField) nulls
	// the list, and so the data.
	x.path = append(x.path[:0], pathSeg{name: cf.Alias})
	ok := x.writeObjects(w, objs, cf.Selections, cf.Name)
	x.path = x.path[:0]
	if !ok {
		w.null()
	}
	return ok
}

func pendings(objs []*object, sel ast.SelectionSet, static string) []pending {
	out := make([]pending, len(objs))
	for i, o := range objs {
		out[i] = pending{obj: o, sel: sel, static: static}
	}
	return out
}

// runClassQuery reads the documents a class query field selects (or
// takes those read for it already: preread).
func (x *execution) runClassQuery(cf graphql.CollectedField) ([]*object, error) {
	q, err := x.classDocQuery(cf)
	if err != nil {
		return nil, err
	}
	if x.past != nil {
		if err := x.checkPast(cf, q); err != nil {
			return nil, err
		}
	}
	docs, ok := x.preread[cf.Alias]
	if !ok {
		docs, err = x.es.store.QueryDocuments(x.ctx, x.req.DB, x.es.schema, q)
		if err != nil {
			return nil, x.readErr(err)
		}
	}
	if err := x.readRows(len(docs)); err != nil {
		return nil, err
	}
	if x.wantBoundary {
		x.boundary = boundaryOf(x.es.schema, q, docs)
	}
	objs := make([]*object, len(docs))
	for i, d := range docs {
		o := docObject(x.es.schema, d.Doc, d.Commit)
		o.partial = q.Fields != nil
		if _, ok := x.cache[d.Doc.ID]; !ok {
			x.cache[d.Doc.ID] = o
		}
		objs[i] = o
	}
	return objs, nil
}

// classDocQuery returns the query of the documents a class query field
// selects.
func (x *execution) classDocQuery(cf graphql.CollectedField) (engine.DocQuery, error) {
	q, err := ParseQueryArgs(x.es.schema, cf.Name, cf.Field, x.op.Variables)
	if err != nil {
		return engine.DocQuery{}, err
	}
	q.Fields = selectedFields(x.op.Doc, cf.Selections)
	if x.wantBoundary {
		// The last row's sort keys give the result's boundary.
		for _, f := range orderFields(q.Order) {
			if !slices.Contains(q.Fields, f) {
				q.Fields = append(q.Fields, f)
			}
		}
	}
	// The row bound goes into the statement, so that Postgres never sends
	// more than one document past it.
	if b := x.rowBudget(); b >= 0 && (q.Limit < 0 || q.Limit > int64(b)) {
		q.Limit = int64(b)
	}
	return q, nil
}

// selectedFields returns the names of the fields sel selects directly
// (through fragments too, whatever their type condition): the columns a
// query must read. Directives are ignored, so this is a superset. Each
// fragment is walked once, however often it is spread.
func selectedFields(doc *ast.QueryDocument, sel ast.SelectionSet) []string {
	out := []string{}
	seen := map[string]bool{}
	spread := map[string]bool{}
	var walk func(ast.SelectionSet)
	walk = func(sel ast.SelectionSet) {
		for _, s := range sel {
			switch s := s.(type) {
			case *ast.Field:
				if !seen[s.Name] {
					seen[s.Name] = true
					out = append(out, s.Name)
				}
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			case *ast.FragmentSpread:
				if f := doc.Fragments.ForName(s.Name); f != nil && !spread[s.Name] {
					spread[s.Name] = true
					walk(f.SelectionSet)
				}
			}
		}
	}
	walk(sel)
	return out
}

// ParseQueryArgs converts the arguments of the query field of class (id,
// ids, filter, orderBy, limit, offset, include_children) to a storage
// query. Conflicting or invalid arguments give a CodeInvalid error.
func ParseQueryArgs(s *sluice.Schema, class string, field *ast.Field, vars map[string]any) (engine.DocQuery, error) {
	args := field.ArgumentMap(vars)
	q := engine.DocQuery{Class: class, Limit: -1}
	// An ID is a string or an integer (filter.IDString): an id given as
	// 4 was not a string, and the restriction was dropped (every
	// document answered).
	id, hasID := filter.IDString(args["id"])
	if v := args["id"]; v != nil && !hasID {
		return q, errorf("%s: id must be an ID (a string or an integer)", class)
	}
	// ids absent or null restricts nothing, and ids: [] matches nothing:
	// the argument is tested, not its list, since a literal [] is a nil
	// []any. A single id is a list of one (listArg).
	if v := args["ids"]; v != nil {
		rawIDs := listArg(v)
		if hasID {
			return q, errorf("%s: give id or ids, not both", class)
		}
		if len(rawIDs) > filter.MaxIDs {
			return q, errorf("%s: ids lists %d ids, more than %d (the limit); page with several requests", class, len(rawIDs), filter.MaxIDs)
		}
		q.IDs = make([]string, 0, len(rawIDs))
		for i, v := range rawIDs {
			id, ok := filter.IDString(v)
			if !ok {
				return q, errorf("%s: ids[%d] must be an ID (a string or an integer)", class, i)
			}
			full, err := filter.QualifyID(s, class, id)
			if err != nil {
				return q, errorf("%s: ids[%d]: %s", class, i, err)
			}
			q.IDs = append(q.IDs, full)
		}
	} else if hasID {
		full, err := filter.QualifyID(s, class, id)
		if err != nil {
			return q, errorf("%s: id: %s", class, err)
		}
		q.IDs = []string{full}
	}
	children := true
	if b, ok := args["include_children"].(bool); ok {
		children = b
	}
	q.Classes = classesOf(s, class, children)
	if m, ok := args["filter"].(map[string]any); ok {
		e, err := filter.Parse(s, class, m)
		if err != nil {
			return q, err
		}
		q.Filter = e
	}
	order, err := orderKeys(s, class, field, vars)
	if err != nil {
		return q, err
	}
	q.Order = order
	for _, name := range []string{"limit", "offset"} {
		v, ok := args[name]
		if !ok || v == nil {
			continue
		}
		n, ok := toInt(v)
		if !ok || n < 0 {
			return q, errorf("%s: %s must be a whole number of at least 0, got %v", class, name, v)
		}
		if name == "limit" {
			q.Limit = n
		} else {
			q.Offset = n
		}
	}
	return q, nil
}

// classesOf returns the document classes a query on class reads.
func classesOf(s *sluice.Schema, class string, children bool) []string {
	if !children {
		if c := s.Class(class); c != nil && c.Kind == sluice.KindDocument {
			return []string{class}
		}
		return nil
	}
	var out []string
	for _, n := range s.Descendants(class) {
		if s.Classes[n].Kind == sluice.KindDocument {
			out = append(out, n)
		}
	}
	return out
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// orderKeys reads the orderBy argument. Keys written literally apply in the
// order written; keys of an orderBy given as a variable (a JSON object,
// whose key order is not kept) apply in the class's field order.
func orderKeys(s *sluice.Schema, class string, field *ast.Field, vars map[string]any) ([]engine.OrderKey, error) {
	arg := field.Arguments.ForName("orderBy")
	if arg == nil || arg.Value == nil {
		return nil, nil
	}
	var names []string
	values := map[string]any{}
	if arg.Value.Kind == ast.ObjectValue {
		for _, ch := range arg.Value.Children {
			v, err := ch.Value.Value(vars)
			if err != nil {
				return nil, errorf("orderBy.%s: %s", ch.Name, err.Error())
			}
			names = append(names, ch.Name)
			values[ch.Name] = v
		}
	} else {
		v, err := arg.Value.Value(vars)
		if err != nil {
			return nil, errorf("orderBy: %s", err.Error())
		}
		// A JSON object keeps no order: its keys apply in the class's
		// field order, and the id, unique, last (first, it decided
		// every order alone, the other keys left unused).
		m, _ := v.(map[string]any)
		if c := s.Class(class); c != nil {
			for _, f := range c.Fields {
				if _, ok := m[f.Name]; ok {
					names = append(names, f.Name)
				}
			}
		}
		if _, ok := m[fieldID]; ok {
			names = append(names, fieldID)
		}
		for k, v := range m {
			values[k] = v
		}
	}
	var out []engine.OrderKey
	for _, n := range names {
		dir, _ := values[n].(string)
		switch dir {
		case "":
			continue
		case "ASC", "DESC":
			out = append(out, engine.OrderKey{Field: n, Desc: dir == "DESC"})
		default:
			return nil, errorf("orderBy.%s: expected ASC or DESC, got %v", n, values[n])
		}
	}
	return out, nil
}

// changeSetField writes Query._ChangeSet(commit:).
func (x *execution) changeSetField(w *jsonWriter, cf graphql.CollectedField) {
	args := cf.ArgumentMap(x.op.Variables)
	var seq int64
	if v, ok := args["commit"]; ok && v != nil {
		s, _ := filter.IDString(v)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			x.fail(fieldPath(cf), errorf("_ChangeSet: commit must be a commit id (a positive integer), got %q", s))
			w.null()
			return
		}
		seq = n
	}
	// The commit is read in pieces, up to what the request may still
	// read and answer; one that holds more is refused, not read whole.
	// A selection of only its metadata reads one piece.
	maxChanges, maxBytes := -1, int64(x.es.limits.MaxResponseBytes)
	if b := x.rowBudget(); b >= 0 {
		maxChanges = b - 1
	}
	if maxBytes <= 0 {
		maxBytes = -1
	}
	needed := x.selectsChanges(cf.Selections)
	if !needed {
		maxChanges = 0
	}
	c, err := x.es.store.CommitChanges(x.ctx, x.req.DB, x.es.schema, x.es.role, seq, maxChanges, maxBytes)
	if err == nil && c.Partial && needed {
		if maxChanges >= 0 && len(c.Changes) > maxChanges {
			err = errTooManyRows(x.maxRows)
		} else {
			err = errResponseTooLarge(x.es.limits.MaxResponseBytes)
		}
	}
	if code := sluice.ErrorCode(err); code == sluice.CodeNotFound || code == sluice.CodeGone {
		// No commits yet, not made yet, or pruned: a nullable answer,
		// which the log decides (a live query's next commit may make
		// it one).
		w.null()
		x.failValue(fieldPath(cf), err)
		return
	}
	if err != nil {
		x.fail(fieldPath(cf), err)
		w.null()
		return
	}
	if x.changeSetFollows(cf.Selections) {
		// What it reads beyond the commit's images is read as of the
		// commit (readAsOfCommit).
		restore, err := x.readAsOfCommit(c)
		if err != nil {
			x.fail(fieldPath(cf), err)
			w.null()
			return
		}
		defer restore()
	}
	x.path = append(x.path[:0], pathSeg{name: cf.Alias})
	err = x.WriteChangeSet(w, c, cf.Selections, true)
	x.path = x.path[:0]
	if err != nil {
		x.fail(fieldPath(cf), err)
		w.null() // WriteChangeSet writes nothing when it fails (a bad filter)
	}
}

// selectsChanges reports whether sel, a _ChangeSet selection, selects a
// per-class field (which reads the commit's changes).
func (x *execution) selectsChanges(sel ast.SelectionSet) bool {
	for _, cf := range x.fields(sel, typeChangeSet) {
		if cf.Name != "__typename" && cf.Name != fieldCommit {
			return true
		}
	}
	return false
}

// changeSetFollows reports whether sel, a _ChangeSet selection, reads
// documents beyond the commit's images: a per-class field follows a
// reference or a backlink, or has a filter (which may test documents
// through a reference). It errs on the side of true.
func (x *execution) changeSetFollows(sel ast.SelectionSet) bool {
	for _, cf := range x.fields(sel, typeChangeSet) {
		if cf.Name == "__typename" || cf.Name == fieldCommit {
			continue
		}
		if cf.Arguments.ForName("filter") != nil || x.followsReferences(cf.Selections) {
			return true
		}
	}
	return false
}

// WriteChangeSet writes the _ChangeSet object of commit c for selection
// sel. includeChildren is the default of the per-class fields'
// include_children argument (a subscription's _ChangeSet passes its own).
// x.path is the path of the object; errNulled: a document of a change had
// no value for a required field, and the object is null (the error is
// recorded). On any error w is as it was.
func (x *execution) WriteChangeSet(w *jsonWriter, c *sluice.Commit, sel ast.SelectionSet, includeChildren bool) error {
	_, err := x.writeChangeSet(w, c, sel, includeChildren)
	return err
}

// writeChangeSet is WriteChangeSet that also returns how many documents
// the per-class fields hold (a change-set subscription skips commits that
// give none).
func (x *execution) writeChangeSet(w *jsonWriter, c *sluice.Commit, sel ast.SelectionSet, includeChildren bool) (int, error) {
	n := 0
	// The object is built aside, so that an error leaves w as it was.
	buf := jsonWriter{}
	if w.max > 0 {
		buf.max = max(w.max-w.Len(), 1)
	}
	buf.WriteByte('{')
	// The per-class fields share the changes' documents, each decoded
	// when a field first selects its change: decoding the commit again
	// for each field made every alias cost a decode of the whole commit,
	// which no limit counts (100 aliases of a filter matching nothing
	// took 14 s of a core on a commit of 15 MB of changes, on every
	// commit for a subscription). The fields only read the documents
	// (filters, prefetch and the writer change none), and they are what
	// one field selecting every change held already.
	decoded := make([]*sluice.Document, len(c.Changes))
	for i, cf := range x.fields(sel, typeChangeSet) {
		if buf.over {
			break
		}
		buf.key(cf.Alias, i == 0)
		switch {
		case cf.Name == "__typename":
			buf.str(typeChangeSet)
		case cf.Name == fieldCommit:
			writeCommit(x, &buf, c, "commit", cf.Selections)
		default:
			objs, class, err := x.changes(c, decoded, cf, includeChildren, false)
			if err == nil {
				err = x.checkPastBeyond(cf.Selections, class)
			}
			if err == nil {
				err = x.prefetch(pendings(objs, cf.Selections, class))
			}
			if err != nil {
				return 0, err
			}
			n += len(objs)
			// Non-null lists of non-null documents ([X!]!): one without
			// a value for a required field nulls the change set.
			x.path = append(x.path, pathSeg{name: cf.Alias})
			ok := x.writeObjects(&buf, objs, cf.Selections, class)
			x.path = x.path[:len(x.path)-1]
			if !ok {
				return 0, errNulled
			}
		}
	}
	buf.WriteByte('}')
	if buf.over {
		w.over = true
		return n, nil
	}
	w.Write(buf.Bytes())
	return n, nil
}

// changeSetShows reports whether the change set of c that sel selects
// lists any document, judged from c's images alone, for a commit whose
// past cannot be read (Subscription.events): a field whose filter tests
// through references cannot be judged so, and is taken to list every
// change of its class and operation. Its lists are not counted against
// the rows bound: nothing of them is read or sent, and a commit too far
// back is refused for that (max_past_changes) whatever their size.
func (x *execution) changeSetShows(c *sluice.Commit, sel ast.SelectionSet, includeChildren bool) (bool, error) {
	decoded := make([]*sluice.Document, len(c.Changes))
	for _, cf := range x.fields(sel, typeChangeSet) {
		if cf.Name == "__typename" || cf.Name == fieldCommit {
			continue
		}
		objs, _, err := x.changes(c, decoded, cf, includeChildren, true)
		if err != nil || len(objs) > 0 {
			return err == nil, err
		}
	}
	return false, nil
}

// changes returns the documents of c that the change-set field cf
// (<Class>_added, _updated, _changed or _deleted) selects. decoded holds
// the document of each change of c that a field decoded already (nil:
// none did); changes decodes those it needs into it. imagesOnly leaves
// out a filter that tests through references, and does not count the
// documents against the rows bound (changeSetShows).
func (x *execution) changes(c *sluice.Commit, decoded []*sluice.Document, cf graphql.CollectedField, includeChildren, imagesOnly bool) ([]*object, string, error) {
	i := strings.LastIndexByte(cf.Name, '_')
	if i < 0 {
		return nil, "", errorf("unknown field %s", cf.Name)
	}
	class, which := cf.Name[:i], cf.Name[i+1:]
	if which == "changed" {
		which = "updated"
	}
	op, ok := sluice.ParseOp(which)
	if !ok || x.es.schema.Class(class) == nil {
		return nil, "", errorf("unknown field %s", cf.Name)
	}
	args := cf.ArgumentMap(x.op.Variables)
	// The field's include_children overrides the top-level one only when
	// given: its schema default (true) must not.
	children := includeChildren
	if b, ok := args["include_children"].(bool); ok && cf.Arguments.ForName("include_children") != nil {
		children = b
	}
	var f filter.Expr
	if m, ok := args["filter"].(map[string]any); ok {
		e, err := filter.Parse(x.es.schema, class, m)
		if err != nil {
			return nil, "", err
		}
		f = e
		if imagesOnly && filterFollows(f) {
			f = nil
		}
		// What it tests through references is read as of the commit
		// (readAsOfCommit), which may not show it.
		if err := x.checkPastThrough(f); err != nil {
			return nil, "", err
		}
	}
	var out []*object
	for j := range c.Changes {
		ch := &c.Changes[j]
		if ch.Op != op {
			continue
		}
		if ok, err := x.selectsChange(c, ch, class, children, "this change set cannot show it: read the state as of the commit, or the commit's history, instead"); err != nil {
			return nil, "", err
		} else if !ok {
			continue
		}
		// Every field that selects a change reads the same image of it
		// (its operation's).
		doc := decoded[j]
		if doc == nil {
			raw := ch.After
			if op == sluice.OpDeleted {
				raw = ch.Before
			}
			d, err := DecodeDocument(raw)
			if err != nil {
				return nil, "", err
			}
			x.decodes++
			decoded[j], doc = d, d
		}
		if documentClass(x.es.schema, doc.Type) == nil {
			continue // a class the schema no longer has documents of
		}
		if f != nil {
			if err := x.checkImageFilter(f, c, doc.Type); err != nil {
				return nil, "", err
			}
			// A filter depending on a value the image left out as one
			// Sluice cannot read is refused (filter.UnknownError).
			unknown := ch.AfterUnknown
			if op == sluice.OpDeleted {
				unknown = ch.BeforeUnknown
			}
			ok, known, err := filter.MatchUnknown(x.ctx, f, doc, x.lookup, unknown)
			if err == nil && !known {
				err = filter.UnknownError(filter.TestedAmong(f, unknown))
			}
			if err != nil {
				return nil, "", err
			}
			if x.lookupErr != nil {
				return nil, "", x.lookupErr
			}
			if !ok {
				continue
			}
		}
		out = append(out, &object{class: x.es.schema.Class(doc.Type), id: doc.ID, version: c.VersionOf(ch), fields: doc.Fields, commit: c, changeType: "commit"})
	}
	// The commit's changes are read already; counting them keeps the
	// response's documents within the same bound as a query's.
	if imagesOnly {
		return out, class, nil
	}
	if err := x.readRows(len(out)); err != nil {
		return nil, "", err
	}
	return out, class, nil
}

// lookup reads one document for a filter through a reference, caching it.
// Change sets are small and such filters rare, so one statement per
// distinct referenced id is acceptable here (queries compile to SQL).
//
// A document an earlier field's query read projected (partial) holds only
// the fields that field selected, and the filter may test any other: it
// is read whole and replaces the partial one in the cache, as prefetch
// does (that field's answer holds its own objects, not the cache's).
// Taken as it was, a field it lacked looked absent, and a request that
// listed Person before its _ChangeSet answered a filter on a friend's
// name wrongly.
func (x *execution) lookup(id string) *sluice.Document {
	if o, ok := x.cache[id]; ok && (o == nil || !o.partial) {
		if o == nil {
			return nil
		}
		return &sluice.Document{ID: o.id, Type: o.class.Name, Fields: o.fields}
	}
	docs, err := x.es.store.DocumentsByID(x.ctx, x.req.DB, x.es.schema, []string{id}, x.rowBudget())
	if err == nil {
		err = x.readRows(len(docs))
	}
	err = x.readErr(err)
	if err != nil {
		// Match cannot return it, and the document looks missing: the
		// caller checks lookupErr after each match (the first error is
		// the one it reports). It is not cached as missing, which
		// would show it so to the payloads' references too.
		if x.lookupErr == nil {
			x.lookupErr = err
		}
		return nil
	}
	if len(docs) == 0 {
		x.cache[id] = nil
		return nil
	}
	x.cache[id] = docObject(x.es.schema, docs[0].Doc, docs[0].Commit)
	return docs[0].Doc
}

// DecodeDocument decodes a document's API-form JSON (a change's before or
// after) into a sluice.Document, keeping numbers as json.Number; a field
// of more than schema.MaxValues values is left out (schema.DecodeImage).
func DecodeDocument(raw []byte) (*sluice.Document, error) {
	m, err := schema.DecodeImage(raw)
	if err != nil {
		return nil, err
	}
	id, _ := m["@id"].(string)
	typ, _ := m["@type"].(string)
	delete(m, "@id")
	delete(m, "@type")
	return &sluice.Document{ID: id, Type: typ, Fields: m}, nil
}

func parseFilter(s *sluice.Schema, class string, input map[string]any) (filter.Expr, error) {
	return filter.Parse(s, class, input)
}

// readingRoot returns the root field of rootType that reads (a class query
// or _ChangeSet), false unless there is exactly one.
func (x *execution) readingRoot(rootType string) (graphql.CollectedField, bool) {
	reading := 0
	var root graphql.CollectedField
	for _, cf := range x.rootFields(rootType) {
		switch cf.Name {
		case "__typename", "__schema", "__type":
		default:
			reading++
			root = cf
		}
	}
	return root, reading == 1
}

// oneStatement reports whether the query reads with one SQL statement: a
// single root field that reads (a class query, an aggregate or
// _ChangeSet) whose selection follows no reference or backlink, which
// would read the documents they lead to with a statement of their own
// (prefetch). It errs on the side
// of false: a field with a selection of its own named as some class's
// reference counts as one, whatever type it is on.
func (x *execution) oneStatement(rootType string) bool {
	root, ok := x.readingRoot(rootType)
	if !ok {
		return false
	}
	if _, agg := aggregateClass(x.es.schema, root.Name); agg {
		return true
	}
	if root.Name == fieldChangeSet {
		// A change-set field's filter through a reference reads the
		// referenced documents too (lookup).
		for _, cf := range x.fields(root.Selections, typeChangeSet) {
			if cf.Arguments.ForName("filter") != nil {
				return false
			}
		}
	}
	return !x.followsReferences(root.Selections)
}

package graph

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/filter"
)

// Live queries. A live query is a query whose result is pushed again
// whenever a commit changes it: a Subscription field named after a class
// (the same arguments and selection as the Query field of that name), or
// a query operation marked @live. This file holds what the GraphQL layer
// knows of one: which changes may change its result (Affects, judged
// from a change's class and its before and after images, so that a
// commit costs work only for the live queries it can affect) and how to
// read the result in one snapshot (Run). Sharing, batching and framing
// are the transport's (internal/gqltransport/live.go).

// directiveLive is the directive that makes a query operation live.
const directiveLive = "live"

// IsLive reports whether op is a live query: a query operation marked
// @live (unless its if argument is false), or a subscription operation
// whose root field is a class's live query field or live aggregate.
func (es *ExecutableSchema) IsLive(op *graphql.OperationContext) bool {
	switch op.Operation.Operation {
	case ast.Query:
		d := op.Operation.Directives.ForName(directiveLive)
		if d == nil {
			return false
		}
		// Left out, if is true (its default); given, live only when
		// true: an explicit null is not true, as the graphql-live-query
		// convention reads it.
		v, given := d.ArgumentMap(op.Variables)["if"]
		on, _ := v.(bool)
		return !given || on
	case ast.Subscription:
		for _, cf := range graphql.CollectFields(op, op.Operation.SelectionSet, es.sat[typeSubscription]) {
			if c := es.schema.Class(cf.Name); c != nil && c.Kind != sluice.KindSubdocument {
				return true
			}
			if _, ok := aggregateClass(es.schema, cf.Name); ok {
				return true
			}
		}
	}
	return false
}

// LiveQuery is a validated live query, ready to be judged against
// commits and run. It is immutable and safe for concurrent use.
type LiveQuery struct {
	es  *ExecutableSchema
	req *Request
	// What a run needs of the operation (see Subscription for why not
	// the operation context): its variables, fragments and root
	// selection, and the type its root fields are on.
	variables       map[string]any
	doc             *ast.QueryDocument // only the fragments
	selections      ast.SelectionSet
	root            string
	noIntrospection bool
	// op is the operation's text and variables (see Subscription).
	op operation

	// anyCommit: every commit may change the result (_ChangeSet, the
	// newest commit's changes).
	anyCommit bool
	fields    []liveField
	classes   []string
}

// liveField is what may change the result of one root field that reads
// documents.
type liveField struct {
	// roots are the document classes whose documents the field lists.
	roots map[string]bool
	// ids, when not nil, are the only documents it lists.
	ids map[string]bool
	// filt is its filter (nil: none); refFilter is set when it follows
	// references, so that whether a document matches depends on others.
	filt      filter.Expr
	refFilter bool
	// refs are the document classes it reads through references (its
	// selection's, and its filter's): any change of one may change the
	// result.
	refs map[string]bool
	// aggregate: the field is a count or aggregates, not a list.
	aggregate bool
}

// NewLiveQuery prepares the live query op (see IsLive) for the request
// req. It returns a CodeInvalid error for invalid arguments (a filter, an
// order, a limit) and for a subscription that selects more than one root
// field.
func (es *ExecutableSchema) NewLiveQuery(op *graphql.OperationContext, req *Request) (*LiveQuery, error) {
	if req == nil || req.DB == nil {
		return nil, sluice.Errorf(sluice.CodeInternal, "graph: no request for the live query")
	}
	q := &LiveQuery{es: es, req: req, variables: op.Variables, doc: &ast.QueryDocument{Fragments: op.Doc.Fragments},
		selections: op.Operation.SelectionSet, root: typeQuery, noIntrospection: op.DisableIntrospection, op: operationOf(op)}
	if op.Operation.Operation == ast.Subscription {
		q.root = typeSubscription
	}
	x := &execution{op: op, es: es, req: req}
	roots := x.fields(op.Operation.SelectionSet, q.root)
	if q.root == typeSubscription && len(roots) != 1 {
		return nil, rootFieldsError(op.Operation, roots)
	}
	seen := map[string]bool{}
	for _, cf := range roots {
		switch cf.Name {
		case "__typename", "__schema", "__type":
			continue
		case fieldChangeSet:
			q.anyCommit = true
			continue
		}
		if _, ok := cf.ArgumentMap(op.Variables)[argAsOf].(string); ok {
			// Its runs read the present: a past state never changes,
			// and read as the present it would be another state than
			// the one asked for.
			return nil, errorf("%s: a live query follows the present, and asOf reads a past state, which does not change: query it without @live", cf.Alias)
		}
		var f liveField
		if c, ok := aggregateClass(es.schema, cf.Name); ok {
			// An aggregate changes only when a document it counts does
			// (a change that leaves every aggregate as it was sends
			// nothing: the value is compared).
			aq, err := ParseAggregateArgs(es.schema, c.Name, cf.Field, op.Variables)
			if err != nil {
				return nil, err
			}
			f = liveField{roots: set(aq.Classes), filt: aq.Filter, refs: map[string]bool{}, aggregate: true}
		} else {
			pq, err := ParseQueryArgs(es.schema, cf.Name, cf.Field, op.Variables)
			if err != nil {
				return nil, err
			}
			f = liveField{roots: set(pq.Classes), filt: pq.Filter, refs: map[string]bool{}}
			if pq.IDs != nil {
				f.ids = set(pq.IDs)
			}
			scan := newRefScan(es, op, f.refs)
			scan.selection(cf.Name, cf.Selections)
			if scan.err != nil {
				return nil, scan.err
			}
		}
		if f.filt != nil {
			f.refFilter = filterRefs(es.schema, f.filt, f.refs)
		}
		q.fields = append(q.fields, f)
		for _, m := range []map[string]bool{f.roots, f.refs} {
			for _, n := range slices.Sorted(maps.Keys(m)) { // deterministic
				if !seen[n] {
					seen[n] = true
					q.classes = append(q.classes, n)
				}
			}
		}
	}
	if q.anyCommit {
		q.classes = nil
	}
	return q, nil
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// documentClasses adds to refs the document classes a reference to class
// may name (class and its descendants).
func documentClasses(s *sluice.Schema, class string, refs map[string]bool) {
	for _, n := range classesOf(s, class, true) {
		refs[n] = true
	}
}

// filterRefs adds to refs the classes filter e reads through references
// and reports whether it reads any.
func filterRefs(s *sluice.Schema, e filter.Expr, refs map[string]bool) bool {
	reads := false
	var walk func(filter.Expr)
	walk = func(e filter.Expr) {
		switch x := e.(type) {
		case *filter.And:
			for _, y := range x.Exprs {
				walk(y)
			}
		case *filter.Or:
			for _, y := range x.Exprs {
				walk(y)
			}
		case *filter.Not:
			walk(x.Expr)
		case *filter.Ref:
			reads = true
			documentClasses(s, x.Class, refs)
			walk(x.Expr)
		case *filter.Sub:
			walk(x.Expr)
		case *filter.Quant:
			if x.Field.Type.Kind == sluice.TypeReference {
				reads = true
				documentClasses(s, x.Field.Type.Name, refs)
			}
			walk(x.Elem)
		}
	}
	walk(e)
	return reads
}

// refScan finds the classes of the documents a selection reads through
// references and backlinks (selection), for a live query's refs.
type refScan struct {
	s    *sluice.Schema
	role sluice.Role
	doc  *ast.QueryDocument
	vars map[string]any
	// refs collects the document classes read; spread the fragments
	// walked, per class; fields the fields scanned, per class (see
	// selection). steps counts the calls of selection (export_test.go:
	// what the scan costs).
	refs   map[string]bool
	spread map[string]bool
	fields map[refField]bool
	steps  int
	// err is the error of the first backlink whose arguments are
	// refused (backlinkArgsError): a live query or subscription
	// selecting it is refused before it starts, as its root field's
	// arguments are, rather than failing at every result or event.
	err error
}

// newRefScan returns a scan of op's selections on es adding to refs.
func newRefScan(es *ExecutableSchema, op *graphql.OperationContext, refs map[string]bool) *refScan {
	return &refScan{s: es.schema, role: es.role, doc: op.Doc, vars: op.Variables, refs: refs,
		spread: map[string]bool{}, fields: map[refField]bool{}}
}

// refField names a field of a selection scanned on documents of a class.
type refField struct {
	class string
	field *ast.Field
}

// selection adds to refs the classes of the documents selection sel, on
// documents of class, reads through references and backlinks (whose
// every document, of the class declaring the reference and below, may
// join, leave or change the list: a re-pointed reference included), and
// through their filters. It errs on the side of more: a field is looked
// up in class and every class below it (an inline fragment may select a
// subclass's field).
//
// A field is scanned once per class of the documents it is on: the
// class and each class below it may have the field (an interface's and
// its every implementation's), each leading to the same selection, and
// scanning it again for each made a live query whose references point
// to an interface of n implementations cost (n+1)^depth to start.
func (r *refScan) selection(class string, sel ast.SelectionSet) {
	r.steps++
	candidates := r.s.Descendants(class)
	for _, it := range sel {
		switch it := it.(type) {
		case *ast.Field:
			if len(it.SelectionSet) == 0 {
				continue
			}
			k := refField{class: class, field: it}
			if r.fields[k] {
				continue
			}
			r.fields[k] = true
			if bl, ok := parseBacklink(r.s, r.role, it.Name); ok {
				if _, err := ParseQueryArgs(r.s, bl.class.Name, it, r.vars); err != nil && r.err == nil {
					r.err = backlinkArgsError(it, err)
				}
				documentClasses(r.s, bl.class.Name, r.refs)
				if m, ok := it.ArgumentMap(r.vars)["filter"].(map[string]any); ok {
					if e, err := filter.Parse(r.s, bl.class.Name, m); err == nil {
						filterRefs(r.s, e, r.refs)
					}
				}
				r.selection(bl.class.Name, it.SelectionSet)
				continue
			}
			for _, cn := range candidates {
				c := r.s.Class(cn)
				if c == nil {
					continue
				}
				f := c.Field(it.Name)
				if f == nil {
					continue
				}
				switch f.Type.Kind {
				case sluice.TypeReference:
					documentClasses(r.s, f.Type.Name, r.refs)
					r.selection(f.Type.Name, it.SelectionSet)
				case sluice.TypeSubdocument:
					r.selection(f.Type.Name, it.SelectionSet)
				}
			}
		case *ast.InlineFragment:
			on := class
			if it.TypeCondition != "" && r.s.Class(it.TypeCondition) != nil {
				on = it.TypeCondition
			}
			r.selection(on, it.SelectionSet)
		case *ast.FragmentSpread:
			def := r.doc.Fragments.ForName(it.Name)
			key := it.Name + " " + class
			if def == nil || r.spread[key] {
				continue
			}
			r.spread[key] = true
			on := class
			if r.s.Class(def.TypeCondition) != nil {
				on = def.TypeCondition
			}
			r.selection(on, def.SelectionSet)
		}
	}
}

// backlinkArgsError returns the error of backlink field f whose arguments
// are refused (err), for a stream refused before it starts: located at
// the field, as a validation error is (a read answers it at the field's
// path instead, see loadBacklinks).
func backlinkArgsError(f *ast.Field, err error) error {
	e := &gqlerror.Error{Message: f.Alias + ": " + sluice.ErrorMessage(err),
		Extensions: map[string]any{"code": sluice.ErrorCode(err).GraphQLCode()}}
	if f.Position != nil {
		e.Locations = []gqlerror.Location{{Line: f.Position.Line, Column: f.Position.Column}}
	}
	return newResultError(gqlerror.List{e})
}

// Database returns the database the live query reads.
func (q *LiveQuery) Database() *sluice.Database { return q.req.DB }

// Classes returns the document classes whose changes may change the
// result (nil: any commit may), for the change feed to skip the others.
func (q *LiveQuery) Classes() []string { return q.classes }

// Key returns a field and a value that, of every change Affects may
// judge as changing the result, the document before or after the change
// has: the query's one root field lists documents whose field equals
// value (a filter of an eq, alone or in an AND at any depth, on a String, ID
// or enum field; a reference field has no eq of its own, and a filter
// through it follows the reference), and reads no class through a
// reference. ok
// is false when there is no such pair: then any change of a class the
// query reads may affect it. A feed judging many live queries looks up
// the ones a change may affect by its images' values of field instead
// of judging every one (Change.Value).
func (q *LiveQuery) Key() (field, value string, ok bool) {
	if q.anyCommit || len(q.fields) != 1 {
		return "", "", false
	}
	f := &q.fields[0]
	if len(f.refs) > 0 || f.refFilter || f.filt == nil {
		return "", "", false
	}
	key := func(e filter.Expr) (string, string, bool) {
		c, ok := e.(*filter.Compare)
		if !ok || c.Op != filter.OpEq || c.Field == nil {
			return "", "", false
		}
		if c.Type.Kind == sluice.TypeScalar && c.Type.Name != sluice.ScalarString && c.Type.Name != sluice.ScalarID {
			return "", "", false // other scalars do not compare as strings
		}
		return c.Field.Name, c.Value.Str, true
	}
	// The parser wraps each field's operators in an And of their own
	// ({owner: {eq: $u}} is And{And{Compare}}), and _and nests another:
	// an eq anywhere in nested Ands is required of every document the
	// filter takes.
	var find func(e filter.Expr) (string, string, bool)
	find = func(e filter.Expr) (string, string, bool) {
		and, isAnd := e.(*filter.And)
		if !isAnd {
			return key(e)
		}
		for _, e := range and.Exprs {
			if field, value, ok := find(e); ok {
				return field, value, true
			}
		}
		return "", "", false
	}
	return find(f.filt)
}

// Value returns the value of field in the change's document before
// (after: false) or after it, when it is a string; ok is false when that
// image has no such value. An image that did not decode, or one that
// left out field's value as one Sluice could not read (BeforeUnknown,
// AfterUnknown: its value is unknown, not missing), gives ok true and bad
// true: the change must then be judged by every live query.
func (ch *Change) Value(after bool, field string) (v string, ok, bad bool) {
	ch.decode()
	if ch.bad || slices.Contains(ch.BeforeUnknown, field) || slices.Contains(ch.AfterUnknown, field) {
		return "", true, true
	}
	doc := ch.before
	if after {
		doc = ch.after
	}
	if doc == nil {
		return "", false, false
	}
	v, ok = doc.Fields[field].(string)
	return v, ok, false
}

// ReadsNothing reports whether the query reads no document, so that no
// commit can change its result (only __typename and introspection).
func (q *LiveQuery) ReadsNothing() bool { return !q.anyCommit && len(q.classes) == 0 }

// Change is one change of a commit as live queries judge it: its images
// are decoded once, when a live query's filter first needs them, for
// every live query that judges it. It is used by one goroutine.
type Change struct {
	*sluice.Change
	decoded       bool
	before, after *sluice.Document
	bad           bool // an image did not decode
}

// NewChange returns ch ready to be judged.
func NewChange(ch *sluice.Change) Change { return Change{Change: ch} }

func (ch *Change) decode() {
	if ch.decoded {
		return
	}
	ch.decoded = true
	var err error
	if len(ch.Before) > 0 {
		if ch.before, err = DecodeDocument(ch.Before); err != nil {
			ch.bad = true
		}
	}
	if len(ch.After) > 0 {
		if ch.after, err = DecodeDocument(ch.After); err != nil {
			ch.bad = true
		}
	}
}

// Affects reports whether change ch may change the result: it changes a
// document of a class the query reads through a reference, or a listed
// document (its id, when the field lists given ids) that matches the
// field's filter before or after the change. A filter that follows
// references cannot be judged from the images alone: any change of a
// listed class may then change the result. It knows nothing of the
// result: AffectsResult also judges the result's boundary.
func (q *LiveQuery) Affects(ch *Change) bool { return q.AffectsResult(ch, nil) }

// AffectsResult reports whether change ch may change a result whose
// boundary is b (LiveResult.Boundary; nil: none), made at a position
// before the change: as Affects, except that a listed document that
// sorts after the last row of a full result (b), both before and after
// the change, leaves the result as it was (see Boundary).
func (q *LiveQuery) AffectsResult(ch *Change, b *Boundary) bool {
	if q.anyCommit {
		return true
	}
	for i := range q.fields {
		f := &q.fields[i]
		if f.refs[ch.Class] {
			return true
		}
		if !f.roots[ch.Class] || f.ids != nil && !f.ids[ch.DocID] {
			continue
		}
		if f.refFilter || f.filt == nil && b == nil {
			return true
		}
		// An image that left out a value Sluice could not read (a row
		// written in SQL past its checks) shows it as missing, though
		// the row held a value that the filter tests and the order sorts
		// by as Postgres compares it: the change is judged to affect the
		// result, which is read again, rather than judged from a value
		// that is not the row's.
		if ch.HasUnknown() {
			return true
		}
		ch.decode()
		if ch.bad || q.listed(f, ch.before, b) || q.listed(f, ch.after, b) {
			return true
		}
	}
	return false
}

// listed reports whether doc, an image of a change (nil: none), may be in
// field f's result: it matches f's filter and, when the result has a
// boundary b, does not sort after it. A filter it cannot evaluate (an
// error of filter.MatchContext) may match: false would leave the result
// stale, true only makes it read again.
func (q *LiveQuery) listed(f *liveField, doc *sluice.Document, b *Boundary) bool {
	if doc == nil {
		return false
	}
	if f.filt != nil {
		ok, err := filter.MatchContext(context.Background(), f.filt, doc, nil)
		if err == nil && !ok {
			return false
		}
	}
	return b == nil || !b.after(doc)
}

// Run reads the query's result in one snapshot: its data (the JSON object
// of the root fields, on one line), the position it reflects (the zero
// Position when it read nothing from the database) and the snapshot's
// access version. A result whose read could not be completed (a limit it
// went over, a deadline, a statement that failed, a refused argument) has
// a *ResultError; one with only errors of values the documents hold (a
// non-null field without a value that can be shown: the null goes up to
// the nearest nullable parent, data itself perhaps) is a result, its
// errors in Errors, as the query answers it.
func (q *LiveQuery) Run(ctx context.Context, b Bounds) LiveResult {
	if err := b.Spent(); err != nil {
		return LiveResult{Err: err}
	}
	rctx, snap := q.es.store.ReadSnapshot(ctx, q.req.DB)
	defer snap.Close() // after a panic too (closed below as soon as it can be)
	x := q.execution(rctx, b)
	x.snap = snap
	if x.oneStatement(q.root) {
		snap.OneStatement()
	}
	data, errs, err := q.result(x)
	pos, access := snapshotPosition(snap), snap.AccessVersion()
	snap.Close()
	if err != nil {
		return LiveResult{Err: err}
	}
	return LiveResult{Data: data, Errors: errs, Rows: x.rows, Position: pos, Access: access, Boundary: x.boundary}
}

// Bounds bound one read of a live query's result more tightly than the
// schema's limits (graphql_max_result_rows, graphql_max_response_bytes):
// a result past them is an error naming RowsKey or BytesKey, which says
// why (RowsWhy, BytesWhy: "that user rita's live queries may still
// hold"). A zero bound, or key, is the schema's; a negative bound is
// spent (see Spent).
type Bounds struct {
	Rows, Bytes       int
	RowsKey, BytesKey string
	RowsWhy, BytesWhy string
}

// Spent returns the error of a read whose rows or bytes bound is spent
// (negative: nothing is left to read a result with), nil otherwise.
func (b Bounds) Spent() error {
	var e *resultLimitError
	switch {
	case b.Rows < 0:
		e = &resultLimitError{key: b.RowsKey, budget: true, msg: "the live query may read no more documents: there are none left " + b.RowsWhy}
	case b.Bytes < 0:
		e = &resultLimitError{key: b.BytesKey, budget: true, msg: "the live query may read no more bytes: there are none left " + b.BytesWhy}
	default:
		return nil
	}
	return newResultError(gqlerror.List{e.gqlError(nil)})
}

// BudgetError returns the error of a live query ended by the live query
// budget's bound key, as a read past that bound answers it (a
// TOO_MANY_REQUESTS naming key in its extensions), with message msg.
func BudgetError(key, msg string) error {
	e := &resultLimitError{key: key, budget: true, msg: msg}
	return newResultError(gqlerror.List{e.gqlError(nil)})
}

// Limits returns the schema's limits on a result's rows and bytes.
func (q *LiveQuery) Limits() (rows, bytes int) {
	return q.es.limits.MaxResultRows, q.es.limits.MaxResponseBytes
}

// User returns the user whose request the live query is.
func (q *LiveQuery) User() *sluice.User { return q.req.User }

// IsBoundError reports whether err is the error of a result that went past
// the bound named key (Bounds.RowsKey, BytesKey).
func IsBoundError(err error, key string) bool {
	var re *ResultError
	if !errors.As(err, &re) {
		return false
	}
	for _, e := range re.Errors {
		if e.Extensions["limit"] == key {
			return true
		}
	}
	return false
}

// execution returns an execution of the query reading under ctx, within
// bounds b.
func (q *LiveQuery) execution(ctx context.Context, b Bounds) *execution {
	op := &graphql.OperationContext{Variables: q.variables, Doc: q.doc, DisableIntrospection: q.noIntrospection,
		Operation: &ast.OperationDefinition{Operation: ast.Query, SelectionSet: q.selections}}
	x := &execution{ctx: ctx, op: op, es: q.es, req: q.req, cache: map[string]*object{}, maxRows: q.es.limits.MaxResultRows,
		// One field that lists documents: its result's boundary says
		// which changes cannot change it (AffectsResult).
		wantBoundary: !q.anyCommit && len(q.fields) == 1 && !q.fields[0].aggregate}
	if b != (Bounds{}) {
		x.bounds = &b
		if b.Rows > 0 {
			x.maxRows = b.Rows
		}
	}
	x.limitReads()
	return x
}

// result runs x, an execution of q, and returns its data on one line
// ("null" when an error's null reached it) and the JSON array of the
// errors of values it carries (nil: none; see execution.failValue). An
// error that left the result incomplete is a *ResultError, which ends
// the live query.
func (q *LiveQuery) result(x *execution) (data, errs []byte, err error) {
	defer x.deadline()()
	data = x.queryOn(q.root)
	if x.outdated != nil {
		return nil, nil, x.outdated // the stream revises q and reads again
	}
	if x.incomplete || data == nil && len(x.errs) == 0 {
		return nil, nil, newResultError(x.errs)
	}
	if len(x.errs) > 0 {
		if errs, err = json.Marshal(x.errs); err != nil {
			return nil, nil, err
		}
	}
	if data == nil {
		return []byte("null"), errs, nil
	}
	return compactLine(data), errs, nil
}

// snapshotPosition returns the position snap reflects, the zero Position
// when it read nothing (Epoch "").
func snapshotPosition(snap *engine.Snapshot) sluice.Position {
	pos, ok := snap.Position()
	if !ok {
		return sluice.Position{}
	}
	return pos
}

// LiveResult is the result of a live query's run: its data and the
// position it reflects, or its error. Access is the access version of the
// snapshot it was read in: the result is handed on only once the access
// changes up to it are applied (changefeed.Hub.SyncAccess), since what it
// read may have been written after them.
type LiveResult struct {
	Data []byte
	// Errors is the JSON array of the errors the result carries, nil
	// when it has none: each of a field whose value the documents read
	// decide (a required field without a value that can be shown, and
	// so null up to its nearest nullable parent), which the result is
	// sent with, as the query answers them. Two results are the same
	// only when both their Data and their Errors are.
	Errors []byte
	// Rows is the number of documents the result read.
	Rows     int
	Position sluice.Position
	Access   int64
	// Boundary, when not nil, is the result's (see AffectsResult).
	Boundary *Boundary
	Err      error
}

// RunEach reads the results of live queries qs of one database and
// executable schema (a cohort: one query, different variables) in one
// snapshot, as Run reads one: the documents their root fields list are
// read by one SQL statement for all of them (engine.QueryDocumentsEach),
// then what each selects through references. A query whose root is not
// one class query field, or whose arguments are refused, reads on its
// own in that snapshot. If the joined statement fails, each query is run
// on its own (Run), so that an error is its query's alone; so are the
// queries after one whose statement failed in the snapshot (which ends
// its transaction). bs[i] bounds the read of qs[i].
func RunEach(ctx context.Context, qs []*LiveQuery, bs []Bounds) []LiveResult {
	out := make([]LiveResult, len(qs))
	if len(qs) == 0 {
		return out
	}
	if len(qs) == 1 {
		out[0] = qs[0].Run(ctx, bs[0])
		return out
	}
	es, db := qs[0].es, qs[0].req.DB
	for _, q := range qs[1:] {
		if q.es != es {
			// Revised apart after a schema change: one snapshot
			// each, until they are prepared alike again.
			for i, q := range qs {
				out[i] = q.Run(ctx, bs[i])
			}
			return out
		}
	}
	rctx, snap := es.store.ReadSnapshot(ctx, db)
	defer snap.Close() // after a panic too (closed below as soon as it can be)
	xs := make([]*execution, len(qs))
	// The snapshot is not told it has one statement (Run's saving of a
	// round trip): a large batch, or one whose variables change its SQL's
	// shape, is read by several.
	var (
		batch   []engine.DocQuery
		batched []int    // the query of each of batch
		aliases []string // and the field it is for
	)
	for i, q := range qs {
		x := q.execution(rctx, bs[i])
		x.snap = snap // its reads are run one after the other
		xs[i] = x
		if bs[i].Spent() != nil {
			continue // answered below, without reading
		}
		cf, ok := x.readingRoot(q.root)
		if !ok || cf.Name == fieldChangeSet {
			continue
		}
		if _, agg := aggregateClass(es.schema, cf.Name); agg {
			continue // one statement of its own, in the snapshot
		}
		dq, err := x.classDocQuery(cf)
		if err != nil {
			continue // its execution answers the error
		}
		batch, batched, aliases = append(batch, dq), append(batched, i), append(aliases, cf.Alias)
	}
	// The batch's read holds at most what its queries' reads may hold
	// together; past that, each runs on its own, within its own bound.
	bctx, bound := rctx, int64(0)
	for _, i := range batched {
		max := int64(xs[i].walkBound())
		if max <= 0 {
			bound = -1
			break
		}
		bound += readFactor * max
	}
	if bound > 0 {
		bctx = engine.LimitReads(rctx, bound)
	}
	// The joined statement is a part of each query's read, which
	// graphql_request_timeout bounds (deadline) as Run's is: without it,
	// only statement_timeout (perhaps none) ended it. Past it, each
	// query is read on its own below, within its own deadline, so that a
	// query too slow alone ends with the error naming the limit and the
	// others are answered.
	if d := es.limits.RequestTimeout; d > 0 {
		var cancel context.CancelFunc
		bctx, cancel = context.WithTimeout(bctx, d)
		defer cancel()
	}
	docs, err := es.store.QueryDocumentsEach(bctx, db, es.schema, batch)
	if err != nil {
		snap.Close()
		for i, q := range qs {
			out[i] = q.Run(ctx, bs[i])
		}
		return out
	}
	for j, i := range batched {
		xs[i].preread = map[string][]engine.QueryDoc{aliases[j]: docs[j]}
	}
	// The queries from rest on are read on their own, once a statement
	// of one before failed: that ended the snapshot's transaction, and
	// every later statement in it would fail too, ending live queries
	// whose own reads are sound (another user's, in a cohort) for one
	// whose statement failed (its own deadline, a sum past its range).
	rest := len(qs)
	for i, q := range qs {
		if snap.Failed() {
			rest = i
			break
		}
		if err := bs[i].Spent(); err != nil {
			out[i].Err = err
			continue
		}
		out[i].Data, out[i].Errors, out[i].Err = q.result(xs[i])
		out[i].Rows, out[i].Boundary = xs[i].rows, xs[i].boundary
	}
	pos, access := snapshotPosition(snap), snap.AccessVersion()
	snap.Close() // before the others take connections of their own
	for i := range out[:rest] {
		if out[i].Err == nil {
			out[i].Position, out[i].Access = pos, access
		}
	}
	for i := rest; i < len(qs); i++ {
		out[i] = qs[i].Run(ctx, bs[i])
	}
	return out
}

// ResultError is the error of a live query whose result could not be read
// whole (a limit, a deadline, a failed read, a refused argument): its
// errors end its stream, as they would answer the query. It unwraps to a
// *sluice.Error of the first error's code.
type ResultError struct {
	Errors gqlerror.List
}

func newResultError(errs gqlerror.List) *ResultError {
	if len(errs) == 0 {
		errs = gqlerror.List{{Message: "internal error", Extensions: map[string]any{"code": sluice.CodeInternal.GraphQLCode()}}}
	}
	return &ResultError{Errors: errs}
}

func (e *ResultError) Error() string { return e.Errors.Error() }

// Unwrap returns the first error as a *sluice.Error, for its code.
func (e *ResultError) Unwrap() error {
	code := sluice.CodeInternal
	if c, ok := e.Errors[0].Extensions["code"].(string); ok {
		for _, k := range []sluice.Code{sluice.CodeInvalid, sluice.CodeForbidden, sluice.CodeNotFound, sluice.CodeUnprocessable, sluice.CodeUnavailable, sluice.CodeTooMany} {
			if k.GraphQLCode() == c {
				code = k
			}
		}
	}
	return &sluice.Error{Code: code, Message: strings.TrimSpace(e.Errors[0].Message)}
}

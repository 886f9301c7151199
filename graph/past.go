package graph

import (
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/filter"
)

// argAsOf is the argument of a class query field that reads the state at
// a past position.
const argAsOf = "asOf"

// withAsOf returns the argument list args of a query field, "(…)", with
// asOf added.
func withAsOf(args string) string {
	return strings.TrimSuffix(args, ")") + `, "Reads the state at this position (one a read, a write or an event answered) instead of now." ` + argAsOf + `: String)`
}

// asOf returns the position the query's class fields read (asOf), nil
// when they read the present. A query reads one state, whose position its
// result answers: every reading root field must then give the same asOf
// (a _ChangeSet field reads the log, not a state, so it cannot join one).
func (x *execution) asOf() (*sluice.Position, error) {
	var text *string
	var first string
	n := 0
	for _, cf := range x.rootFields(typeQuery) {
		switch cf.Name {
		case "__typename", "__schema", "__type":
			continue
		}
		n++
		var v *string
		if cf.Name != fieldChangeSet {
			if s, ok := cf.ArgumentMap(x.op.Variables)[argAsOf].(string); ok {
				v = &s
			}
		}
		switch {
		case n == 1:
			text, first = v, cf.Alias
		case (text == nil) != (v == nil) || text != nil && *text != *v:
			return nil, errorf("%s and %s read different states: a query reads one, so give every field the same asOf (or none), and read _ChangeSet in a query of its own", first, cf.Alias)
		}
	}
	if text == nil {
		return nil, nil
	}
	p, err := engine.ParsePosition(argAsOf, *text)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// checkPast returns an error when the class query field cf, q as storage
// sees it, would show, filter or sort by something whose state as of
// x.past cannot be shown (see engine.Past): it says what and why. The
// check is on the query, before anything is read.
func (x *execution) checkPast(cf graphql.CollectedField, q engine.DocQuery) error {
	// The class queried itself: an interface whose implementation then
	// was dropped since (q.Classes are today's).
	if err := x.past.CheckClass(cf.Name); err != nil {
		return err
	}
	for _, c := range q.Classes {
		if err := x.past.CheckClass(c); err != nil {
			return err
		}
		for _, k := range q.Order {
			if err := x.past.CheckField(c, k.Field); err != nil {
				return err
			}
		}
	}
	if err := x.checkPastFilter(q.Filter, q.Classes); err != nil {
		return err
	}
	return x.checkPastSelection(cf.Selections, cf.Name, q.Classes, map[pastKey]bool{})
}

// checkPastFilter checks the fields filter e reads on documents of the
// given classes, through references too.
func (x *execution) checkPastFilter(e filter.Expr, classes []string) error {
	field := func(f *sluice.Field) error {
		for _, c := range classes {
			if err := x.past.CheckField(c, f.Name); err != nil {
				return err
			}
		}
		return nil
	}
	switch e := e.(type) {
	case *filter.And:
		for _, s := range e.Exprs {
			if err := x.checkPastFilter(s, classes); err != nil {
				return err
			}
		}
	case *filter.Or:
		for _, s := range e.Exprs {
			if err := x.checkPastFilter(s, classes); err != nil {
				return err
			}
		}
	case *filter.Not:
		return x.checkPastFilter(e.Expr, classes)
	case *filter.Compare:
		if e.Field != nil {
			return field(e.Field)
		}
	case *filter.Sub:
		// What is inside a subdocument is its field's value, and the
		// values of its class's fields (engine.Past names a field of a
		// subdocument by its class).
		if err := field(e.Field); err != nil {
			return err
		}
		return x.checkPastFilter(e.Expr, []string{e.Class})
	case *filter.Ref:
		if err := field(e.Field); err != nil {
			return err
		}
		return x.checkPastRef(e.Class, e.Expr)
	case *filter.Quant:
		if err := field(e.Field); err != nil {
			return err
		}
		switch e.Field.Type.Kind {
		case sluice.TypeReference:
			return x.checkPastRef(e.Field.Type.Name, e.Elem)
		case sluice.TypeSubdocument:
			return x.checkPastFilter(e.Elem, []string{e.Field.Type.Name})
		}
	}
	return nil
}

// checkPastRef checks filter e, tested on the documents a reference to
// class points at: those classes, and the fields e reads of them.
func (x *execution) checkPastRef(class string, e filter.Expr) error {
	targets := classesOf(x.es.schema, class, true)
	for _, c := range targets {
		if err := x.past.CheckClass(c); err != nil {
			return err
		}
	}
	return x.checkPastFilter(e, targets)
}

// pastKey names a check of checkPastSelection: the GraphQL type the
// documents are presented as, their classes, and the selection set on
// them (selKey).
type pastKey struct {
	static, classes, sel string
}

// checkPastSelection checks the fields selection sel shows of documents
// (or subdocuments) of the given classes (presented as GraphQL type
// static), of their subdocuments, and of the documents their references
// point to. seen holds the selections checked already (pastKey).
//
// Each is checked once per root field. The fields of sel are collected
// for each class, and a reference field's selection is reached once per
// class that has the field (an interface's every implementation): keyed
// by the slice CollectFields makes anew each time, the check was never
// found done, and a query whose references point to an interface of n
// implementations cost n^depth, before any limit (selections are keyed
// by their nodes now, as prefetch's walks are). The walk also stops
// when the request's context ends.
func (x *execution) checkPastSelection(sel ast.SelectionSet, static string, classes []string, seen map[pastKey]bool) error {
	x.pastSteps++
	if len(sel) == 0 {
		return nil
	}
	key := pastKey{static: static, classes: strings.Join(classes, " "), sel: x.selKey(sel)}
	if seen[key] {
		return nil
	}
	seen[key] = true
	if err := x.ctx.Err(); err != nil {
		return err
	}
	for _, name := range classes {
		c := x.es.schema.Class(name)
		for _, cf := range x.fields(sel, x.runtimeType(static, c)) {
			f := c.Field(cf.Name)
			if f == nil {
				if bl, ok := parseBacklink(x.es.schema, x.es.role, cf.Name); ok {
					if err := x.checkPastBacklink(cf, bl, seen); err != nil {
						return err
					}
				}
				continue // _id, _type, _CommitMetadata, __typename
			}
			if err := x.past.CheckField(name, f.Name); err != nil {
				return err
			}
			if len(cf.Selections) == 0 {
				continue
			}
			if f.Type.Kind == sluice.TypeSubdocument {
				// Its fields are its class's (see checkPastFilter).
				if err := x.checkPastSelection(cf.Selections, f.Type.Name, []string{f.Type.Name}, seen); err != nil {
					return err
				}
				continue
			}
			if f.Type.Kind != sluice.TypeReference {
				continue
			}
			if err := x.checkPastRefSelection(cf.Selections, f.Type.Name, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkPastRefSelection checks selection sel of a reference to class: the
// classes it may point at, and the fields sel shows of them.
func (x *execution) checkPastRefSelection(sel ast.SelectionSet, class string, seen map[pastKey]bool) error {
	targets := classesOf(x.es.schema, class, true)
	for _, t := range targets {
		if err := x.past.CheckClass(t); err != nil {
			return err
		}
	}
	return x.checkPastSelection(sel, class, targets, seen)
}

// checkPastBacklink checks a backlink selection cf: the documents of bl's
// class that point through bl's reference field, filtered, sorted and
// shown as cf says.
func (x *execution) checkPastBacklink(cf graphql.CollectedField, bl backlink, seen map[pastKey]bool) error {
	q, err := ParseQueryArgs(x.es.schema, bl.class.Name, cf.Field, x.op.Variables)
	if err != nil {
		// Refused arguments: the read reads nothing for the field and
		// answers its error at its path, as today's does
		// (loadBacklinks).
		return nil
	}
	// The class itself, as at the root (see checkPast): an interface
	// whose implementation then was dropped since held documents then
	// pointing here that q.Classes (today's) leave out.
	if err := x.past.CheckClass(bl.class.Name); err != nil {
		return err
	}
	for _, c := range q.Classes {
		if err := x.past.CheckClass(c); err != nil {
			return err
		}
		if err := x.past.CheckField(c, bl.field.Name); err != nil {
			return err
		}
		for _, k := range q.Order {
			if err := x.past.CheckField(c, k.Field); err != nil {
				return err
			}
		}
	}
	if err := x.checkPastFilter(q.Filter, q.Classes); err != nil {
		return err
	}
	return x.checkPastSelection(cf.Selections, bl.class.Name, q.Classes, seen)
}

// checkPastAggregate checks an aggregate of q's classes as of x.past:
// the documents counted, the filter and the fields aggregated.
func (x *execution) checkPastAggregate(q engine.AggregateQuery) error {
	if err := x.past.CheckClass(q.Class); err != nil {
		return err // see checkPast
	}
	for _, c := range q.Classes {
		if err := x.past.CheckClass(c); err != nil {
			return err
		}
		for _, a := range q.Aggs {
			if err := x.past.CheckField(c, a.Field); err != nil {
				return err
			}
		}
	}
	return x.checkPastFilter(q.Filter, q.Classes)
}

// checkImageFilter returns an error when filter e, evaluated on the image
// of a document of class in commit c (a _ChangeSet's field, a
// subscription's event), tests a field that the image no longer shows
// the reader because of a schema change since the commit (protected from
// its role, or its values dropped: Store.HiddenSince). As a read as of the
// commit refuses such a field, naming it, so does the filter, rather than
// take it for missing: its answer would be wrong, and would tell what the
// image hides. The fields it reads through references are the present
// documents' (lookup), not the image's, and are not checked.
func (x *execution) checkImageFilter(e filter.Expr, c *sluice.Commit, class string) error {
	if x.hiddenSeq != c.Seq {
		hidden, err := x.es.store.HiddenSince(x.ctx, x.req.DB, x.es.schema, x.es.role, c.Seq)
		if err != nil {
			return err
		}
		x.hidden, x.hiddenSeq = hidden, c.Seq
	}
	if x.hidden == nil {
		return nil
	}
	return imageFilterFields(e, []string{class}, func(class, field string) error {
		if why, ok := x.hidden[class][field]; ok {
			return sluice.Errorf(sluice.CodeInvalid, "%s", why)
		}
		return nil
	})
}

// imageFilterFields calls check with each field filter e tests on
// documents of the given classes, and on their subdocuments (by the
// subdocument's class), not on the documents their references point to.
func imageFilterFields(e filter.Expr, classes []string, check func(class, field string) error) error {
	field := func(f *sluice.Field) error {
		for _, c := range classes {
			if err := check(c, f.Name); err != nil {
				return err
			}
		}
		return nil
	}
	switch e := e.(type) {
	case *filter.And:
		for _, s := range e.Exprs {
			if err := imageFilterFields(s, classes, check); err != nil {
				return err
			}
		}
	case *filter.Or:
		for _, s := range e.Exprs {
			if err := imageFilterFields(s, classes, check); err != nil {
				return err
			}
		}
	case *filter.Not:
		return imageFilterFields(e.Expr, classes, check)
	case *filter.Compare:
		if e.Field != nil {
			return field(e.Field)
		}
	case *filter.Sub:
		if err := field(e.Field); err != nil {
			return err
		}
		return imageFilterFields(e.Expr, []string{e.Class}, check)
	case *filter.Ref:
		return field(e.Field)
	case *filter.Quant:
		if err := field(e.Field); err != nil {
			return err
		}
		if e.Field.Type.Kind == sluice.TypeSubdocument {
			return imageFilterFields(e.Elem, []string{e.Field.Type.Name}, check)
		}
	}
	return nil
}

// selectsChange reports whether change ch of commit c is of a document
// of class under (or, with children, of one implementing it). A commit
// made under an older schema version than es's (a stream resumed, or a
// member gone on alone, read it later; or _ChangeSet(commit:)) is judged
// by the classes as they were then, as the streams that kept up judged
// it (see engine.SchemaThen): a change not selected then is not selected;
// one selected then that today's schema cannot show as one of under (its
// class dropped, made no document class, or no longer implementing
// under) is the error naming the change (outcome ends it), never
// silently left out.
func (x *execution) selectsChange(c *sluice.Commit, ch *sluice.Change, under string, children bool, outcome string) (bool, error) {
	fits := func(s *sluice.Schema) bool {
		return documentClass(s, ch.Class) != nil && (ch.Class == under || children && s.IsA(ch.Class, under))
	}
	if x.thenSeq != c.Seq {
		then, err := x.es.store.SchemaThen(x.ctx, x.req.DB, c)
		if err != nil {
			return false, err
		}
		x.then, x.thenSeq = then, c.Seq
	}
	if x.then == nil {
		return fits(x.es.schema), nil
	}
	if !fits(x.then) {
		return false, nil
	}
	if fits(x.es.schema) {
		return true, nil
	}
	return false, x.es.store.LeftSince(x.ctx, x.req.DB, x.es.schema, x.es.role, c.Position(ch.Index), ch.Class, under, outcome)
}

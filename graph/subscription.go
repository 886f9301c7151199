package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/filter"
)

// Subscription is a validated subscription operation, ready to be
// evaluated against the commits of its database: a per-document field
// (<Class>_added, _updated, _deleted) or _ChangeSet. It is immutable;
// Events may be called from one goroutine at a time per commit stream, and
// different Subscriptions are independent.
type Subscription struct {
	es *ExecutableSchema
	// What an evaluation needs of the operation: its variables, its
	// fragments and the root field's alias and selections. Not gqlgen's
	// OperationContext, whose field cache (filled by every execution)
	// would stay with the subscription, nor the parsed document, whose
	// root field's arguments (a filter's literal) are parsed already: a
	// connection may hold thousands of subscriptions. Each evaluation
	// makes its own OperationContext (operationContext).
	variables  map[string]any
	doc        *ast.QueryDocument // only the fragments
	alias      string
	selections ast.SelectionSet
	req        *Request
	// op is the operation's text and variables, to prepare it again
	// after a schema change (Revise).
	op operation
	// since is the schema version the subscription was first prepared
	// for (Revise keeps it): a schema change's commit of a later version
	// was judged when it was revised for it; one of this version or an
	// older one is replayed, and judged when it is met (checkChangeThen).
	since int

	// A per-document subscription: class, change and optional filter.
	class  string
	change sluice.Op
	filter filter.Expr

	// A _ChangeSet subscription: its include_children argument and whether
	// it selects any per-class field (one that only selects
	// _CommitMetadata gets every commit).
	changeSet       bool
	includeChildren bool
	classFields     bool

	classes []string
	// roots are the classes (and interfaces) whose fields it selects:
	// the per-document field's, or those of _ChangeSet's fields; own
	// those whose _ChangeSet fields all select them without their
	// children (include_children: false), their own documents only.
	roots, own []string
	// follows: an event reads documents beyond the commit's images
	// (references, backlinks, a filter through a reference), which it
	// reads as of the commit (readAsOfCommit).
	follows bool
}

// SubscriptionEvent is one event of a subscription: its stream position
// (the SSE id) and its ExecutionResult as one line of JSON
// ({"data":{"<field>":…}}).
type SubscriptionEvent = sluice.Event

// NewSubscription prepares the subscription operation of op for the
// request req (both from a request served by es). It returns a CodeInvalid
// error when op is not a subscription, selects more than one root field or
// has an invalid filter.
func (es *ExecutableSchema) NewSubscription(op *graphql.OperationContext, req *Request) (*Subscription, error) {
	if op.Operation.Operation != ast.Subscription {
		return nil, errorf("the operation is a %s, not a subscription", op.Operation.Operation)
	}
	if req == nil || req.DB == nil {
		return nil, sluice.Errorf(sluice.CodeInternal, "graph: no request for the subscription")
	}
	s := &Subscription{es: es, variables: op.Variables, doc: &ast.QueryDocument{Fragments: op.Doc.Fragments}, req: req, op: operationOf(op), since: es.version}
	// The request's operation context collects the root fields: it has the
	// same variables and fragments, and goes when the request does.
	x := &execution{op: op, es: es, req: req}
	roots := x.fields(op.Operation.SelectionSet, "Subscription")
	if len(roots) != 1 {
		return nil, rootFieldsError(op.Operation, roots)
	}
	cf := roots[0]
	s.alias, s.selections = cf.Alias, cf.Selections
	if cf.Name == fieldChangeSet {
		s.changeSet = true
		s.includeChildren = true
		if b, ok := cf.ArgumentMap(op.Variables)["include_children"].(bool); ok {
			s.includeChildren = b
		}
		seen := map[string]bool{}
		for _, f := range x.fields(cf.Selections, typeChangeSet) {
			if f.Name == fieldCommit || strings.HasPrefix(f.Name, "__") {
				continue
			}
			s.classFields = true
			class := f.Name[:max(strings.LastIndexByte(f.Name, '_'), 0)]
			// As changes reads it: the field's include_children when
			// given, else _ChangeSet's.
			children := s.includeChildren
			if b, ok := f.ArgumentMap(op.Variables)["include_children"].(bool); ok && f.Arguments.ForName("include_children") != nil {
				children = b
			}
			if !children {
				if !slices.Contains(s.own, class) {
					s.own = append(s.own, class)
				}
			} else if !slices.Contains(s.roots, class) {
				s.roots = append(s.roots, class)
			}
			// Validate the field's filter now, so a bad one is a request
			// error rather than a failure at the first commit; and the
			// arguments of the backlinks it selects.
			scan := newRefScan(es, op, map[string]bool{})
			if scan.selection(class, f.Selections); scan.err != nil {
				return nil, scan.err
			}
			if m, ok := f.ArgumentMap(op.Variables)["filter"].(map[string]any); ok {
				e, err := es.ParseFilter(class, m)
				if err != nil {
					return nil, err
				}
				s.follows = s.follows || filterFollows(e)
			}
			s.follows = s.follows || x.followsReferences(f.Selections)
			for _, n := range classesOf(es.schema, class, true) {
				if !seen[n] {
					seen[n] = true
					s.classes = append(s.classes, n)
				}
			}
		}
		if !s.classFields {
			s.classes = nil
		}
		// A class selected with its children by another field is a
		// root: what it covers is judged with them.
		s.own = slices.DeleteFunc(s.own, func(c string) bool { return slices.Contains(s.roots, c) })
		return s, nil
	}
	i := strings.LastIndexByte(cf.Name, '_')
	if i <= 0 {
		return nil, errorf("unknown subscription field %s", cf.Name)
	}
	change, ok := sluice.ParseOp(cf.Name[i+1:])
	if !ok || es.schema.Class(cf.Name[:i]) == nil {
		return nil, errorf("unknown subscription field %s", cf.Name)
	}
	s.class, s.change = cf.Name[:i], change
	s.roots = []string{s.class}
	if m, ok := cf.ArgumentMap(op.Variables)["filter"].(map[string]any); ok {
		f, err := es.ParseFilter(s.class, m)
		if err != nil {
			return nil, err
		}
		s.filter = f
	}
	// The arguments of the backlinks it selects, as its own: refused
	// now rather than at every event.
	scan := newRefScan(es, op, map[string]bool{})
	if scan.selection(s.class, cf.Selections); scan.err != nil {
		return nil, scan.err
	}
	s.classes = classesOf(es.schema, s.class, true)
	s.follows = filterFollows(s.filter) || x.followsReferences(cf.Selections)
	return s, nil
}

// PerCommit reports whether the subscription gives one event per commit
// (_ChangeSet) rather than one per change: its Events need a whole commit.
func (s *Subscription) PerCommit() bool { return s.changeSet }

// operationContext returns a fresh OperationContext of the operation, for
// one evaluation.
func (s *Subscription) operationContext() *graphql.OperationContext {
	return &graphql.OperationContext{Variables: s.variables, Doc: s.doc}
}

// Classes returns the document classes whose changes can produce an
// event (nil: any commit can), for the change feed to skip the others.
func (s *Subscription) Classes() []string { return s.classes }

// Events returns the events commit c gives the subscription, in change
// order: one per matching change for a per-document field, at most one
// (positioned at the commit's last change) for _ChangeSet. The payloads
// pass the subscriber's read path (the role's schema and the selection).
//
// An evaluation is bounded as a query is: it reads at most
// graphql_max_result_rows documents (references and backlinks, for all
// the events of c together) and each event's data holds at most
// graphql_max_response_bytes (resolving their references together may
// visit that many objects and references for each event, see
// walkBound). An event past a bound is not sent: in its
// place (at its position) the subscriber gets a next holding only the
// error naming the bound (extensions.code RESULT_TOO_LARGE, as a
// _ChangeSet of a commit too large to gather has), and the stream goes
// on. Past the rows bound every event of c is such an error: the
// documents were read for all of them at once. Filters through
// references read documents too (lookup), change by change: when one
// passes the rows bound, the referenced document it needed is unknown,
// so that change and every later one the field selects (by operation
// and class, the filter unevaluated) get the error in place of their
// events, those before keeping theirs (unless resolving their
// references then passes the bound too). Other errors are failures to
// read referenced documents (for the payloads or the filters), and a
// filter past filter.MaxMatchSteps, which end the stream.
//
// The reads of one commit's events, all their statements together, are
// bounded by graphql_request_timeout as a query's fields are: each
// statement may run up to statement_timeout, and the selection up to
// graphql_max_statements of them (its references and backlinks, a
// backlink sorting every link of its target), for every commit. Past it
// the error names the limit, and the stream ends. Those reads are as of
// the commit, and each statement reads the log from the commit to its
// head: a commit from which the log holds more than max_past_changes
// changes (a stream resumed from far back, or far behind) is not read,
// and its events (a _ChangeSet's one unless its lists are empty judged
// from the images, per-document events as past the rows bound) are
// errors naming max_past_changes, so that what a stream
// reads per event is bounded by configuration, not by its backlog.
func (s *Subscription) Events(ctx context.Context, c *sluice.Commit) ([]SubscriptionEvent, error) {
	x := &execution{ctx: ctx, op: s.operationContext(), es: s.es, req: s.req, cache: map[string]*object{}, maxRows: s.es.limits.MaxResultRows}
	if s.follows && s.selects(c) {
		// Only such events read documents (a timer for every other
		// commit and stream would bound nothing).
		defer x.deadlineSaying("the events of a commit read for longer than %s, the most they may read (limit %s); select fewer references and backlinks, or resume the stream to read them again")()
	}
	evs, err := s.evaluate(x, c)
	if err != nil && x.timedOut() {
		return nil, x.timeout // not the driver's error of the statement it cancelled
	}
	return evs, err
}

// evaluate is Events, reading through x.
func (s *Subscription) evaluate(x *execution, c *sluice.Commit) ([]SubscriptionEvent, error) {
	if c.NewSchema {
		if err := s.checkSchemaThen(x.ctx, c); err != nil {
			return nil, err
		}
		if err := s.checkChangeThen(x.ctx, c); err != nil {
			return nil, err
		}
	}
	if len(c.Changes) == 0 {
		return nil, nil
	}
	// History is shown through the schema of the commit too: a field
	// protected when the commit was made stays hidden from this role.
	c, err := s.es.store.RedactCommit(x.ctx, s.req.DB, s.es.schema, s.es.role, c)
	if err != nil {
		return nil, err
	}
	var far error
	if s.follows && s.selects(c) {
		// What an event reads beyond the commit's images is read as of
		// the commit, so that a resumed stream gets the events a live
		// one did. Its failure ends the stream (a pruned commit's events
		// cannot be resumed anyway), but for a commit too far behind the
		// head to be read as of (max_past_changes): its events are that
		// bound's errors, and the stream goes on.
		restore, err := x.readAsOfCommit(c)
		var pre *engine.PastRangeError
		if errors.As(err, &pre) {
			far = errPastTooFar(pre)
		} else if err != nil {
			return nil, err
		} else {
			defer restore()
		}
	}
	return s.events(x, c, far)
}

// errPastTooFar is the bound's error in place of the events of a commit
// whose references cannot be read as of it (engine.PastRangeError).
func errPastTooFar(e *engine.PastRangeError) error {
	return &resultLimitError{key: keyMaxPastChanges, msg: fmt.Sprintf("its references, backlinks and filters through references are read as of its commit, and the log from there to its head %s holds more than %d %s, the most a read of the past reads; resume from a later position, or subscribe without them to receive every event whole",
		e.Head, e.Most, e.What)}
}

// checkSchemaThen returns the Conflict that ends the subscription at c,
// a schema change, when it took a class out of those whose fields the
// subscription selects (a class dropped, made an interface or a
// subdocument type, or one that no longer implements the interface
// selected) or brought in one that has documents (a class made to
// implement it): it did so without an event, and a stream that went on
// past it would never tell its client. It is judged by the version before
// the change and the one it made (engine.Engine.Regrouped), so that a
// subscription open at the change (revised for it) and one resumed from
// before it end at the same commit, even once the class was made again.
// A _ChangeSet that selects no class's field selects no documents, and
// goes on.
func (s *Subscription) checkSchemaThen(ctx context.Context, c *sluice.Commit) error {
	var rg *engine.Regroup
	if len(s.roots) > 0 {
		var err error
		if rg, err = s.es.store.Regrouped(ctx, s.req.DB, c, s.roots); err != nil {
			return err
		}
	}
	if rg == nil && len(s.own) > 0 {
		// Classes selected without their children cover their own
		// documents only: what comes or goes under them changes
		// nothing of it, but they themselves may go.
		before, after, err := s.es.store.SchemaChange(ctx, s.req.DB, c)
		if err != nil {
			return err
		}
		if after != nil {
			rg = engine.OwnLeft(before, after, s.own)
		}
	}
	if rg == nil {
		return nil
	}
	return engine.RegroupedError(s.req.DB, c, rg, engine.StreamEnds)
}

// selects reports whether a change of c may give the subscription an
// event: one of its classes (with its operation, for a per-document
// subscription).
func (s *Subscription) selects(c *sluice.Commit) bool {
	if s.changeSet && s.classes == nil {
		return true // every commit
	}
	for _, ch := range c.Changes {
		if slices.Contains(s.classes, ch.Class) && (s.changeSet || ch.Op == s.change) {
			return true
		}
	}
	return false
}

// events is Events of c, redacted, evaluated by x (export_test.go counts
// its work). far, when not nil, says that nothing beyond the images can
// be read as of c (errPastTooFar): the events that would read it are
// its errors, those whose filter would read it too (by operation and
// class, as past the rows bound).
func (s *Subscription) events(x *execution, c *sluice.Commit, far error) ([]SubscriptionEvent, error) {
	if s.changeSet {
		pos := c.Position(c.Changes[len(c.Changes)-1].Index)
		if far != nil {
			// A change set that lists nothing sends nothing, as
			// nearer the head: judged from the images where that
			// can be (changeSetShows). One that lists something is
			// far's error, however many documents its lists would
			// hold: max_past_changes keeps it from being read,
			// and the rows bound counts what is read.
			shows, err := x.changeSetShows(c, s.selections, s.includeChildren)
			if err == nil && !shows {
				return nil, nil
			}
			if err == nil {
				err = far
			}
			ev, ok := s.limitEvent(pos, err)
			if !ok {
				return nil, err
			}
			return []SubscriptionEvent{ev}, nil
		}
		x.limitReads()
		w := s.open()
		x.path = append(x.path[:0], pathSeg{name: s.alias})
		x.out = w
		n, err := x.writeChangeSet(w, c, s.selections, s.includeChildren)
		x.out = nil
		errs := x.takeErrors()
		if err == errNulled {
			return []SubscriptionEvent{s.nullEvent(pos, errs)}, nil
		}
		if err != nil {
			ev, ok := s.limitEvent(pos, err)
			if !ok {
				return nil, err
			}
			return []SubscriptionEvent{ev}, nil
		}
		if w.over {
			ev, _ := s.limitEvent(pos, x.tooLarge())
			return []SubscriptionEvent{ev}, nil
		}
		if n == 0 && s.classFields {
			return nil, nil
		}
		return []SubscriptionEvent{s.close(x, w, pos, errs)}, nil
	}
	// An entry is a change's event: an object to resolve, or (lim) an
	// event already made in its place.
	type entry struct {
		obj *object
		pos sluice.Position
		lim *SubscriptionEvent
	}
	var entries []entry
	var objs []*object
	// lookupErr: the filter of a change read a referenced document past
	// the rows bound, which made the document look missing.
	var lookupErr error
	if far != nil && filterFollows(s.filter) {
		lookupErr = far
	}
	sc := s.es.schema
	// What the filter tests through references, and what the selection
	// reads beyond the images, as of the commit: a field it cannot show
	// ends the stream with the error naming it, as a filter on a field
	// the images no longer show does (checkImageFilter).
	if err := x.checkPastThrough(s.filter); err != nil {
		return nil, err
	}
	if err := x.checkPastBeyond(s.selections, s.class); err != nil {
		return nil, err
	}
	for i := range c.Changes {
		ch := &c.Changes[i]
		if ch.Op != s.change {
			continue
		}
		if ok, err := x.selectsChange(c, ch, s.class, true, engine.StreamEnds); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		raw, unknown := ch.After, ch.AfterUnknown
		if ch.Op == sluice.OpDeleted {
			raw, unknown = ch.Before, ch.BeforeUnknown
		}
		doc, err := DecodeDocument(raw)
		if err != nil {
			return nil, err
		}
		cl := documentClass(sc, doc.Type)
		if cl == nil {
			continue // a class the schema no longer has documents of
		}
		pos := c.Position(ch.Index)
		if lookupErr != nil {
			// Past the rows bound, this change's filter cannot be
			// evaluated: whether it matches is unknown, so it gets
			// the error in place of its event rather than none.
			ev, _ := s.limitEvent(pos, lookupErr)
			entries = append(entries, entry{pos: pos, lim: &ev})
			continue
		}
		if s.filter != nil {
			// A filter testing a field this image no longer shows
			// (protected since the commit, or its values dropped) ends
			// the stream with the error naming it, as a read as of the
			// commit is refused; so does a filter past
			// filter.MaxMatchSteps on this document, rather than
			// dropping its event unseen; so does the stream's end.
			if err := x.checkImageFilter(s.filter, c, doc.Type); err != nil {
				return nil, err
			}
			// A filter depending on a value the image left out as one
			// Sluice cannot read ends the stream too (filter.UnknownError).
			ok, known, err := filter.MatchUnknown(x.ctx, s.filter, doc, x.lookup, unknown)
			if err == nil && !known {
				err = filter.UnknownError(filter.TestedAmong(s.filter, unknown))
			}
			if err != nil {
				return nil, err
			}
			if x.lookupErr != nil {
				// A referenced document read for the filter
				// failed: it looked missing, so the filter's
				// answer is wrong. Past the rows bound, this
				// change and every later one get the error in
				// their events' places; any other failure ends
				// the stream.
				ev, lim := s.limitEvent(pos, x.lookupErr)
				if !lim {
					return nil, x.lookupErr
				}
				lookupErr = x.lookupErr
				entries = append(entries, entry{pos: pos, lim: &ev})
				continue
			}
			if !ok {
				continue
			}
		}
		o := &object{class: cl, id: doc.ID, version: c.VersionOf(ch), fields: doc.Fields, commit: c, changeType: s.change.String()}
		objs = append(objs, o)
		entries = append(entries, entry{obj: o, pos: pos})
	}
	if len(entries) == 0 {
		return nil, nil
	}
	out := make([]SubscriptionEvent, len(entries))
	// One statement per level of references for the whole commit. Each
	// event's data is bounded on its own: the walk may visit the
	// response bytes bound's worth of objects and references for each.
	x.walkEvents = len(objs)
	x.limitReads()
	if len(objs) > 0 {
		err := far
		if err == nil {
			err = x.prefetch(pendings(objs, s.selections, s.class))
		}
		if err != nil {
			for i, e := range entries {
				ev, ok := s.limitEvent(e.pos, err)
				if !ok {
					return nil, err
				}
				out[i] = ev
			}
			return out, nil
		}
	}
	for i, e := range entries {
		if e.lim != nil {
			out[i] = *e.lim
			continue
		}
		w := s.open()
		x.path = append(x.path[:0], pathSeg{name: s.alias})
		x.out = w
		written := x.writeObject(w, e.obj, s.selections, s.class)
		x.out = nil
		errs := x.takeErrors()
		if w.over {
			out[i], _ = s.limitEvent(e.pos, x.tooLarge())
			continue
		}
		if !written {
			// A required field without a value: the payload (nullable)
			// is null, the event says why.
			out[i] = s.nullEvent(e.pos, errs)
			continue
		}
		out[i] = s.close(x, w, e.pos, errs)
	}
	return out, nil
}

// close ends the event at pos written in w (open) with errs, the field
// errors recorded while its payload was written (below nullable fields,
// which they nulled): they are this event's, sent with it, never with the
// next one (TestEventErrorsGoWithTheirEvent). The execution's out was w
// meanwhile, so that they were counted against the event's bytes as a
// query's are; past them the event is the bound's.
func (s *Subscription) close(x *execution, w *jsonWriter, pos sluice.Position, errs gqlerror.List) SubscriptionEvent {
	w.WriteByte('}')
	if len(errs) > 0 {
		b, _ := json.Marshal(errs)
		w.reserved = 0 // what was reserved for them is written now
		w.WriteString(`,"errors":`)
		w.Write(b)
	}
	w.WriteByte('}')
	if w.over {
		ev, _ := s.limitEvent(pos, x.tooLarge())
		return ev
	}
	return SubscriptionEvent{Position: pos, ID: pos.String(), Data: compactLine(w.Bytes())}
}

// limitEvent returns the event at pos that replaces one past a bound when
// err is a bound's error (false otherwise): an ExecutionResult of that
// error alone, with the root field's path, its extensions.limit naming
// the bound and its code RESULT_TOO_LARGE.
func (s *Subscription) limitEvent(pos sluice.Position, err error) (SubscriptionEvent, bool) {
	var le *resultLimitError
	if !errors.As(err, &le) {
		return SubscriptionEvent{}, false
	}
	// A query's advice (limit and offset) has no place in an event:
	// what fits is a smaller selection, and the change itself can be read
	// by a query at the event's position.
	msg := "the event is not sent: " + le.msg // its own advice (errPastTooFar)
	if le.key != keyMaxPastChanges {
		what, _, _ := strings.Cut(le.msg, ";")
		msg = "the event is not sent: " + what +
			"; select fewer fields or levels of references, or read the changed document by a query as of the event's position (asOf, its id)"
	}
	ge := (&resultLimitError{key: le.key, budget: le.budget, msg: msg}).gqlError(ast.Path{ast.PathName(s.alias)})
	ge.Extensions["code"] = codeResultTooLarge
	data, merr := json.Marshal(map[string]any{"errors": gqlerror.List{ge}})
	if merr != nil {
		return SubscriptionEvent{}, false
	}
	return SubscriptionEvent{Position: pos, ID: pos.String(), Data: data}, true
}

// nullEvent returns the event at pos whose payload is null, with errs:
// a non-null field of the document had no value (writeDocField).
func (s *Subscription) nullEvent(pos sluice.Position, errs gqlerror.List) SubscriptionEvent {
	data, _ := json.Marshal(struct {
		Errors gqlerror.List      `json:"errors"`
		Data   map[string]*object `json:"data"`
	}{errs, map[string]*object{s.alias: nil}})
	return SubscriptionEvent{Position: pos, ID: pos.String(), Data: data}
}

// codeResultTooLarge is the extensions.code of a subscription event that
// is not sent because it is past a bound.
const codeResultTooLarge = "RESULT_TOO_LARGE"

// open starts an ExecutionResult up to the root field's value, bounded
// so that the value holds at most the response bytes limit.
func (s *Subscription) open() *jsonWriter {
	w := &jsonWriter{}
	w.WriteString(`{"data":`)
	w.WriteByte('{')
	w.key(s.alias, true)
	if m := s.es.limits.MaxResponseBytes; m > 0 {
		w.max = w.Len() + m
	}
	return w
}

// compactLine returns b without line breaks, so that it fits one SSE data
// line: a line break in it would end the frame, and what followed would
// be read as fields of the stream. The jsonWriter writes none (it escapes
// them in strings and compacts JSON values): this is a guard, two scans
// of the bytes, that finds none.
func compactLine(b []byte) []byte {
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}

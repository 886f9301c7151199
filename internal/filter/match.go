package filter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice"
)

// Lookup returns the document with the given id, or nil when there is none.
// Match calls it for filters through references; the caller batches the
// reads (a subscription fetches the referenced documents of an event once).
// Match calls it at most once per id and takes its answer as the document
// for the whole evaluation.
type Lookup func(id string) *sluice.Document

// Match reports whether doc matches e, with the semantics of the SQL
// compilation (see the package documentation). Field values are in the
// normalized form of sluice.Document, or as json.Decoder.UseNumber leaves
// them (json.Number) for values read from change JSON. lookup may be nil
// when e has no filter through a reference (such a filter is then false).
//
// Match is MatchContext without a context: an evaluation through
// references that goes past MaxMatchSteps is false. Callers that can
// report an error or that have a request's context use MatchContext.
func Match(e Expr, doc *sluice.Document, lookup Lookup) bool {
	ok, _ := MatchContext(context.Background(), e, doc, lookup)
	return ok
}

// MatchContext is Match, stopping with an error when ctx is done (its
// error) or when the evaluation beneath references (on the documents a
// filter through a reference reaches) goes past MaxMatchSteps (a
// sluice.CodeInvalid error saying so). The evaluation on doc itself costs
// at most the filter's nodes times doc's size and is not counted: a
// filter without references never goes past MaxMatchSteps, whatever the
// size of doc, and Match of it is false only when doc does not match.
//
// The result of each filter through a reference on each referenced
// document is computed once per call and remembered: a filter that follows
// references through documents that reference each other (friends of
// friends of friends…) costs the filter's nodes times the distinct
// documents it reaches, not the number of paths through them, which grows
// as the lists' lengths to the power of the nesting.
func MatchContext(ctx context.Context, e Expr, doc *sluice.Document, lookup Lookup) (bool, error) {
	m := newMatcher(ctx, lookup)
	ok := m.match(e, doc)
	if m.err != nil {
		return false, m.err
	}
	return ok, nil
}

// errTooManySteps is the error of an evaluation past MaxMatchSteps.
var errTooManySteps = &sluice.Error{Code: sluice.CodeInvalid, Message: fmt.Sprintf(
	"the filter takes more than %d steps to evaluate on a changed document and the documents it references; use a filter that follows fewer references", MaxMatchSteps)}

type matcher struct {
	ctx    context.Context
	lookup Lookup
	// docs holds the documents lookup returned, by id (nil: none).
	docs map[string]*sluice.Document
	// memo holds the result of each filter through a reference (a Ref's
	// Expr, a reference Quant's Elem) on each referenced document by id.
	// noMemo turns it off (the tests compare with the evaluation without
	// it).
	memo   map[memoKey]bool
	noMemo bool
	// visits counts the calls of object, element and scalar: step looks at
	// ctx every ctxCheckSteps of them. steps counts those of them beneath
	// a reference (refs > 0: evaluation on a document that a Ref or a
	// Quant over a list of references reached), up to maxSteps. The
	// evaluation outside references costs at most the filter's nodes
	// times the size of the matched document and is not bounded: only
	// following references multiplies the cost (by the documents
	// reached), and only that can go past MaxMatchSteps. err is ctx's
	// error or errTooManySteps once the evaluation stops (every call then
	// returns false at once).
	visits, steps, maxSteps int
	refs                    int
	err                     error
}

type memoKey struct {
	e  Expr
	id string
}

func newMatcher(ctx context.Context, lookup Lookup) *matcher {
	return &matcher{ctx: ctx, lookup: lookup, maxSteps: MaxMatchSteps}
}

func (m *matcher) match(e Expr, doc *sluice.Document) bool {
	if doc == nil {
		return false
	}
	return m.object(e, doc.ID, doc.Fields)
}

// ctxCheckSteps is how often, in steps (counted beneath references or
// not), step looks at the context (from the first step: a request already
// ended does not start).
const ctxCheckSteps = 1024

// step counts one step, against maxSteps when it is beneath a reference;
// it is false when the evaluation must stop.
func (m *matcher) step() bool {
	if m.err != nil {
		return false
	}
	if m.refs > 0 {
		m.steps++
		if m.steps > m.maxSteps {
			m.err = errTooManySteps
			return false
		}
	}
	m.visits++
	if m.visits%ctxCheckSteps == 1 {
		if err := m.ctx.Err(); err != nil {
			m.err = err
			return false
		}
	}
	return true
}

// object evaluates e on an object whose id is id ("" for subdocuments) and
// whose fields are fields.
func (m *matcher) object(e Expr, id string, fields map[string]any) bool {
	if !m.step() {
		return false
	}
	switch x := e.(type) {
	case *And:
		for _, s := range x.Exprs {
			if !m.object(s, id, fields) {
				return false
			}
		}
		return true
	case *Or:
		for _, s := range x.Exprs {
			if m.object(s, id, fields) {
				return true
			}
		}
		return false
	case *Not:
		return !m.object(x.Expr, id, fields)
	case *IDs:
		for _, want := range x.IDs {
			if id != "" && id == want {
				return true
			}
		}
		return false
	case *Compare:
		v, ok := fields[x.Field.Name]
		return ok && compare(x, v)
	case *Ref:
		return m.ref(x.Expr, fields[x.Field.Name])
	case *Sub:
		sub, ok := fields[x.Field.Name].(map[string]any)
		return ok && m.object(x.Expr, "", sub)
	case *Quant:
		items, _ := fields[x.Field.Name].([]any)
		for _, it := range items {
			if m.element(x, it) != x.All {
				return !x.All
			}
			if m.err != nil {
				return false
			}
		}
		return x.All
	}
	return false
}

// element evaluates q's element filter on one list element.
func (m *matcher) element(q *Quant, v any) bool {
	if !m.step() {
		return false
	}
	switch q.Field.Type.Kind {
	case sluice.TypeReference:
		return m.ref(q.Elem, v)
	case sluice.TypeSubdocument:
		sub, ok := v.(map[string]any)
		return ok && m.object(q.Elem, "", sub)
	}
	return m.scalar(q.Elem, v)
}

// ref evaluates e on the document that the reference v names: false when
// v is not a reference or there is no such document. The result is
// remembered for e and the document's id: e is a node of the filter and
// the document is the one lookup returned for the id, so the result is
// the same wherever the evaluation meets the pair again. (The document
// being matched is never looked up under its own id by Match: a change's
// document may differ from the stored one lookup returns.)
func (m *matcher) ref(e Expr, v any) bool {
	id, ok := refID(v)
	if !ok || m.lookup == nil {
		return false
	}
	k := memoKey{e, id}
	if r, ok := m.memo[k]; ok {
		return r
	}
	d := m.doc(id)
	m.refs++
	r := d != nil && m.object(e, d.ID, d.Fields)
	m.refs--
	if m.err == nil && !m.noMemo {
		if m.memo == nil {
			m.memo = make(map[memoKey]bool)
		}
		m.memo[k] = r
	}
	return r
}

// doc returns lookup's document for id, calling lookup once per id.
func (m *matcher) doc(id string) *sluice.Document {
	if d, ok := m.docs[id]; ok {
		return d
	}
	d := m.lookup(id)
	if !m.noMemo {
		if m.docs == nil {
			m.docs = make(map[string]*sluice.Document)
		}
		m.docs[id] = d
	}
	return d
}

// scalar evaluates e, made of And, Or, Not and Compare with a nil Field, on
// the scalar value v.
func (m *matcher) scalar(e Expr, v any) bool {
	if !m.step() {
		return false
	}
	switch x := e.(type) {
	case *And:
		for _, s := range x.Exprs {
			if !m.scalar(s, v) {
				return false
			}
		}
		return true
	case *Or:
		for _, s := range x.Exprs {
			if m.scalar(s, v) {
				return true
			}
		}
		return false
	case *Not:
		return !m.scalar(x.Expr, v)
	case *Compare:
		return compare(x, v)
	}
	return false
}

func refID(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case map[string]any:
		s, ok := x["@id"].(string)
		return s, ok
	}
	return "", false
}

// compare evaluates one comparison on a present value.
func compare(c *Compare, v any) bool {
	switch c.Op {
	case OpRegex:
		s, ok := v.(string)
		return ok && c.Value.Regex.Go.MatchString(s)
	case OpStartsWith:
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, c.Value.Str)
	}
	var cmp int
	if c.Type.Kind != sluice.TypeScalar {
		s, ok := v.(string)
		if !ok {
			return false
		}
		cmp = strings.Compare(s, c.Value.Str)
	} else {
		switch c.Type.Name {
		case sluice.ScalarString, sluice.ScalarID:
			s, ok := v.(string)
			if !ok {
				return false
			}
			cmp = strings.Compare(s, c.Value.Str)
		case sluice.ScalarBoolean:
			b, ok := v.(bool)
			if !ok {
				return false
			}
			if b == c.Value.Bool {
				cmp = 0
			} else {
				cmp = 1
			}
		case sluice.ScalarDateTime:
			s, ok := v.(string)
			if !ok {
				return false
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return false
			}
			cmp = t.Compare(c.Value.Time)
		case sluice.ScalarFloat:
			r, ok := number(v)
			if !ok {
				return false
			}
			f, _ := r.Float64()
			cmp = cmpFloat(f, c.Value.Float)
		case sluice.ScalarInt, sluice.ScalarBigInt:
			r, ok := number(v)
			if !ok {
				return false
			}
			cmp = r.Cmp(c.Value.Num)
		default:
			return false
		}
	}
	switch c.Op {
	case OpEq:
		return cmp == 0
	case OpNe:
		return cmp != 0
	case OpLt:
		return cmp < 0
	case OpLe:
		return cmp <= 0
	case OpGt:
		return cmp > 0
	case OpGe:
		return cmp >= 0
	}
	return false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// MatchUnknown is MatchContext on a document whose root fields named in
// unknown hold values that doc leaves out, though they are not null (a
// value Sluice cannot read: a Float NaN, a DateTime outside years 1 to
// 9999, in a row written in SQL; see sluice.Change.BeforeUnknown). A read
// compares such a value as Postgres stores it; here it is unknown, so the
// filter is evaluated in three values: a test of an unknown field is
// neither true nor false, And is false when one of its parts is, Or true
// when one of its parts is, Not unknown when its part is. known is false
// when whether doc matches depends on the unknown values (ok is then
// false, and must be taken for neither). With no unknown fields it is
// MatchContext.
func MatchUnknown(ctx context.Context, e Expr, doc *sluice.Document, lookup Lookup, unknown []string) (ok, known bool, err error) {
	if len(unknown) == 0 {
		ok, err = MatchContext(ctx, e, doc, lookup)
		return ok, true, err
	}
	var eval func(e Expr) (ok, known bool, err error)
	eval = func(e Expr) (bool, bool, error) {
		var field *sluice.Field
		switch e := e.(type) {
		case *And, *Or:
			exprs, and := andOr(e)
			known := true
			for _, s := range exprs {
				ok, k, err := eval(s)
				if err != nil {
					return false, false, err
				}
				if k && ok != and {
					return ok, true, nil // false decides an And, true an Or
				}
				known = known && k
			}
			return and && known, known, nil
		case *Not:
			ok, k, err := eval(e.Expr)
			return k && !ok, k, err
		case *Compare:
			field = e.Field
		case *Ref:
			field = e.Field
		case *Sub:
			field = e.Field
		case *Quant:
			field = e.Field
		}
		if field != nil && slices.Contains(unknown, field.Name) {
			return false, false, nil
		}
		// Each part on its own: only in this rare case do parts of one
		// filter not share a matcher (its memo and its steps).
		ok, err := MatchContext(ctx, e, doc, lookup)
		return ok, true, err
	}
	return eval(e)
}

// andOr returns the parts of e, an *And or an *Or, and whether it is an
// And.
func andOr(e Expr) ([]Expr, bool) {
	if a, ok := e.(*And); ok {
		return a.Exprs, true
	}
	return e.(*Or).Exprs, false
}

// TestedAmong returns the fields of names (root fields of the document a
// filter is evaluated on) that e tests there, in names' order: those an
// error may name, when e was written by the reader (it names no field the
// reader cannot see).
func TestedAmong(e Expr, names []string) []string {
	tested := map[string]bool{}
	var walk func(e Expr)
	walk = func(e Expr) {
		switch e := e.(type) {
		case *And:
			for _, s := range e.Exprs {
				walk(s)
			}
		case *Or:
			for _, s := range e.Exprs {
				walk(s)
			}
		case *Not:
			walk(e.Expr)
		case *Compare:
			if e.Field != nil {
				tested[e.Field.Name] = true
			}
		case *Ref:
			tested[e.Field.Name] = true
		case *Sub:
			tested[e.Field.Name] = true
		case *Quant:
			tested[e.Field.Name] = true
		}
	}
	walk(e)
	var out []string
	for _, n := range names {
		if tested[n] {
			out = append(out, n)
		}
	}
	return out
}

// UnknownError is the error of a change whose filter depends on fields its
// image left out as values Sluice cannot read (fields: those of them the
// filter tests, TestedAmong): they are not null, and not in the image, so
// whether the change is in the stream is unknown. A stream ends with it
// rather than guess: false would drop an event a read would select (it
// compares the value the row holds), true deliver one it would not. It
// names no value, and no field the filter does not name.
func UnknownError(fields []string) error {
	return sluice.Errorf(sluice.CodeUnprocessable, "the filter tests %s, whose value in this change's document Sluice cannot read (written in SQL past its checks: a Float NaN or infinity, a DateTime outside years 1 to 9999, a list holding null), and a read compares the value the row holds: whether the change matches is unknown; filter on other fields, or resume after the change", strings.Join(fields, ", "))
}

package filter

import (
	"strings"
	"time"

	"github.com/sluice-dev/sluice"
)

// Lookup returns the document with the given id, or nil when there is none.
// Match calls it for filters through references; the caller batches the
// reads (a subscription fetches the referenced documents of an event once).
type Lookup func(id string) *sluice.Document

// Match reports whether doc matches e, with the semantics of the SQL
// compilation (see the package documentation). Field values are in the
// normalized form of sluice.Document, or as json.Decoder.UseNumber leaves
// them (json.Number) for values read from change JSON. lookup may be nil
// when e has no filter through a reference (such a filter is then false).
func Match(e Expr, doc *sluice.Document, lookup Lookup) bool {
	if doc == nil {
		return false
	}
	m := &matcher{lookup: lookup}
	return m.object(e, doc.ID, doc.Fields)
}

type matcher struct {
	lookup Lookup
}

// object evaluates e on an object whose id is id ("" for subdocuments) and
// whose fields are fields.
func (m *matcher) object(e Expr, id string, fields map[string]any) bool {
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
		ref, ok := refID(fields[x.Field.Name])
		if !ok || m.lookup == nil {
			return false
		}
		d := m.lookup(ref)
		return d != nil && m.object(x.Expr, d.ID, d.Fields)
	case *Sub:
		sub, ok := fields[x.Field.Name].(map[string]any)
		return ok && m.object(x.Expr, "", sub)
	case *Quant:
		items, _ := fields[x.Field.Name].([]any)
		for _, it := range items {
			if m.element(x, it) != x.All {
				return !x.All
			}
		}
		return x.All
	}
	return false
}

// element evaluates q's element filter on one list element.
func (m *matcher) element(q *Quant, v any) bool {
	switch q.Field.Type.Kind {
	case sluice.TypeReference:
		ref, ok := refID(v)
		if !ok || m.lookup == nil {
			return false
		}
		d := m.lookup(ref)
		return d != nil && m.object(q.Elem, d.ID, d.Fields)
	case sluice.TypeSubdocument:
		sub, ok := v.(map[string]any)
		return ok && m.object(q.Elem, "", sub)
	}
	return m.scalar(q.Elem, v)
}

// scalar evaluates e, made of And, Or, Not and Compare with a nil Field, on
// the scalar value v.
func (m *matcher) scalar(e Expr, v any) bool {
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

package graph

import (
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// Boundary is what a live query's result says of the changes that cannot
// change it: the result lists the first documents, in the query's order,
// up to its limit; when it holds that many (it is full), a document that
// sorts after its last row, before and after a change, is in it neither
// before nor after that change, and no document of the result changes.
// Such a change leaves the result as it was: Affects need not read it
// again. A nil Boundary says nothing (the result is not full, the query
// has no limit, several root fields, an order Go cannot compare as
// Postgres sorts, a last row whose sort keys are longer than
// maxBoundaryBytes, or a last row holding an order field's value Sluice
// cannot read).
//
// A live query keeps its result's boundary for as long as the result
// stands, so a Boundary keeps only the last row's sort keys, copied,
// never the row: the row holds every field the result selects and the
// order fields read for the boundary, however long, where the live query
// budget charges the result's JSON and Bytes.
type Boundary struct {
	order []engine.OrderKey
	class *sluice.Class
	// keys are the last row's values of the order's fields before the
	// id, in the order's order (nil: the row has no value); id is its
	// id.
	keys []any
	id   string
	// bytes is what keys and id hold (Bytes).
	bytes int64
}

// maxBoundaryBytes bounds what a Boundary holds (Bytes): a result whose
// last row has longer sort keys (a long text) has no boundary, and is
// read again at every change of a document its filter takes, as a result
// that is not full is. So what a live query keeps between its results
// besides their JSON is bounded by this, never by what the documents
// hold.
const maxBoundaryBytes = 4 << 10

// Bytes returns about what b holds in memory (0 for nil): its keys' and
// id's bytes and a few words each. It is at most maxBoundaryBytes; the
// live query budget charges it with the result's JSON.
func (b *Boundary) Bytes() int64 {
	if b == nil {
		return 0
	}
	return b.bytes
}

// boundaryOf returns the boundary of a result of query q that listed
// docs (see Boundary), nil when there is none.
func boundaryOf(s *sluice.Schema, q engine.DocQuery, docs []engine.QueryDoc) *Boundary {
	if q.Limit < 0 || int64(len(docs)) != q.Limit || len(docs) == 0 {
		return nil
	}
	c := s.Class(q.Class)
	if c == nil {
		return nil
	}
	last := docs[len(docs)-1].Doc
	unreadable := docs[len(docs)-1].Unreadable
	// 64 bytes for the Boundary, 16 for each key's interface; sizes are
	// checked before anything is copied.
	b := &Boundary{order: q.Order, class: c, bytes: 64 + int64(len(last.ID))}
	if b.bytes > maxBoundaryBytes {
		return nil
	}
	for _, k := range q.Order {
		if k.Field == "_id" {
			break
		}
		if f := c.Field(k.Field); f == nil || !comparable(f) {
			return nil
		}
		if slices.Contains(unreadable, k.Field) {
			// A value its type cannot hold (a Float NaN or infinity, a
			// DateTime infinity, written in SQL), left out of the row:
			// not null, which Postgres sorts elsewhere (descending,
			// nulls come before NaN), and of no known place among the
			// values Go compares. No boundary: every change the filter
			// takes reads the result again.
			return nil
		}
		v := last.Fields[k.Field]
		n, ok := keyBytes(v)
		if !ok {
			return nil // a value of no form a key has: no boundary
		}
		if b.bytes += 16 + n; b.bytes > maxBoundaryBytes {
			return nil
		}
		b.keys = append(b.keys, copyKey(v))
	}
	b.id = strings.Clone(last.ID)
	return b
}

// keyBytes returns about the bytes v, a value of a comparable field,
// holds besides its interface; ok is false for a value of another form.
func keyBytes(v any) (n int64, ok bool) {
	switch x := v.(type) {
	case nil:
		return 0, true
	case string:
		return int64(len(x)), true
	case json.Number:
		return int64(len(x)), true
	case int64, int, float64, bool:
		return 8, true
	}
	return 0, false
}

// copyKey returns v (of a form keyBytes takes) sharing no memory with
// the document it was read in: a string may be a slice of a larger
// buffer, which a kept key would keep whole.
func copyKey(v any) any {
	switch x := v.(type) {
	case string:
		return strings.Clone(x)
	case json.Number:
		return json.Number(strings.Clone(string(x)))
	}
	return v
}

// orderFields returns the fields of class c that order keys sort by (the
// id aside): a live query reads them, so that its result's last row
// gives its boundary.
func orderFields(order []engine.OrderKey) []string {
	var out []string
	for _, k := range order {
		if k.Field == "_id" {
			break
		}
		out = append(out, k.Field)
	}
	return out
}

// comparable reports whether Go compares values of f as Postgres sorts
// the column that holds them: text in the "C" collation (byte order),
// integers, floats, booleans and instants. BigInt (numeric) and JSON
// values are left out.
func comparable(f *sluice.Field) bool {
	if f.List {
		return false
	}
	switch f.Type.Kind {
	case sluice.TypeEnum, sluice.TypeReference:
		return true
	case sluice.TypeScalar:
		switch f.Type.Name {
		case sluice.ScalarString, sluice.ScalarID, sluice.ScalarInt, sluice.ScalarFloat, sluice.ScalarBoolean, sluice.ScalarDateTime:
			return true
		}
	}
	return false
}

// after reports whether doc sorts after the boundary's last row in the
// query's order; false when that cannot be told (a value of an unexpected
// form), so that the change is taken to affect the result.
func (b *Boundary) after(doc *sluice.Document) bool {
	idDesc := false
	for i, k := range b.order {
		if k.Field == "_id" {
			idDesc = k.Desc
			break
		}
		f := b.class.Field(k.Field)
		c, ok := compareValues(f, doc.Fields[k.Field], b.keys[i], k.Desc)
		if !ok {
			return false
		}
		if c != 0 {
			return c > 0
		}
	}
	c := strings.Compare(doc.ID, b.id) // ids sort in "C"
	if idDesc {
		c = -c
	}
	return c > 0
}

// compareValues compares a and b, values of field f, as an ORDER BY of
// its column in that direction does (Postgres puts nulls last ascending,
// first descending): -1 when a sorts first, 1 when b does, 0 when they
// are equal. ok is false when a value is not of the field's form.
func compareValues(f *sluice.Field, a, b any, desc bool) (int, bool) {
	if a == nil || b == nil {
		c := 0
		switch {
		case a == nil && b != nil:
			c = 1
		case a != nil && b == nil:
			c = -1
		}
		if desc {
			c = -c
		}
		return c, true
	}
	c, ok := compareScalars(f, a, b)
	if desc {
		c = -c
	}
	return c, ok
}

func compareScalars(f *sluice.Field, a, b any) (int, bool) {
	if f.Type.Kind != sluice.TypeScalar {
		return compareStrings(a, b)
	}
	switch f.Type.Name {
	case sluice.ScalarString, sluice.ScalarID:
		return compareStrings(a, b)
	case sluice.ScalarBoolean:
		x, ok1 := a.(bool)
		y, ok2 := b.(bool)
		if !ok1 || !ok2 {
			return 0, false
		}
		switch {
		case x == y:
			return 0, true
		case !x:
			return -1, true
		}
		return 1, true
	case sluice.ScalarDateTime:
		x, ok1 := instant(a)
		y, ok2 := instant(b)
		if !ok1 || !ok2 {
			return 0, false
		}
		return x.Compare(y), true
	case sluice.ScalarFloat:
		x, ok1 := float(a)
		y, ok2 := float(b)
		if !ok1 || !ok2 {
			return 0, false
		}
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	case sluice.ScalarInt:
		x, ok1 := rational(a)
		y, ok2 := rational(b)
		if !ok1 || !ok2 {
			return 0, false
		}
		return x.Cmp(y), true
	}
	return 0, false
}

func compareStrings(a, b any) (int, bool) {
	x, ok1 := a.(string)
	y, ok2 := b.(string)
	if !ok1 || !ok2 {
		return 0, false
	}
	return strings.Compare(x, y), true
}

func instant(v any) (time.Time, bool) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

func float(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

func rational(v any) (*big.Rat, bool) {
	switch x := v.(type) {
	case int64:
		return new(big.Rat).SetInt64(x), true
	case int:
		return new(big.Rat).SetInt64(int64(x)), true
	case float64:
		r := new(big.Rat)
		if r.SetFloat64(x) == nil {
			return nil, false
		}
		return r, true
	case json.Number:
		return new(big.Rat).SetString(string(x))
	}
	return nil, false
}

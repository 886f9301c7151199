package graph

import (
	"errors"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/filter"
)

// Aggregates. Every class query field has a sibling <Class>_aggregate
// (on Query, and on Subscription as a live query) whose <Class>_Aggregate
// holds the count of the documents its filter selects and, per field,
// their min and max (numbers, text, ids and times) and sum and avg
// (numbers), computed by Postgres in one statement.

// The names of aggregate fields and types.
const (
	suffixAggregate     = "_aggregate"
	suffixAggregateType = "_Aggregate"
	suffixMinMax        = "_AggregateMinMax"
	suffixSum           = "_AggregateSum"
	suffixAvg           = "_AggregateAvg"
	aggCount            = "count"
)

// aggregateClass returns the class of the aggregate field name
// (<Class>_aggregate), when s has that class and it has a query field.
func aggregateClass(s *sluice.Schema, name string) (*sluice.Class, bool) {
	class, ok := strings.CutSuffix(name, suffixAggregate)
	if !ok {
		return nil, false
	}
	c := s.Class(class)
	if c == nil || c.Kind == sluice.KindSubdocument {
		return nil, false
	}
	return c, true
}

// aggregatable reports which aggregates apply to field f: min and max to
// single numbers, text, ids and times; sum and avg to single numbers.
func aggregatable(f *sluice.Field) (minMax, numeric bool) {
	if f.List || f.Type.Kind != sluice.TypeScalar {
		return false, false
	}
	switch f.Type.Name {
	case sluice.ScalarInt, sluice.ScalarFloat, sluice.ScalarBigInt:
		return true, true
	case sluice.ScalarString, sluice.ScalarID, sluice.ScalarDateTime:
		return true, false
	}
	return false, false
}

// aggResultScalar returns the scalar aggregate op of f gives: min and max
// keep f's, sum is exact (BigInt for Int and BigInt, Float for Float),
// avg a Float.
func aggResultScalar(f *sluice.Field, op string) string {
	switch op {
	case "sum":
		if f.Type.Name == sluice.ScalarFloat {
			return sluice.ScalarFloat
		}
		return sluice.ScalarBigInt
	case "avg":
		return sluice.ScalarFloat
	}
	return f.Type.Name
}

// aggregateTypes writes the aggregate types of class c: the fields the
// reader may see only, so that a hidden field cannot be aggregated.
func (g *sdlGen) aggregateTypes(c *sluice.Class) {
	var minMax, numeric []*sluice.Field
	for _, f := range g.visible(c) {
		mm, num := aggregatable(f)
		if mm {
			minMax = append(minMax, f)
		}
		if num {
			numeric = append(numeric, f)
		}
	}
	g.p("\"A count of %s documents, and aggregates of their fields.\"\ntype %s%s {\n", c.Name, c.Name, suffixAggregateType)
	g.p("  \"How many documents there are.\"\n  %s: Int!\n", aggCount)
	if len(minMax) > 0 {
		g.p("  \"The least value of each field (text in byte order); null when no document has one.\"\n  min: %s%s!\n", c.Name, suffixMinMax)
		g.p("  \"The greatest value of each field (text in byte order); null when no document has one.\"\n  max: %s%s!\n", c.Name, suffixMinMax)
	}
	if len(numeric) > 0 {
		g.p("  \"The sum of each number field: exact for Int and BigInt (a BigInt), the Float nearest the exact sum for Float; null when no document has a value.\"\n  sum: %s%s!\n", c.Name, suffixSum)
		g.p("  \"The mean of each number field, as a Float; null when no document has a value.\"\n  avg: %s%s!\n", c.Name, suffixAvg)
	}
	g.p("}\n\n")
	write := func(suffix, op, what string, fields []*sluice.Field) {
		if len(fields) == 0 {
			return
		}
		g.p("\"%s\"\ntype %s%s {\n", what, c.Name, suffix)
		for _, f := range fields {
			g.p("  %s: %s\n", f.Name, aggResultScalar(f, op))
		}
		g.p("}\n\n")
	}
	write(suffixMinMax, "min", "The least or greatest value of each field of "+c.Name+" documents.", minMax)
	write(suffixSum, "sum", "The sum of each number field of "+c.Name+" documents.", numeric)
	write(suffixAvg, "avg", "The mean of each number field of "+c.Name+" documents.", numeric)
}

// aggregateArgs returns the arguments of the aggregate field of class c.
func aggregateArgs(c *sluice.Class) string {
	return "(filter: " + c.Name + suffixFilter + ", include_children: Boolean = true)"
}

// aggregateField writes the aggregate field of class c (on Query or
// Subscription).
func (g *sdlGen) aggregateField(c *sluice.Class, live bool) {
	d := "Counts the " + c.Name + " documents filter selects (and their subclasses' unless include_children is false), and aggregates their fields, in one statement."
	if live {
		d = "The live query of Query." + c.Name + suffixAggregate + ": its current value, then the new value after each commit that changes it."
	}
	g.description("  ", d)
	args := aggregateArgs(c)
	if !live {
		args = withAsOf(args)
	}
	g.p("  %s%s%s: %s%s!\n", c.Name, suffixAggregate, args, c.Name, suffixAggregateType)
}

// ParseAggregateArgs converts the arguments of the aggregate field of
// class (filter, include_children) to a storage query without
// aggregates. An invalid filter is a CodeInvalid error.
func ParseAggregateArgs(s *sluice.Schema, class string, field *ast.Field, vars map[string]any) (engine.AggregateQuery, error) {
	args := field.ArgumentMap(vars)
	q := engine.AggregateQuery{Class: class}
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
	return q, nil
}

// aggregateQuery writes the result of an aggregate field; on error it
// writes null, records the error and returns false.
func (x *execution) aggregateQuery(w *jsonWriter, cf graphql.CollectedField, c *sluice.Class) bool {
	q, err := ParseAggregateArgs(x.es.schema, c.Name, cf.Field, x.op.Variables)
	if err == nil {
		err = x.runAggregate(w, cf, c, q)
	}
	if err != nil {
		if errors.Is(err, engine.ErrAggregateRange) {
			// A value the documents give (a Float sum past the largest
			// float), which a commit may bring back in range: an error
			// of the result, as a required field without a value is, so
			// that a live aggregate goes on.
			x.failValue(fieldPath(cf), err)
		} else {
			x.fail(fieldPath(cf), err)
		}
		w.null()
		return false
	}
	return true
}

// runAggregate reads the aggregates cf selects and writes its object.
func (x *execution) runAggregate(w *jsonWriter, cf graphql.CollectedField, c *sluice.Class, q engine.AggregateQuery) error {
	typ := c.Name + suffixAggregateType
	subtype := map[string]string{"min": c.Name + suffixMinMax, "max": c.Name + suffixMinMax, "sum": c.Name + suffixSum, "avg": c.Name + suffixAvg}
	// The aggregates the selection asks for, each once.
	index := map[engine.Agg]int{}
	top := x.fields(cf.Selections, typ)
	for _, sub := range top {
		st, ok := subtype[sub.Name]
		if !ok {
			continue
		}
		for _, ff := range x.fields(sub.Selections, st) {
			f := c.Field(ff.Name)
			if f == nil {
				continue // __typename, or a field the schema does not have
			}
			if f.ReadRole > x.es.role {
				return sluice.Errorf(sluice.CodeForbidden, "%s.%s cannot be aggregated by this role", c.Name, f.Name)
			}
			a := engine.Agg{Op: sub.Name, Field: f.Name}
			if _, dup := index[a]; !dup {
				index[a] = len(q.Aggs)
				q.Aggs = append(q.Aggs, a)
			}
		}
	}
	if x.past != nil {
		if err := x.checkPastAggregate(q); err != nil {
			return err
		}
	}
	res, err := x.es.store.Aggregate(x.ctx, x.req.DB, x.es.schema, q)
	if errors.Is(err, engine.ErrReadBytes) {
		// Its text values (a String's min and max are whole stored
		// strings) did not fit in what the reads had left: Postgres
		// sent none of them.
		return x.readLimitError(fmt.Sprintf("the values of %s (with the documents the request read before it) are larger than %d bytes, %d times what its response may hold; aggregate fewer String, ID or BigInt fields at a time", cf.Name, readFactor*x.walkBound(), readFactor))
	}
	if err != nil {
		return err
	}
	w.WriteByte('{')
	for i, sub := range top {
		w.key(sub.Alias, i == 0)
		switch sub.Name {
		case "__typename":
			w.str(typ)
		case aggCount:
			w.int(res.Count)
		default:
			st := subtype[sub.Name]
			w.WriteByte('{')
			for j, ff := range x.fields(sub.Selections, st) {
				w.key(ff.Alias, j == 0)
				f := c.Field(ff.Name)
				if ff.Name == "__typename" {
					w.str(st)
					continue
				}
				if f == nil {
					w.null()
					continue
				}
				v := res.Values[index[engine.Agg{Op: sub.Name, Field: f.Name}]]
				if v == nil {
					w.null()
					continue
				}
				if !writeScalar(w, aggResultScalar(f, sub.Name), v) {
					w.null() // the aggregates are nullable
				}
			}
			w.WriteByte('}')
		}
	}
	w.WriteByte('}')
	return nil
}

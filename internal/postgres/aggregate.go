package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
)

// AggregateQuery asks for the count of the documents a filter selects and
// aggregates of their fields: a GraphQL <Class>_aggregate field.
type AggregateQuery struct {
	// Class is the queried class; Filter and Aggs address its fields.
	Class string
	// Classes are the document classes whose tables are read.
	Classes []string
	// Filter, when not nil, keeps only matching documents.
	Filter filter.Expr
	// Aggs are the aggregates computed besides the count.
	Aggs []Agg
}

// Agg is one aggregate of a field: Op is "min", "max", "sum" or "avg".
// min and max apply to Int, Float, BigInt, String, ID and DateTime
// fields; sum and avg to Int, Float and BigInt ones.
type Agg struct {
	Op    string
	Field string
}

// AggregateResult is the answer of an AggregateQuery: the count, and the
// value of each of its Aggs in order, nil when no document has one. A
// value is int64 (min and max of Int), float64 (Float, and every avg),
// or a string: a BigInt's decimal digits (min and max of BigInt, sum of
// Int and BigInt), text, or a DateTime in RFC 3339.
type AggregateResult struct {
	Count  int64
	Values []any
}

// ErrAggregateRange is (errors.Is) the error of an aggregate whose value
// the documents put out of its type's range: a value of the data, which
// a commit may bring back, not a read that failed.
var ErrAggregateRange = errors.New("an aggregate out of its type's range")

// rangeError is a CodeInvalid error, shown as such, that is also
// ErrAggregateRange.
type rangeError struct{ err *sluice.Error }

func (e rangeError) Error() string   { return e.err.Error() }
func (e rangeError) Unwrap() []error { return []error{e.err, ErrAggregateRange} }

func outOfRange(format string, args ...any) error {
	return rangeError{sluice.Errorf(sluice.CodeInvalid, format, args...)}
}

// Aggregate computes q over database d in one statement. Errors as
// QueryDocuments; an aggregate out of its type's range (a Float sum
// past the largest float) is a CodeInvalid error that is
// ErrAggregateRange. Under LimitReads, its
// row is charged as a document's is, and its values read as text (min
// and max of String, ID and BigInt, sum and avg), whose size is the
// data's, are sent only when together they fit in what the budget has
// left: past it, ErrReadBytes, and Postgres sent none of them.
func (db *DB) Aggregate(ctx context.Context, d *sluice.Database, s *sluice.Schema, q AggregateQuery) (AggregateResult, error) {
	res := AggregateResult{Values: make([]any, len(q.Aggs))}
	budget := readBudgetOf(ctx)
	st, cols, err := compileAggregate(d, s, q, db.asOf(ctx, d.ID), budget.remaining())
	if err != nil || st == nil {
		return res, db.readNothing(ctx, d, err)
	}
	dest := make([]any, 0, len(cols)+2)
	dest = append(dest, &res.Count)
	for i := range cols {
		dest = append(dest, cols[i].dest())
	}
	fits := true
	if st.bounded {
		dest = append(dest, &fits)
	}
	countStatement(ctx)
	err = db.readAggregate(ctx, d, st, budget, dest)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "22003" { // numeric_value_out_of_range
		// Postgres does not say which: name the ones that can overflow.
		// Every sum is numeric, which holds 131,072 digits before the
		// point; only a BigInt's can get there (an Int's or a Float's
		// is at most a few hundred digits per row). A Float sum past
		// the largest float is found below, when it is rounded.
		var sums []string
		c := s.Class(q.Class)
		for _, a := range q.Aggs {
			if f := c.Field(a.Field); (a.Op == "sum" || a.Op == "avg") && f != nil && f.Type.Name == sluice.ScalarBigInt { // c: compileAggregate found it
				sums = append(sums, a.Op+"."+a.Field+": a number past 131,072 digits")
			}
		}
		return res, db.schemaMoved(ctx, d, outOfRange("an aggregate of %s is out of the range of its type (%s)", q.Class, strings.Join(sums, "; ")))
	}
	if errors.Is(err, ErrReadBytes) {
		return res, err
	}
	if err != nil {
		return res, db.schemaMoved(ctx, d, queryError(err))
	}
	if !fits {
		return res, ErrReadBytes
	}
	for i := range cols {
		v, ok, err := cols[i].value()
		if errors.Is(err, errFloatRange) {
			return res, outOfRange("an aggregate of %s is out of the range of its type (%s.%s: a Float past ±1.8e308)", q.Class, q.Aggs[i].Op, q.Aggs[i].Field)
		}
		if err != nil {
			// Of a value no field can hold (see rowToDocument): null,
			// as a document leaves such a value out.
			db.logger.Warn("an aggregate's value is one its field's type cannot hold; it answers null",
				"database", d.Path(), "class", q.Class, "aggregate", q.Aggs[i].Op, "field", q.Aggs[i].Field, "err", err)
			continue
		}
		if ok {
			res.Values[i] = v
		}
	}
	return res, nil
}

// readAggregate sends st, reads its one row into dest and charges it to
// budget. Postgres' errors are returned as they are (Aggregate maps
// them).
func (db *DB) readAggregate(ctx context.Context, d *sluice.Database, st *statement, budget readBudget, dest []any) error {
	rows, err := db.classReader(ctx, d).Query(ctx, st.sql, st.args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows // an aggregate without GROUP BY has a row
	}
	if err := budget.charge(rows); err != nil {
		return err
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// ExplainAggregate returns Postgres' plan of the statement Aggregate
// sends for q (as ExplainQuery does for a query).
func (db *DB) ExplainAggregate(ctx context.Context, d *sluice.Database, s *sluice.Schema, q AggregateQuery, analyze bool) (string, error) {
	st, _, err := compileAggregate(d, s, q, db.asOf(ctx, d.ID), readBudgetOf(ctx).remaining())
	if err != nil || st == nil {
		return "", err
	}
	return db.explain(ctx, st, analyze)
}

// compileAggregate returns the statement of q, nil when it reads no
// table, and the holders of its aggregates' columns. One table is
// aggregated directly, so that a count over an indexed filter is an
// index scan; several are aggregated over the union of their rows,
// reading only the columns aggregated. With past set, it aggregates the
// documents as of past.Pos (see past.go). With bound >= 0, its text
// values are sent only when they fit in bound bytes (boundText).
func compileAggregate(d *sluice.Database, s *sluice.Schema, q AggregateQuery, past *AsOf, bound int64) (*statement, []column, error) {
	if len(q.Classes) == 0 {
		return nil, nil, nil
	}
	c := s.Class(q.Class)
	if c == nil {
		return nil, nil, sluice.Errorf(sluice.CodeInvalid, "unknown class %q", q.Class)
	}
	b := &sqlBuilder{db: d, schema: s, past: past}
	whereSQL := ""
	if q.Filter != nil {
		cond, err := b.compileFilter(q.Filter, scope{alias: "t"})
		if err != nil {
			return nil, nil, err
		}
		if cond != "true" {
			whereSQL = " WHERE " + cond
		}
	}
	exprs := []string{"count(*)"}
	cols := make([]column, len(q.Aggs))
	var read []string // the columns a union reads
	seen := map[string]bool{}
	for i, a := range q.Aggs {
		f := c.Field(a.Field)
		expr, result, err := aggExpr(f, a.Op)
		if err != nil {
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "%s: %s(%s): %s", q.Class, a.Op, a.Field, err.Error())
		}
		exprs = append(exprs, expr)
		cols[i].field = result
		cols[i].ratio = a.Op == "avg"
		cols[i].exact = a.Op == "sum" && f.Type.Name == sluice.ScalarFloat
		if !seen[f.Name] {
			seen[f.Name] = true
			read = append(read, "t."+ident(f.Name))
		}
	}
	from := ""
	if len(q.Classes) == 1 {
		from = b.source(q.Classes[0]) + " t" + whereSQL
	} else {
		list := "1"
		if len(read) > 0 {
			list = strings.Join(read, ", ")
		}
		parts := make([]string, len(q.Classes))
		for i, name := range q.Classes {
			if s.Class(name) == nil {
				return nil, nil, sluice.Errorf(sluice.CodeInvalid, "unknown class %q", name)
			}
			parts[i] = fmt.Sprintf("SELECT %s FROM %s t%s", list, b.source(name), whereSQL)
		}
		from = "(" + strings.Join(parts, " UNION ALL ") + ") t"
	}
	sql, bounded := "SELECT "+strings.Join(exprs, ", ")+" FROM "+from, false
	if bound >= 0 {
		sql, bounded = boundText(b, exprs, from, cols, bound)
	}
	return &statement{sql: b.pastStatement(sql), args: b.args, classes: q.Classes, bounded: bounded}, cols, nil
}

// boundText returns the aggregate statement of exprs (the count, then
// the columns of cols) over from, such that Postgres sends its text
// values only when their bytes together are at most bound, and true; or
// the plain statement and false when it has no text value. The bounded
// statement has one more column, a boolean: whether they fit; when they
// do not, they are all null. A text value's size is the data's (the min
// of a String field is a whole stored string, up to 1 GB), so that one
// row of them, read whole, held what no bound on the request's reads
// allowed. The values themselves are computed as before, in a subquery,
// so which one is the min or the max does not change; their total is
// computed once, in a second subquery that OFFSET 0 keeps from being
// merged into the outer select (which would repeat it in each CASE).
func boundText(b *sqlBuilder, exprs []string, from string, cols []column, bound int64) (string, bool) {
	named := make([]string, len(exprs))
	for i, e := range exprs {
		named[i] = fmt.Sprintf("%s AS _a%d", e, i)
	}
	total := []string{"0::int8"}
	out := []string{"_a0"} // the count
	for i := range cols {
		name := fmt.Sprintf("_a%d", i+1)
		if _, text := cols[i].dest().(**string); !text {
			out = append(out, name) // a number or a time: 8 bytes at most
			continue
		}
		total = append(total, "coalesce(octet_length("+name+"), 0)")
		out = append(out, "CASE WHEN _fits THEN "+name+" END")
	}
	plain := "SELECT " + strings.Join(exprs, ", ") + " FROM " + from
	if len(total) == 1 {
		return plain, false
	}
	out = append(out, "_fits")
	return "SELECT " + strings.Join(out, ", ") + " FROM (SELECT *, " + strings.Join(total, " + ") + " <= " + b.arg(bound) +
		" AS _fits FROM (SELECT " + strings.Join(named, ", ") + " FROM " + from + ") _a OFFSET 0) _b", true
}

// aggExpr returns the SQL of aggregate op of field f (of alias t), and a
// field of the type its result is read as (column's holders): min and max
// keep the field's type, sum is exact (a BigInt of an integer field, a
// Float of a Float field, computed exactly in numeric and then rounded),
// avg a Float, computed exactly (in numeric) and then rounded. Text is
// compared in byte order ("C"), as filters and orders compare it.
func aggExpr(f *sluice.Field, op string) (string, *sluice.Field, error) {
	if f == nil {
		return "", nil, errors.New("no such field")
	}
	if f.List || f.Type.Kind != sluice.TypeScalar {
		return "", nil, errors.New("only a single scalar field can be aggregated")
	}
	col := "t." + ident(f.Name)
	scalar := func(name string) *sluice.Field {
		return &sluice.Field{Name: f.Name, Type: sluice.FieldType{Kind: sluice.TypeScalar, Name: name}}
	}
	numeric := f.Type.Name == sluice.ScalarInt || f.Type.Name == sluice.ScalarFloat || f.Type.Name == sluice.ScalarBigInt
	switch op {
	case "min", "max":
		switch f.Type.Name {
		case sluice.ScalarInt, sluice.ScalarFloat, sluice.ScalarDateTime:
			return op + "(" + col + ")", f, nil
		case sluice.ScalarBigInt:
			return op + "(" + col + ")::text", f, nil // exact decimal text
		case sluice.ScalarString, sluice.ScalarID:
			return op + "(" + col + ` COLLATE "C")`, f, nil
		}
	case "sum":
		switch {
		case f.Type.Name == sluice.ScalarFloat:
			// Exact, in numeric, through text (as avg's sum), rounded
			// once by column.value (exact): a float8 sum rounds at each
			// row, so its result hung on the rows' order (1e16, 1,
			// -1e16 summed to 0 or 1) and could overflow on the way to
			// a sum that fits.
			return "sum(" + col + "::text::numeric)::text", scalar(sluice.ScalarFloat), nil
		case numeric:
			return "sum(" + col + ")::text", scalar(sluice.ScalarBigInt), nil
		}
	case "avg":
		// The exact sum and the count, "sum/count", divided exactly and
		// rounded once to a float by column.value (ratio): Postgres'
		// avg of numeric rounds to about 16 digits first, and its
		// float8 cast again, one unit in the last place off for some
		// means (238/29). The sum is in numeric, which cannot overflow
		// where a float8 sum can on values whose mean fits; a Float's
		// through text, its shortest exact decimal (float8 to numeric
		// keeps 15 digits), so the mean of one value is that value.
		if f.Type.Name == sluice.ScalarFloat {
			return "sum(" + col + "::text::numeric)::text || '/' || count(" + col + ")", scalar(sluice.ScalarFloat), nil
		}
		if numeric {
			return "sum(" + col + ")::text || '/' || count(" + col + ")", scalar(sluice.ScalarFloat), nil
		}
	default:
		return "", nil, errors.New("unknown aggregate")
	}
	return "", nil, fmt.Errorf("a %s field has no %s", f.Type.Name, op)
}

package postgres

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
)

// sqlBuilder accumulates the text and parameters of one statement.
type sqlBuilder struct {
	db      *sluice.Database
	schema  *sluice.Schema
	args    []any
	aliases int
	// past, when set, makes the statement read the state as of a past
	// position (see past.go); pastClasses are the classes it reads so.
	past        *AsOf
	pastClasses []string
}

// arg adds a parameter and returns its placeholder.
func (b *sqlBuilder) arg(v any) string {
	b.args = append(b.args, v)
	return fmt.Sprintf("$%d", len(b.args))
}

// limitSQL returns a page's LIMIT clause, its count written into the
// statement rather than passed as a parameter. A prepared statement whose
// LIMIT is a parameter has a generic plan costed for a tenth of its input
// rows, which on a skewed table (a filter on a rare value of a common
// column) is costed far above the custom plan of the known count: Postgres
// then plans the statement again at every execution. A written count lets
// the generic plan serve every execution; a page size is one of a few
// values, so it adds few statements to each connection's cache.
func limitSQL(n int64) string { return " LIMIT " + strconv.FormatInt(n, 10) }

func (b *sqlBuilder) alias(prefix string) string {
	b.aliases++
	return fmt.Sprintf("%s%d", prefix, b.aliases)
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// scope says how to reach the fields of the object a filter is evaluated on:
// a table row (alias set), a jsonb object (obj set) or, for list elements of
// scalars, a jsonb scalar (elem set).
//
// strict says the expression must be true or false, never NULL: it is
// under a NOT (or an allHave). Elsewhere a comparison is left bare, since
// WHERE and EXISTS treat NULL as false, and AND and OR keep that: a bare
// comparison on a column is what an index can serve (COALESCE(x, false)
// is not indexable).
type scope struct {
	alias  string
	obj    string
	elem   string
	strict bool
}

// textOf returns the SQL text value of field f (nil: the element itself) in
// scope sc, for comparisons: native columns in a row, ->> text in jsonb.
func (sc scope) value(f *sluice.Field, t sluice.FieldType) string {
	var raw string
	switch {
	case sc.alias != "":
		// A row column already has its type.
		return sc.alias + "." + ident(f.Name)
	case sc.obj != "":
		raw = fmt.Sprintf("(%s->>%s)", sc.obj, quoteLiteral(f.Name))
	default:
		raw = fmt.Sprintf("(%s #>> '{}')", sc.elem)
	}
	if t.Kind != sluice.TypeScalar {
		return raw
	}
	switch t.Name {
	case sluice.ScalarInt, sluice.ScalarBigInt:
		return raw + "::numeric"
	case sluice.ScalarFloat:
		return raw + "::float8"
	case sluice.ScalarBoolean:
		return raw + "::boolean"
	case sluice.ScalarDateTime:
		return raw + "::timestamptz"
	}
	return raw
}

// jsonb returns the jsonb value of a list or subdocument field in scope sc.
func (sc scope) jsonb(f *sluice.Field) string {
	if sc.alias != "" {
		return sc.alias + "." + ident(f.Name)
	}
	return fmt.Sprintf("(%s->%s)", sc.obj, quoteLiteral(f.Name))
}

// quoteLiteral quotes s as a SQL string literal, for where parameters
// cannot go: field names (letters, digits and underscores, as schema.Parse
// checks, but quoted anyway) and the DDL of capture triggers.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// compileFilter returns a SQL boolean expression, never NULL, for e
// evaluated in scope sc, on an object of class c.
func (b *sqlBuilder) compileFilter(e filter.Expr, sc scope) (string, error) {
	switch x := e.(type) {
	case *filter.And:
		return b.join(x.Exprs, sc, " AND ", "true")
	case *filter.Or:
		return b.join(x.Exprs, sc, " OR ", "false")
	case *filter.Not:
		sc.strict = true
		s, err := b.compileFilter(x.Expr, sc)
		if err != nil {
			return "", err
		}
		return "NOT " + s, nil
	case *filter.IDs:
		if sc.alias == "" {
			return "", fmt.Errorf("compile filter: _id outside a document")
		}
		return fmt.Sprintf("(%s.%s = ANY(%s))", sc.alias, colID, b.arg(x.IDs)), nil
	case *filter.Compare:
		return b.compare(x, sc.value(x.Field, x.Type), sc.strict)
	case *filter.Ref:
		var ref string
		if sc.alias != "" {
			ref = sc.alias + "." + ident(x.Field.Name)
		} else {
			ref = fmt.Sprintf("(%s->>%s)", sc.obj, quoteLiteral(x.Field.Name))
		}
		return b.refExists(x.Class, ref, x.Expr)
	case *filter.Sub:
		j := sc.jsonb(x.Field)
		inner, err := b.compileFilter(x.Expr, scope{obj: j, strict: sc.strict})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("(%s IS NOT NULL AND jsonb_typeof(%s) = 'object' AND %s)", j, j, inner), nil
	case *filter.Quant:
		return b.quant(x, sc)
	}
	return "", fmt.Errorf("compile filter: unknown node %T", e)
}

func (b *sqlBuilder) join(exprs []filter.Expr, sc scope, sep, empty string) (string, error) {
	if len(exprs) == 0 {
		return empty, nil
	}
	parts := make([]string, len(exprs))
	for i, e := range exprs {
		s, err := b.compileFilter(e, sc)
		if err != nil {
			return "", err
		}
		parts[i] = s
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return "(" + strings.Join(parts, sep) + ")", nil
}

// compare compiles one comparison of the SQL value v: an expression that
// is never NULL when strict is set, and otherwise may be NULL where it
// cannot be true. Text is compared in the "C" collation (byte order and
// byte equality, as Go compares strings in filter.Match), which is also
// the collation its indexes are built in (indexSQL), so that an index on
// the column serves eq, the ranges and startsWith.
func (b *sqlBuilder) compare(c *filter.Compare, v string, strict bool) (string, error) {
	var param string
	switch {
	case c.Op == filter.OpRegex:
		param = b.arg(c.Value.Regex.ARE)
	case c.Op == filter.OpStartsWith:
		param = b.arg(c.Value.Str)
	case c.Type.Kind != sluice.TypeScalar:
		param = b.arg(c.Value.Str)
	default:
		switch c.Type.Name {
		case sluice.ScalarInt, sluice.ScalarBigInt:
			// An integer column compares natively with a bigint (and can
			// use an index); anything else as numeric.
			if c.Type.Name == sluice.ScalarInt && c.Value.Num != nil && c.Value.Num.IsInt() && c.Value.Num.Num().IsInt64() {
				param = b.arg(c.Value.Num.Num().Int64()) + "::bigint"
			} else {
				param = b.arg(c.Value.Str) + "::numeric"
			}
		case sluice.ScalarFloat:
			param = b.arg(c.Value.Float) + "::float8"
		case sluice.ScalarBoolean:
			param = b.arg(c.Value.Bool) + "::boolean"
		case sluice.ScalarDateTime:
			param = b.arg(c.Value.Time) + "::timestamptz"
		default:
			param = b.arg(c.Value.Str) + "::text"
		}
	}
	text := c.Type.Kind != sluice.TypeScalar || c.Type.Name == sluice.ScalarString || c.Type.Name == sluice.ScalarID
	raw := v
	if text {
		v += `::text COLLATE "C"`
	}
	var cond string
	switch c.Op {
	case filter.OpRegex:
		cond = regexMatch(raw, param)
	case filter.OpStartsWith:
		// A range of byte strings, which an index in the "C" collation
		// serves: starts_with() is served only when Postgres plans with
		// the prefix's value, not by a prepared statement's generic plan.
		cond = fmt.Sprintf("%s >= %s::text", v, param)
		if next, ok := prefixEnd(c.Value.Str); ok {
			cond = fmt.Sprintf("(%s AND %s < %s::text)", cond, v, b.arg(next))
		}
	case filter.OpEq:
		cond = fmt.Sprintf("%s = %s", v, param)
	case filter.OpNe:
		cond = fmt.Sprintf("%s <> %s", v, param)
	default:
		op := map[filter.Op]string{filter.OpLt: "<", filter.OpLe: "<=", filter.OpGt: ">", filter.OpGe: ">="}[c.Op]
		if op == "" {
			return "", fmt.Errorf("compile filter: unknown operator %q", c.Op)
		}
		if text {
			cond = fmt.Sprintf("%s %s %s::text", v, op, param)
		} else {
			cond = fmt.Sprintf("%s %s %s", v, op, param)
		}
	}
	if strict {
		return "COALESCE(" + cond + ", false)", nil
	}
	return cond, nil
}

// prefixEnd returns the least string greater than every string that starts
// with prefix, in byte order: prefix with its last character replaced by
// the next one (UTF-8's byte order is code point order). A prefix of only
// U+10FFFF characters (or none) has no such bound: ok is false.
func prefixEnd(prefix string) (string, bool) {
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		next := r + 1
		if next == 0xD800 { // surrogates are not characters
			next = 0xE000
		}
		if next <= utf8.MaxRune {
			return prefix + string(next), true
		}
	}
	return "", false
}

// regexMatch returns the SQL condition "the text value v matches the
// pattern param", param being the ARE form of a filter.Regex. The pattern
// uses no locale-dependent construct, but COLLATE "C" keeps Postgres from
// consulting the column's or the database's locale (and from refusing a
// nondeterministic collation) all the same.
func regexMatch(v, param string) string {
	return fmt.Sprintf("%s::text COLLATE \"C\" ~ %s::text", v, param)
}

// documentTables returns the tables of the document classes that are class
// or inherit from it.
func documentTables(s *sluice.Schema, class string) []string {
	var out []string
	for _, n := range s.Descendants(class) {
		if s.Classes[n].Kind == sluice.KindDocument {
			out = append(out, n)
		}
	}
	return out
}

// unionSource returns a FROM source with the rows of every document table
// of class or its subclasses, with the columns of class's own fields, so
// that a filter on class's fields applies to all of them.
func (b *sqlBuilder) unionSource(class string) (string, bool) {
	classes := documentTables(b.schema, class)
	if len(classes) == 0 {
		return "", false
	}
	if len(classes) == 1 {
		return b.source(classes[0]), true
	}
	c := b.schema.Classes[class]
	cols := []string{colID, colCommitUID}
	for _, f := range c.Fields {
		cols = append(cols, ident(f.Name))
	}
	list := strings.Join(cols, ", ")
	parts := make([]string, len(classes))
	for i, n := range classes {
		parts[i] = fmt.Sprintf("SELECT %s FROM %s t", list, b.source(n))
	}
	return "(" + strings.Join(parts, " UNION ALL ") + ")", true
}

// refExists compiles "the document whose id is the SQL text ref exists,
// is of class (or a subclass) and matches e".
func (b *sqlBuilder) refExists(class, ref string, e filter.Expr) (string, error) {
	src, ok := b.unionSource(class)
	if !ok {
		return "false", nil
	}
	a := b.alias("r")
	inner, err := b.compileFilter(e, scope{alias: a})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("EXISTS (SELECT 1 FROM %s %s WHERE %s.%s = %s AND %s)", src, a, a, colID, ref, inner), nil
}

// quant compiles someHave / allHave over the elements of a list field.
func (b *sqlBuilder) quant(q *filter.Quant, sc scope) (string, error) {
	list := sc.jsonb(q.Field)
	a := b.alias("e")
	elem := a + ".v"
	var cond string
	var err error
	switch q.Field.Type.Kind {
	case sluice.TypeReference:
		cond, err = b.refExists(q.Field.Type.Name, "("+elem+" #>> '{}')", q.Elem)
	case sluice.TypeSubdocument:
		var inner string
		inner, err = b.compileFilter(q.Elem, scope{obj: elem, strict: q.All})
		cond = fmt.Sprintf("(jsonb_typeof(%s) = 'object' AND %s)", elem, inner)
	default:
		cond, err = b.compileFilter(q.Elem, scope{elem: elem, strict: q.All})
	}
	if err != nil {
		return "", err
	}
	src := fmt.Sprintf("jsonb_array_elements(CASE WHEN jsonb_typeof(%s) = 'array' THEN %s END) %s(v)", list, list, a)
	if q.All {
		return fmt.Sprintf("NOT EXISTS (SELECT 1 FROM %s WHERE NOT %s)", src, cond), nil
	}
	return fmt.Sprintf("EXISTS (SELECT 1 FROM %s WHERE %s)", src, cond), nil
}

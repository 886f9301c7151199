package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/schema"
)

// DocQuery selects documents for a GraphQL query. Each query compiles to
// one SQL statement.
type DocQuery struct {
	// Class is the queried class; Filter and Order address its fields.
	Class string
	// Classes are the document classes whose tables are read: Class and,
	// unless children are excluded, its document subclasses.
	Classes []string
	// IDs, when not nil, keeps only documents with these ids.
	IDs []string
	// Filter, when not nil, keeps only matching documents.
	Filter filter.Expr
	// Order sorts the result; the id always comes last as a tie-breaker,
	// so paging is stable.
	Order []OrderKey
	// Limit caps the number of documents (< 0: no limit); Offset skips.
	Limit, Offset int64
	// Fields, when not nil, are the only fields read (a projection): the
	// documents returned then hold only those of their fields.
	Fields []string
}

// OrderKey is one sort key: a field name of the queried class, or "_id".
type OrderKey struct {
	Field string
	Desc  bool
}

// QueryDoc is a document read for GraphQL with the commit that last wrote
// it; Commit is nil when that commit was pruned from the log.
type QueryDoc struct {
	Doc    *sluice.Document
	Commit *sluice.Commit
	// Unreadable names the fields whose values their types cannot hold
	// (see rowToDocument), left out of Doc: such a field has a value, one
	// Doc cannot tell, not none. A live query's boundary needs to know.
	Unreadable []string
}

type statementCounterKey struct{}

// CountStatements returns a context under which the GraphQL read functions
// of this package (QueryDocuments, DocumentsByID) count the SQL statements
// they send, and a function returning the count so far. Tests use it to
// show that a nested query costs a number of statements that does not grow
// with the number of documents.
func CountStatements(ctx context.Context) (context.Context, func() int64) {
	n := new(atomic.Int64)
	return context.WithValue(ctx, statementCounterKey{}, n), n.Load
}

func countStatement(ctx context.Context) {
	if n, ok := ctx.Value(statementCounterKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
}

type readBudgetKey struct{}

// ErrReadBytes is the error of a read past the bytes LimitReads allows.
var ErrReadBytes = errors.New("the documents read are larger than the request's bound")

// LimitReads returns a context under which the GraphQL read functions of
// this package (QueryDocuments, QueryDocumentsEach, Backlinks,
// DocumentsByID, Aggregate) fail with ErrReadBytes once the rows they
// have read under it together pass max bytes, as Postgres sent them,
// counted before each row is decoded (an aggregate's text values are
// not even sent past it: see boundText). How many documents a request reads is bounded by
// their number; this bounds what they hold, which is data: a page of
// 10,000 documents of 1 MiB was read whole before the response's bound
// refused it.
func LimitReads(ctx context.Context, max int64) context.Context {
	n := new(atomic.Int64)
	n.Store(max)
	return context.WithValue(ctx, readBudgetKey{}, n)
}

// readBudget is what ctx's LimitReads has left, nil without one. It is
// looked up once per statement, not per row.
type readBudget struct{ left *atomic.Int64 }

func readBudgetOf(ctx context.Context) readBudget {
	left, _ := ctx.Value(readBudgetKey{}).(*atomic.Int64)
	return readBudget{left}
}

// remaining returns what the budget has left, at least 0, or -1 without
// one.
func (b readBudget) remaining() int64 {
	if b.left == nil {
		return -1
	}
	return max(b.left.Load(), 0)
}

// charge counts the row rows holds now against the budget.
func (b readBudget) charge(rows pgx.Rows) error {
	if b.left == nil {
		return nil
	}
	n := 0
	for _, v := range rows.RawValues() {
		n += len(v)
	}
	if b.left.Add(-int64(n)) < 0 {
		return ErrReadBytes
	}
	return nil
}

// QueryDocuments returns the documents q selects from database d, in one
// statement. Errors are domain errors: an invalid regex is CodeInvalid;
// anything else is internal and keeps its SQL detail for the log only.
func (db *DB) QueryDocuments(ctx context.Context, d *sluice.Database, s *sluice.Schema, q DocQuery) ([]QueryDoc, error) {
	st, err := compileQuery(d, s, q, nil, db.asOf(ctx, d.ID))
	if err != nil || st == nil {
		return nil, db.readNothing(ctx, d, err)
	}
	return db.readRows(ctx, d, st.sql, st.args, st.rows(db, d, s))
}

// readNothing is what a read that needs no statement (its classes have no
// table: an interface read without its implementations) does instead:
// when ctx carries a snapshot of d that has not begun, it begins it with
// a read of the position alone, so that the result reflects a position
// as any read's does. err, the read's own error, is returned first.
func (db *DB) readNothing(ctx context.Context, d *sluice.Database, err error) error {
	if err != nil {
		return err
	}
	if s, ok := ctx.Value(snapshotKey{}).(*Snapshot); !ok || s.d.ID != d.ID || s.db != db || s.begun {
		return nil
	}
	_, err = db.History(ctx, d.ID)
	return err
}

// QueryDocumentsEach returns the documents each of qs selects from
// database d, as QueryDocuments would, read by one SQL statement: their
// statements joined by UNION ALL, each row numbered by its query and its
// place in that query's result. Live queries that differ only in their
// variables read their results so: one statement for a batch, not one
// per variable set. Statements of different shapes (a variable that
// changes which columns or tables are read) cannot be joined: each shape
// is then one statement.
func (db *DB) QueryDocumentsEach(ctx context.Context, d *sluice.Database, s *sluice.Schema, qs []DocQuery) ([][]QueryDoc, error) {
	out := make([][]QueryDoc, len(qs))
	// Group the queries by the shape of their statements, in chunks of at
	// most maxJoined queries and maxJoinedArgs parameters (Postgres takes
	// at most 65,535; a statement of thousands of branches would cost its
	// planning more than it saves); a query that reads no table has no
	// documents.
	type chunk struct {
		which []int
		args  int
	}
	var chunks []*chunk
	open := map[int]*chunk{} // the chunk each shape fills, by its first query
	var shapes []*statement
	for i, q := range qs {
		st, err := compileQuery(d, s, q, nil, nil)
		if err != nil {
			return nil, err
		}
		if st == nil {
			continue
		}
		g := slices.IndexFunc(shapes, st.sameShape)
		if g < 0 {
			g = len(shapes)
			shapes = append(shapes, st)
		}
		c := open[g]
		if c == nil || len(c.which) == maxJoined || c.args+len(st.args) > maxJoinedArgs {
			c = &chunk{}
			open[g] = c
			chunks = append(chunks, c)
		}
		c.which, c.args = append(c.which, i), c.args+len(st.args)
	}
	for _, c := range chunks {
		if err := db.queryJoined(ctx, d, s, qs, c.which, out); err != nil {
			return nil, db.schemaMoved(ctx, d, err)
		}
	}
	return out, nil
}

// The most queries, and parameters, one joined statement reads
// (QueryDocumentsEach).
const (
	maxJoined     = 256
	maxJoinedArgs = 30000
)

// queryJoined reads the documents of the queries qs[i], i in which, whose
// statements have one shape, by one statement, into out[i].
func (db *DB) queryJoined(ctx context.Context, d *sluice.Database, s *sluice.Schema, qs []DocQuery, which []int, out [][]QueryDoc) error {
	sts := make([]*statement, len(which))
	var args []any
	for j, i := range which {
		st, err := compileQuery(d, s, qs[i], args, nil) // numbered after the ones before
		if err != nil {
			return err
		}
		sts[j], args = st, st.args
	}
	if len(sts) == 1 {
		docs, err := db.readRows(ctx, d, sts[0].sql, args, sts[0].rows(db, d, s))
		out[which[0]] = docs
		return err
	}
	// row_number() numbers each branch's rows in the order its statement
	// returns them, so that sorting by (branch, number) keeps each
	// query's order whatever order the UNION ALL's branches run in.
	var sql strings.Builder
	for j, st := range sts {
		if j > 0 {
			sql.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&sql, "SELECT %d AS k, row_number() OVER () AS n, s.* FROM (%s) s", j, st.sql)
	}
	sql.WriteString(" ORDER BY 1, 2")
	var k, n int64
	rr := sts[0].rows(db, d, s)
	dest := append([]any{&k, &n}, rr.dest()...)
	countStatement(ctx)
	rows, err := db.classReader(ctx, d).Query(ctx, sql.String(), args...)
	if err != nil {
		return queryError(err)
	}
	defer rows.Close()
	budget := readBudgetOf(ctx)
	for rows.Next() {
		if err := budget.charge(rows); err != nil {
			return err
		}
		if err := rows.Scan(dest...); err != nil {
			return queryError(err)
		}
		doc, err := rr.doc()
		if err != nil {
			return err
		}
		out[which[k]] = append(out[which[k]], doc)
	}
	if err := rows.Err(); err != nil {
		return queryError(err)
	}
	return nil
}

// ExplainQuery returns Postgres' plan (EXPLAIN, with ANALYZE and BUFFERS
// when analyze is set, which runs the statement) of the statement
// QueryDocuments sends for q, as text; "" when q reads no table. Tests
// and benchmarks use it to show which index serves a query; in a snapshot
// as of a past position (ctx), it explains the read of the past.
func (db *DB) ExplainQuery(ctx context.Context, d *sluice.Database, s *sluice.Schema, q DocQuery, analyze bool) (string, error) {
	st, err := compileQuery(d, s, q, nil, db.asOf(ctx, d.ID))
	if err != nil || st == nil {
		return "", err
	}
	return db.explain(ctx, st, analyze)
}

// explain returns the plan of st (see ExplainQuery).
func (db *DB) explain(ctx context.Context, st *statement, analyze bool) (string, error) {
	opts := "COSTS OFF"
	if analyze {
		opts = "ANALYZE, BUFFERS, COSTS OFF"
	}
	rows, err := db.pool.Query(ctx, "EXPLAIN ("+opts+") "+st.sql, st.args...)
	if err != nil {
		return "", queryError(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", queryError(err)
	}
	return strings.Join(lines, "\n"), nil
}

// statement is the SQL of a DocQuery. Its rows are (class index, row JSON,
// commit columns) of the documents of classes, as docRows reads them,
// unless proj is set.
type statement struct {
	sql     string
	args    []any
	classes []string
	proj    *projection
	// bounded: the statement is an aggregate's whose last column says
	// whether its text values fit the read budget (boundText).
	bounded bool
}

// rows returns what decodes the statement's rows, of database d read
// through db.
func (st *statement) rows(db *DB, d *sluice.Database, s *sluice.Schema) rowReader {
	if st.proj != nil {
		return newProjectionRows(db, d, st.proj)
	}
	return &docRows{db: db, d: d, s: s, classes: st.classes}
}

// sameShape reports whether st's rows are read as o's are: the same
// columns of the same classes.
func (st *statement) sameShape(o *statement) bool {
	if (st.proj == nil) != (o.proj == nil) {
		return false
	}
	if st.proj == nil {
		return slices.Equal(st.classes, o.classes)
	}
	return st.proj.class == o.proj.class && st.proj.withCommit == o.proj.withCommit && slices.Equal(st.proj.fields, o.proj.fields)
}

// projection says what the rows of a projected query hold (see
// queryProjection): the id, the commit uid (the version), each field's
// column, then the commit's columns when withCommit is set.
type projection struct {
	class      *sluice.Class
	fields     []*sluice.Field
	withCommit bool
}

// compileQuery returns the statement of q, or nil when q reads no table.
// Its parameters are numbered after args, which its own args begin with,
// so that statements compiled one after the other can be joined into one
// (QueryDocumentsEach). With past set it reads the state as of past.Pos.
func compileQuery(d *sluice.Database, s *sluice.Schema, q DocQuery, args []any, past *AsOf) (*statement, error) {
	if len(q.Classes) == 0 {
		return nil, nil
	}
	c := s.Class(q.Class)
	if c == nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, "unknown class %q", q.Class)
	}
	b := &sqlBuilder{db: d, schema: s, args: slices.Clip(args), past: past}
	var where []string
	switch {
	case len(q.IDs) == 1:
		// One id is compared as one value: the generic plan of = ANY($n)
		// is costed for an array of ten, above the custom plan of a known
		// array of one, so Postgres would plan every lookup again.
		where = append(where, fmt.Sprintf("t.%s = %s", colID, b.arg(q.IDs[0])))
	case q.IDs != nil:
		where = append(where, fmt.Sprintf("t.%s = ANY(%s)", colID, b.arg(q.IDs)))
	}
	if q.Filter != nil {
		cond, err := b.compileFilter(q.Filter, scope{alias: "t"})
		if err != nil {
			return nil, err
		}
		if cond != "true" {
			where = append(where, cond)
		}
	}
	whereSQL := ""
	if len(where) > 0 {
		whereSQL = " WHERE " + strings.Join(where, " AND ")
	}
	extra, order, err := unionOrder(c, q.Order)
	if err != nil {
		return nil, err
	}
	for _, name := range q.Classes {
		if s.Class(name) == nil {
			return nil, sluice.Errorf(sluice.CodeInvalid, "unknown class %q", name)
		}
	}
	page := ""
	if q.Limit >= 0 {
		page += limitSQL(q.Limit)
	}
	if q.Offset > 0 {
		page += " OFFSET " + b.arg(q.Offset)
	}
	if len(q.Classes) == 1 && q.Fields != nil {
		return projectionStatement(b, q, whereSQL, page), nil
	}
	if len(q.Classes) == 1 {
		// The inner query sorts and pages the narrow rows; the JSON is
		// built only for the rows the LIMIT keeps.
		ord := orderBy(b, c, q)
		sql := fmt.Sprintf("SELECT 0, %s, c.seq, c.author, c.message, c.user_name, c.committed_at FROM (SELECT t.* FROM %s t%s%s%s) t LEFT JOIN sluice.commits c ON c.uid = t.%s%s",
			rowJSONSQL(c, nil, "t"), b.source(q.Classes[0]), whereSQL, ord, page, colCommitUID, ord)
		return &statement{sql: b.pastStatement(sql), args: b.args, classes: q.Classes}, nil
	}
	if b.past != nil {
		// One flat union of the classes' tables and past rows (see
		// past.go), each row with its JSON: no second read by id.
		src, cond := b.pastUnion(q, "t")
		ord := singleOrder(c, q.Order)
		sql := fmt.Sprintf("SELECT t._cls, t._j, c.seq, c.author, c.message, c.user_name, c.committed_at FROM (SELECT * FROM %s WHERE %s ORDER BY %s%s) t LEFT JOIN sluice.commits c ON c.uid = t.%s ORDER BY %s",
			src, strings.Join(append([]string{cond}, where...), " AND "), ord, page, colCommitUID, ord)
		return &statement{sql: b.pastStatement(sql), args: b.args, classes: q.Classes}, nil
	}
	// Sorting and paging happen on ids before the documents' JSON is built
	// and their commits joined, so both cost only the rows returned: the
	// page's rows are then read again by primary key.
	parts, joins, cases, err := unionBranches(b, q.Classes, func(class string) string { return classTable(d, class) + " t" + whereSQL }, extra, q.Fields)
	if err != nil {
		return nil, err
	}
	sql := "SELECT u.cls, CASE u.cls" + strings.Join(cases, "") + " END, c.seq, c.author, c.message, c.user_name, c.committed_at FROM (SELECT * FROM (" +
		strings.Join(parts, " UNION ALL ") + ") u ORDER BY " + order + page +
		") u" + strings.Join(joins, "") + " LEFT JOIN sluice.commits c ON c.uid = u.uid ORDER BY " + order
	return &statement{sql: sql, args: b.args, classes: q.Classes}, nil
}

// unionOrder returns what sorts documents of class c by keys when they
// are read as a union of class tables (alias u): the sort columns each
// branch selects (", t.f AS o0, …", from alias t) and the ORDER BY list,
// which ends with the id. A key that cannot be sorted by is a CodeInvalid
// error.
func unionOrder(c *sluice.Class, keys []OrderKey) (extra, order string, err error) {
	var cols, by []string
	idDesc := false
	for i, k := range keys {
		if k.Field == colID {
			idDesc = k.Desc
			break // the id is unique: later keys cannot matter
		}
		f := c.Field(k.Field)
		if f == nil || f.List || f.Type.Kind == sluice.TypeSubdocument {
			return "", "", sluice.Errorf(sluice.CodeInvalid, "orderBy: %s cannot be sorted by %s", c.Name, k.Field)
		}
		col := fmt.Sprintf("o%d", i)
		cols = append(cols, fmt.Sprintf("t.%s AS %s", ident(f.Name), col))
		by = append(by, collated(f, "u."+col)+direction(k.Desc))
	}
	by = append(by, `u._id COLLATE "C"`+direction(idDesc))
	if len(cols) > 0 {
		extra = ", " + strings.Join(cols, ", ")
	}
	return extra, strings.Join(by, ", "), nil
}

// unionBranches returns the parts of a read of the documents of classes
// as one union (see compileQuery): each class's branch, selecting its
// index in classes (cls), the id, the commit's uid and the sort columns
// extra from the rows (alias t) that from returns for the class (the
// FROM list and WHERE clause); the join of each class's table (alias t<i>;
// as of b's past position, its source) back to the union's rows; and the
// CASE arm building each class's row JSON (of fields only, when not nil).
func unionBranches(b *sqlBuilder, classes []string, from func(class string) string, extra string, fields []string) (parts, joins, cases []string, err error) {
	s := b.schema
	parts = make([]string, len(classes))
	for i, name := range classes {
		if s.Class(name) == nil {
			return nil, nil, nil, sluice.Errorf(sluice.CodeInvalid, "unknown class %q", name)
		}
		parts[i] = fmt.Sprintf("SELECT %d AS cls, t.%s AS _id, t.%s AS uid%s FROM %s",
			i, colID, colCommitUID, extra, from(name))
		alias := fmt.Sprintf("t%d", i)
		joins = append(joins, fmt.Sprintf(" LEFT JOIN %s %s ON u.cls = %d AND %s.%s = u._id", b.source(name), alias, i, alias, colID))
		cases = append(cases, fmt.Sprintf(" WHEN %d THEN %s", i, rowJSONSQL(s.Class(name), fields, alias)))
	}
	return parts, joins, cases, nil
}

// projectionStatement returns the statement of the most common query: one
// table, a known set of selected fields. It selects just those columns,
// which queryProjection scans into typed values with no JSON in between,
// and joins the commit only when _CommitMetadata is selected.
func projectionStatement(b *sqlBuilder, q DocQuery, whereSQL, page string) *statement {
	c := b.schema.Class(q.Classes[0])
	var fields []*sluice.Field
	withCommit := false
	seen := map[string]bool{}
	for _, n := range q.Fields {
		if n == "_CommitMetadata" {
			withCommit = true
		}
		if f := c.Field(n); f != nil && !seen[n] {
			seen[n] = true
			fields = append(fields, f)
		}
	}
	// The inner query reads the sort columns too.
	inner := []string{"t." + colID, "t." + colCommitUID}
	innerSeen := map[string]bool{}
	for _, f := range fields {
		innerSeen[f.Name] = true
		inner = append(inner, "t."+ident(f.Name))
	}
	for _, k := range q.Order {
		if f := c.Field(k.Field); f != nil && !innerSeen[f.Name] {
			innerSeen[f.Name] = true
			inner = append(inner, "t."+ident(f.Name))
		}
	}
	outer := []string{"t." + colID, "t." + colCommitUID}
	for _, f := range fields {
		expr := "t." + ident(f.Name)
		if columnType(f) == "numeric" {
			expr += "::text" // exact decimal text; BigInt is returned as a string
		}
		outer = append(outer, expr)
	}
	join := ""
	if withCommit {
		outer = append(outer, "c.seq", "c.author", "c.message", "c.user_name", "c.committed_at")
		join = " LEFT JOIN sluice.commits c ON c.uid = t." + colCommitUID
	}
	ord := orderBy(b, c, q)
	sql := fmt.Sprintf("SELECT %s FROM (SELECT %s FROM %s t%s%s%s) t%s%s",
		strings.Join(outer, ", "), strings.Join(inner, ", "), b.source(c.Name), whereSQL, ord, page, join, ord)
	return &statement{sql: b.pastStatement(sql), args: b.args, proj: &projection{class: c, fields: fields, withCommit: withCommit}}
}

// A rowReader decodes the rows of a statement into documents.
type rowReader interface {
	// dest returns where a row's columns are scanned to.
	dest() []any
	// doc returns the document of the row scanned last.
	doc() (QueryDoc, error)
}

// readRows runs a statement and decodes its rows with rr.
func (db *DB) readRows(ctx context.Context, d *sluice.Database, sql string, args []any, rr rowReader) ([]QueryDoc, error) {
	docs, err := db.scanRows(ctx, d, sql, args, rr)
	return docs, db.schemaMoved(ctx, d, err)
}

func (db *DB) scanRows(ctx context.Context, d *sluice.Database, sql string, args []any, rr rowReader) ([]QueryDoc, error) {
	countStatement(ctx)
	rows, err := db.classReader(ctx, d).Query(ctx, sql, args...)
	if err != nil {
		return nil, queryError(err)
	}
	defer rows.Close()
	dest := rr.dest()
	var out []QueryDoc
	budget := readBudgetOf(ctx)
	for rows.Next() {
		if err := budget.charge(rows); err != nil {
			return nil, err
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, queryError(err)
		}
		doc, err := rr.doc()
		if err != nil {
			return nil, err
		}
		out = append(out, doc)
	}
	if err := rows.Err(); err != nil {
		return nil, queryError(err)
	}
	return out, nil
}

// lastCommit holds the columns of the commit that last wrote a document
// (all null when it was pruned).
type lastCommit struct {
	seq                   *int64
	author, message, user *string
	at                    *time.Time
}

func (c *lastCommit) dest() []any { return []any{&c.seq, &c.author, &c.message, &c.user, &c.at} }

func (c *lastCommit) commit(d *sluice.Database) *sluice.Commit {
	if c.seq == nil {
		return nil
	}
	return &sluice.Commit{DatabaseID: d.ID, Epoch: d.Epoch, Seq: *c.seq, Author: *c.author, Message: *c.message, User: *c.user, Time: *c.at}
}

// projectionRows reads the rows of a projected statement (see
// projectionStatement) into typed values, with no JSON in between.
type projectionRows struct {
	db     *DB
	d      *sluice.Database
	proj   *projection
	id     string
	uid    *int64 // null for a document of the past whose image does not say
	cols   []column
	commit lastCommit
}

func newProjectionRows(db *DB, d *sluice.Database, p *projection) *projectionRows {
	r := &projectionRows{db: db, d: d, proj: p, cols: make([]column, len(p.fields))}
	for i, f := range p.fields {
		r.cols[i].field = f
	}
	return r
}

func (r *projectionRows) dest() []any {
	dest := make([]any, 0, len(r.cols)+5)
	dest = append(dest, &r.id, &r.uid)
	for i := range r.cols {
		dest = append(dest, r.cols[i].dest())
	}
	if r.proj.withCommit {
		dest = append(dest, r.commit.dest()...)
	}
	return dest
}

func (r *projectionRows) doc() (QueryDoc, error) {
	doc := &sluice.Document{ID: r.id, Type: r.proj.class.Name, Fields: make(map[string]any, len(r.cols))}
	if r.uid != nil {
		doc.Version = sluice.VersionOf(*r.uid)
	}
	var unreadable []string
	for i := range r.cols {
		v, ok, err := r.cols[i].value()
		if err != nil {
			unreadable = append(unreadable, r.cols[i].field.Name) // as rowToDocument
			continue
		}
		if ok {
			doc.Fields[r.cols[i].field.Name] = v
		}
	}
	r.db.unreadable(r.d, r.id, unreadable)
	return QueryDoc{Doc: doc, Commit: r.commit.commit(r.d), Unreadable: unreadable}, nil
}

// column scans one field's column into a typed holder and converts it to
// the normalized field value (the same values rowToDocument produces).
type column struct {
	field *sluice.Field
	str   *string
	num   *int64
	float *float64
	bool  *bool
	time  pgtype.Timestamptz // infinity scans here, not into a time.Time
	raw   []byte
	// ratio: the column is an exact "sum/count" (an aggregate's avg),
	// read as text and answered as the float nearest their quotient.
	ratio bool
	// exact: the column is an exact decimal (a Float's sum), read as
	// text and answered as the float nearest it.
	exact bool
}

// errFloatRange is a ratio or exact column's value past the largest
// float.
var errFloatRange = errors.New("out of the range of a Float")

func (c *column) dest() any {
	if c.ratio || c.exact {
		return &c.str
	}
	switch columnType(c.field) {
	case "integer":
		return &c.num
	case "double precision":
		return &c.float
	case "boolean":
		return &c.bool
	case "timestamptz":
		return &c.time
	case "jsonb":
		return &c.raw
	default: // text, and numeric read as text
		return &c.str
	}
}

// value returns the scanned value, false when the column was null, or an
// error when it holds a value of the column's type that the field's
// cannot hold (see rowToDocument): a Float NaN or infinity, a DateTime
// infinite or outside years 1 to 9999, a BigInt that is not a whole
// number.
func (c *column) value() (any, bool, error) {
	if c.ratio {
		if c.str == nil {
			return nil, false, nil
		}
		return ratioFloat(*c.str)
	}
	if c.exact {
		if c.str == nil {
			return nil, false, nil
		}
		return nearestFloat(*c.str, 1)
	}
	switch columnType(c.field) {
	case "integer":
		if c.num == nil {
			return nil, false, nil
		}
		return *c.num, true, nil
	case "double precision":
		if c.float == nil {
			return nil, false, nil
		}
		if math.IsNaN(*c.float) || math.IsInf(*c.float, 0) {
			return nil, false, errors.New("not a finite number")
		}
		return unsigned(*c.float), true, nil
	case "boolean":
		if c.bool == nil {
			return nil, false, nil
		}
		return *c.bool, true, nil
	case "timestamptz":
		if !c.time.Valid {
			return nil, false, nil
		}
		if c.time.InfinityModifier != pgtype.Finite {
			return nil, false, errors.New("an infinite time")
		}
		t, err := checkedTime(c.time.Time)
		return t, err == nil, err
	case "jsonb":
		if c.raw == nil {
			return nil, false, nil
		}
		if len(c.raw) > schema.MaxValues && schema.CountJSONValues(c.raw) > schema.MaxValues {
			return nil, false, errTooManyValues // as decodeRow
		}
		var v any
		if err := decodeExact(c.raw, &v); err != nil {
			return nil, false, err
		}
		nv, err := fromColumn(c.field, v)
		return nv, err == nil, err
	case "numeric":
		if c.str == nil {
			return nil, false, nil
		}
		if !isInteger(*c.str) { // NaN, the infinities
			return nil, false, errors.New("not a whole number")
		}
		return *c.str, true, nil
	default:
		if c.str == nil {
			return nil, false, nil
		}
		return *c.str, true, nil
	}
}

// orderBy returns the ORDER BY clause, " ORDER BY …", of a statement
// reading q from class c's table alone (its inner query sorts and pages,
// its outer one keeps that order). A lookup of one id in the present
// reads at most one row (the id is the table's key), and has none: its
// Sort node cost Postgres about a tenth of the lookup's statement
// (pgbench, prepared, one client).
func orderBy(b *sqlBuilder, c *sluice.Class, q DocQuery) string {
	if len(q.IDs) == 1 && b.past == nil {
		return ""
	}
	return " ORDER BY " + singleOrder(c, q.Order)
}

// singleOrder returns the ORDER BY list of a query on one table (alias t);
// keys were checked by QueryDocuments.
func singleOrder(c *sluice.Class, keys []OrderKey) string {
	var out []string
	idDesc := false
	for _, k := range keys {
		if k.Field == colID {
			idDesc = k.Desc
			break
		}
		f := c.Field(k.Field)
		out = append(out, collated(f, "t."+ident(f.Name))+direction(k.Desc))
	}
	out = append(out, "t."+colID+` COLLATE "C"`+direction(idDesc))
	return strings.Join(out, ", ")
}

// rowJSONSQL returns the SQL of the JSON of row (an alias of a row of class
// c's table): every column, or only the _id and the given fields c has.
func rowJSONSQL(c *sluice.Class, fields []string, row string) string {
	if fields == nil {
		return "to_jsonb(" + row + ".*)"
	}
	parts := []string{quoteLiteral(colID), row + "." + colID, quoteLiteral(colCommitUID), row + "." + colCommitUID}
	for _, name := range fields {
		if c.Field(name) != nil {
			parts = append(parts, quoteLiteral(name), row+"."+ident(name))
		}
	}
	// jsonb_build_object takes at most 100 arguments.
	if len(parts) > 100 {
		return "to_jsonb(" + row + ".*)"
	}
	return "jsonb_build_object(" + strings.Join(parts, ", ") + ")"
}

func direction(desc bool) string {
	if desc {
		return " DESC"
	}
	return " ASC"
}

// DocumentsByID returns the documents of database d with the given ids
// ("Class/key"), whatever their classes, in one statement. Ids that name no
// document (or no document class) are left out; the order is unspecified.
// At most limit documents are read (< 0: no limit), so that a caller
// bounding its rows never receives more than it asks for.
func (db *DB) DocumentsByID(ctx context.Context, d *sluice.Database, s *sluice.Schema, ids []string, limit int) ([]QueryDoc, error) {
	byClass := map[string][]string{}
	var classes []string
	for _, id := range ids {
		if err := checkText("document id", id); err != nil {
			return nil, err
		}
		class, _, ok := strings.Cut(id, "/")
		if !ok {
			continue
		}
		if c := s.Class(class); c == nil || c.Kind != sluice.KindDocument {
			continue
		}
		if _, seen := byClass[class]; !seen {
			classes = append(classes, class)
		}
		byClass[class] = append(byClass[class], id)
	}
	if len(classes) == 0 {
		return nil, nil
	}
	b := &sqlBuilder{db: d, schema: s, past: db.asOf(ctx, d.ID)}
	parts := make([]string, len(classes))
	for i, name := range classes {
		parts[i] = fmt.Sprintf("SELECT %d AS cls, t.%s AS uid, to_jsonb(t.*) AS j FROM %s t WHERE t.%s = ANY(%s)",
			i, colCommitUID, b.source(name), colID, b.arg(byClass[name]))
	}
	page := ""
	if limit >= 0 {
		page = limitSQL(int64(limit))
	}
	sql := b.pastStatement("SELECT u.cls, u.j, c.seq, c.author, c.message, c.user_name, c.committed_at FROM (" +
		strings.Join(parts, " UNION ALL ") + page + ") u LEFT JOIN sluice.commits c ON c.uid = u.uid")
	return db.readRows(ctx, d, sql, b.args, &docRows{db: db, d: d, s: s, classes: classes})
}

// docRows reads rows of (class index, row JSON, commit columns) of the
// documents of classes.
type docRows struct {
	db      *DB
	d       *sluice.Database
	s       *sluice.Schema
	classes []string
	ci      int
	raw     []byte
	commit  lastCommit
}

func (r *docRows) dest() []any { return append([]any{&r.ci, &r.raw}, r.commit.dest()...) }

func (r *docRows) doc() (QueryDoc, error) {
	c := r.s.Classes[r.classes[r.ci]]
	row, err := decodeRow(r.raw)
	if err != nil {
		return QueryDoc{}, fmt.Errorf("decode %s row: %w", c.Name, err)
	}
	doc, unreadable := rowToDocument(c, row)
	r.db.unreadable(r.d, doc.ID, unreadable)
	doc.Version = rowVersion(row)
	return QueryDoc{Doc: doc, Commit: r.commit.commit(r.d), Unreadable: unreadable}, nil
}

// queryError maps errors of a GraphQL read: Postgres rejecting a regex the
// Go check accepted is the client's error; the rest as mapError.
func queryError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "2201B" { // invalid_regular_expression
		return sluice.Errorf(sluice.CodeInvalid, "invalid regex: %s", pe.Message)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return mapError(err)
}

// ratioFloat returns the float nearest the quotient of "sum/count", an
// exact decimal sum and a whole count: rounded once (big.Rat.Float64 is
// correctly rounded). A sum that is not a finite number (a NaN or an
// infinity another SQL role stored in a Float column) is an error, as
// such a value is.
func ratioFloat(s string) (any, bool, error) {
	sum, count, _ := strings.Cut(s, "/")
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil || n <= 0 {
		return nil, false, fmt.Errorf("an average over %q values", count)
	}
	return nearestFloat(sum, n)
}

// nearestFloat returns the float nearest the exact decimal sum divided by
// n, rounded once; a sum that is not a finite number (NaN, Infinity) is
// an error, one past the largest float errFloatRange.
func nearestFloat(sum string, n int64) (any, bool, error) {
	r := new(big.Rat)
	if _, ok := r.SetString(sum); !ok {
		return nil, false, errors.New("not a finite number")
	}
	if n != 1 {
		r.Quo(r, new(big.Rat).SetInt64(n))
	}
	f, _ := r.Float64()
	if math.IsInf(f, 0) {
		return nil, false, errFloatRange
	}
	return f, true, nil
}

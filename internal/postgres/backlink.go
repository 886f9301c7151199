package postgres

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/sluice-dev/sluice"
)

// BacklinkQuery selects, for each of several documents (the targets), the
// documents whose reference field points at it: a GraphQL backlink
// (_<field>_of_<Class>) resolved for every object of one level of a
// result at once.
type BacklinkQuery struct {
	// Query says which documents link back and how each target's list
	// is filtered, sorted and paged: Class is the class declaring Field,
	// Classes the document classes read (Class and its subclasses); Limit
	// and Offset page each target's list (Limit < 0: no limit). IDs is
	// not used.
	Query DocQuery
	// Field is the reference field (single or list) of Query.Class.
	Field string
	// Targets are the ids of the documents linked to, without
	// duplicates.
	Targets []string
	// Total bounds the rows of all targets together (< 0: no bound):
	// the caller's row budget, so that Postgres never sends more.
	Total int64
}

// Backlinks returns, for each target of q in order, the documents whose
// q.Field holds it, in one statement: each target's page is read by an
// index on the field (see refIndexSQL), so its cost is what the page
// holds, not what links to the target. Errors as QueryDocuments.
func (db *DB) Backlinks(ctx context.Context, d *sluice.Database, s *sluice.Schema, q BacklinkQuery) ([][]QueryDoc, error) {
	out := make([][]QueryDoc, len(q.Targets))
	st, err := compileBacklinks(d, s, q, db.asOf(ctx, d.ID))
	if err != nil || st == nil {
		return out, err
	}
	rr := &backlinkRows{docRows: docRows{db: db, d: d, s: s, classes: st.classes}}
	docs, err := db.readRows(ctx, d, st.sql, st.args, rr)
	if err != nil {
		return nil, err
	}
	for i, doc := range docs {
		k := rr.targets[i]
		out[k] = append(out[k], doc)
	}
	return out, nil
}

// ExplainBacklinks returns Postgres' plan of the statement Backlinks
// sends for q (as ExplainQuery does for a query).
func (db *DB) ExplainBacklinks(ctx context.Context, d *sluice.Database, s *sluice.Schema, q BacklinkQuery, analyze bool) (string, error) {
	st, err := compileBacklinks(d, s, q, db.asOf(ctx, d.ID))
	if err != nil || st == nil {
		return "", err
	}
	return db.explain(ctx, st, analyze)
}

// compileBacklinks returns the statement of q, or nil when it reads no
// table or has no targets. Each target's documents are the page of a
// LATERAL subquery; the pages are joined in target order and cut at
// q.Total, then the rows' JSON is built and their commits joined, as
// compileQuery does for one query.
//
// A target's page costs what it holds in the default order (by id) of a
// single reference: the reference's index (column, then id) gives the
// target's documents in order, and the read stops at the page. The
// reference is matched as the range "from the target to the target" and
// sorted by first, which changes nothing (it is the target throughout)
// but is what makes Postgres read so: it plans the subquery once for
// every target, and for an equality with an unknown value it expects
// the average number of links (few), and would rather collect them all
// and sort them, which for a document with 200,000 links reads 200,000
// rows; for a range it expects a share of the table, and an ordered read
// that stops at the LIMIT wins.
//
// In another order, or for a list of references (whose GIN index finds
// the documents but has no order), a target's documents are found by
// the index, then sorted: the cost is what links to the target. They are
// found in a subquery of their own (OFFSET 0, which Postgres plans apart)
// so that Postgres never walks an index in the page's order testing each
// row for the target instead, which reads a whole table to fill the page
// of a document with few links.
//
// With past set, the documents are read as of past.Pos (see past.go).
func compileBacklinks(d *sluice.Database, s *sluice.Schema, q BacklinkQuery, past *AsOf) (*statement, error) {
	dq := q.Query
	if len(dq.Classes) == 0 || len(q.Targets) == 0 {
		return nil, nil
	}
	c := s.Class(dq.Class)
	if c == nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, "unknown class %q", dq.Class)
	}
	f := c.Field(q.Field)
	if f == nil || f.Type.Kind != sluice.TypeReference {
		return nil, sluice.Errorf(sluice.CodeInvalid, "%s.%s is not a reference", dq.Class, q.Field)
	}
	b := &sqlBuilder{db: d, schema: s, past: past}
	targets := b.arg(q.Targets)
	col := "t." + ident(f.Name)
	var where []string
	if f.List {
		where = append(where, fmt.Sprintf("%s @> jsonb_build_array(p.id)", col))
	} else {
		where = append(where, fmt.Sprintf(`%s COLLATE "C" >= p.id AND %s COLLATE "C" <= p.id`, col, col))
	}
	cond := "true"
	if dq.Filter != nil {
		var err error
		if cond, err = b.compileFilter(dq.Filter, scope{alias: "t"}); err != nil {
			return nil, err
		}
		if cond != "true" {
			where = append(where, cond)
		}
	}
	whereSQL := " WHERE " + strings.Join(where, " AND ")
	extra, order, err := unionOrder(c, dq.Order)
	if err != nil {
		return nil, err
	}
	// What of a target's list can be on its page: its first Limit +
	// Offset documents, and no more than Total + Offset (-1: all).
	cut := int64(-1)
	for _, n := range []int64{dq.Limit, q.Total} {
		if n >= 0 && (cut < 0 || n < cut) {
			cut = n
		}
	}
	if cut >= 0 {
		cut += min(dq.Offset, math.MaxInt64-cut)
	}
	pp := pastPage{cond: cond, extra: extra, order: order, cut: cut}
	ord := singleOrder(c, dq.Order)
	// As of a past position, a class's source holds its changed
	// documents' rows, a CTE with no index: read in each target's
	// subquery, every target scanned all of them (3,000 users' notes,
	// all changed since: 2.6 s, against 0.1 s now). They are matched to
	// the targets once instead, by a hash join on the reference, and each
	// target carries its share to its subquery (pastTargets).
	source := b.source
	var pastClasses []string
	if past != nil {
		source = func(class string) string {
			i := len(pastClasses)
			pastClasses = append(pastClasses, class)
			return b.pastSource(class, fmt.Sprintf("jsonb_to_recordset(p._r%d) AS x(%s)", i, b.pastColumns(class)))
		}
	}
	// driver returns the targets' relation, p(id, _k, …), once the
	// classes' sources are made.
	driver := func() string {
		p := "unnest(" + targets + "::text[]) WITH ORDINALITY p(id, _k)"
		if past == nil {
			return p
		}
		return b.pastTargets(p, pastClasses, f, targets, pp)
	}
	from := func(class string) string {
		return "(SELECT * FROM " + source(class) + " t" + whereSQL + " OFFSET 0) t"
	}
	if !f.List && (len(dq.Order) == 0 || dq.Order[0].Field == colID) {
		// Read in order from the index: the reference sorts first, in
		// the id's direction, so that the index (read backwards for a
		// descending order) gives the whole order.
		dir := direction(len(dq.Order) > 0 && dq.Order[0].Desc)
		extra = ", " + col + " AS lk" + extra
		order = `u.lk COLLATE "C"` + dir + ", " + order
		ord = col + ` COLLATE "C"` + dir + ", " + ord
		from = func(class string) string { return source(class) + " t" + whereSQL }
	}
	page := ""
	if dq.Limit >= 0 {
		page += limitSQL(dq.Limit)
	}
	if dq.Offset > 0 {
		page += " OFFSET " + b.arg(dq.Offset)
	}
	// The middle query cuts the pages of all targets at the bound: a
	// top-N sort that holds at most Total rows, whatever the pages hold.
	if len(dq.Classes) == 1 {
		// One table: its rows are read whole in the page, as a query of
		// one class reads them (compileQuery), and the JSON is built
		// only for the rows the bound keeps.
		total := ""
		if q.Total >= 0 {
			total = " ORDER BY p._k, " + ord + " LIMIT " + b.arg(q.Total)
		}
		// The row's JSON by the table's own class: c is the queried
		// one, which for a backlink to an interface with one document
		// class is the interface, whose fields alone were projected
		// (the class's own answered null).
		tc := s.Class(dq.Classes[0])
		if tc == nil {
			return nil, sluice.Errorf(sluice.CodeInvalid, "unknown class %q", dq.Classes[0])
		}
		lateral := from(dq.Classes[0]) // before driver()
		sql := "SELECT t._k, t." + colID + ", 0, CASE WHEN t._n = 1 THEN " + rowJSONSQL(tc, dq.Fields, "t") + " END, " + firstCommit + " FROM (" +
			"SELECT t.*, " + firstOfID("t") + " FROM (" +
			"SELECT p._k, t.* FROM " + driver() + " CROSS JOIN LATERAL (SELECT t.* FROM " +
			lateral + " ORDER BY " + ord + page + ") t" + total +
			") t) t LEFT JOIN sluice.commits c ON c.uid = t." + colCommitUID + " AND t._n = 1 ORDER BY t._k, " + ord
		return &statement{sql: b.pastStatement(sql), args: b.args, classes: dq.Classes}, nil
	}
	// Postgres merges ordered reads of the branches only outside a
	// LATERAL subquery: each branch is cut at the page's end itself, so
	// that what is sorted is at most a page per class.
	branch := from
	if dq.Limit >= 0 {
		// Saturated: an offset up to the largest bigint is accepted
		// (and answers an empty page, as a query of one class does),
		// and the sum of it and a limit would wrap negative, which
		// Postgres refuses.
		end := b.arg(dq.Limit + min(dq.Offset, math.MaxInt64-dq.Limit))
		branch = func(class string) string { return from(class) + " ORDER BY " + ord + " LIMIT " + end }
	}
	parts, joins, cases, err := unionBranches(b, dq.Classes, branch, extra, dq.Fields)
	if err != nil {
		return nil, err
	}
	for i := range parts {
		parts[i] = "(" + parts[i] + ")"
	}
	total := ""
	if q.Total >= 0 {
		total = " ORDER BY p._k, " + order + " LIMIT " + b.arg(q.Total)
	}
	sql := "SELECT u._k, u._id, u.cls, CASE WHEN u._n = 1 THEN CASE u.cls" + strings.Join(cases, "") + " END END, " + firstCommit + " FROM (" +
		"SELECT u.*, " + firstOfID("u") + " FROM (" +
		"SELECT p._k, u.* FROM " + driver() + " CROSS JOIN LATERAL (SELECT * FROM (" +
		strings.Join(parts, " UNION ALL ") + ") u ORDER BY " + order + page + ") u" + total +
		") u) u" + strings.Join(joins, "") + " LEFT JOIN sluice.commits c ON c.uid = u.uid AND u._n = 1 ORDER BY u._k, " + order
	return &statement{sql: b.pastStatement(sql), args: b.args, classes: dq.Classes}, nil
}

// pastPage is what of a backlink's page pastTargets needs to keep only
// the changed documents' rows that can be on a target's page: the
// filter's condition on a row (alias t), the sort columns (unionOrder's
// extra, of alias t) and order (of alias u), and how many of a target's
// first documents in that order its page can hold (cut; -1: all).
type pastPage struct {
	cond, extra, order string
	cut                int64
}

// pastTargets returns the targets' relation p (alias p: id, _k) of a
// backlink read as of b's past position, with, for the i-th of classes,
// the column _r<i>: the rows of the class's changed documents
// (pastRows) whose reference field f holds the target, as a JSON array
// of them (null when none), which the target's subquery reads back
// (jsonb_to_recordset, with pastColumns). The rows of all classes are
// matched to the targets in one join on the reference, hashed, rather
// than scanned again by each target. A list that names a target twice
// gives its row once, as the test of the list (@>) does. The rows go
// through JSON as the images they are typed from do (json_to_record):
// a Float keeps its exact value, as its text does (the connections'
// extra_float_digits is 3).
//
// Each array is built in memory, whole, by Postgres: only the rows that
// pass the page's filter and are among the target's first pg.cut in its
// order go in, so that it holds at most a page (its offset included),
// which the request's row budget bounds, however many changed documents
// link to the target. All of them went in, as many as the changes since
// the position (TestPastBacklinksAggregateAPage).
func (b *sqlBuilder) pastTargets(p string, classes []string, f *sluice.Field, targets string, pg pastPage) string {
	ref := "t." + ident(f.Name)
	where := ""
	if pg.cond != "true" {
		where = " AND " + pg.cond
	}
	var rows, aggs []string
	for i, class := range classes {
		from := fmt.Sprintf("SELECT %d AS cls, %s AS id, to_jsonb(t.*) AS j, t.%s%s FROM %s t WHERE %s = ANY(%s::text[])%s",
			i, ref, colID, pg.extra, b.pastRows(class), ref, targets, where)
		if f.List {
			from = fmt.Sprintf("SELECT %d AS cls, e.id, to_jsonb(t.*) AS j, t.%s%s FROM %s t CROSS JOIN LATERAL (SELECT DISTINCT e FROM jsonb_array_elements_text(%s) e) e(id) WHERE e.id = ANY(%s::text[])%s",
				i, colID, pg.extra, b.pastRows(class), ref, targets, where)
		}
		rows = append(rows, from)
		aggs = append(aggs, fmt.Sprintf(", jsonb_agg(x.j) FILTER (WHERE x.cls = %d) AS _r%d", i, i))
	}
	if len(rows) == 0 {
		return p
	}
	x := "SELECT u.cls, u.id, u.j FROM (" + strings.Join(rows, " UNION ALL ") + ") u"
	if pg.cut >= 0 {
		x = "SELECT x.cls, x.id, x.j FROM (SELECT u.cls, u.id, u.j, row_number() OVER (PARTITION BY u.id ORDER BY " + pg.order + ") AS _rn FROM (" +
			strings.Join(rows, " UNION ALL ") + ") u) x WHERE x._rn <= " + b.arg(pg.cut)
	}
	return "(SELECT p.id, p._k" + strings.Join(aggs, "") + " FROM " + p + " LEFT JOIN (" + x + ") x ON x.id = p.id GROUP BY p.id, p._k) p"
}

// firstOfID is the column _n of a backlink statement's rows (alias a):
// 1 on the first row of each document, in target order, which alone
// carries the document's JSON. A document that links to many targets is
// in each of their lists; built and sent once per target, one document
// listing 1,000 others with 1 MiB of text took 1.6 GB to read, whatever
// the response's bounds (they count it as it is written, after).
func firstOfID(a string) string {
	return "row_number() OVER (PARTITION BY " + a + "." + colID + " ORDER BY " + a + "._k) AS _n"
}

// firstCommit are the commit columns of a backlink statement's rows,
// joined on a document's first row only: a commit's message is up to
// 10,000 characters, and was read again on each of the document's rows.
const firstCommit = "c.seq, c.author, c.message, c.user_name, c.committed_at"

// backlinkRows reads the rows of a backlink statement: the target's
// number (from 1), the document's id, then a docRows row, whose JSON is
// null past the document's first row (firstOfID): those rows are the
// document read first. It records each row's target index.
type backlinkRows struct {
	docRows
	k       int64
	id      string
	targets []int
	read    map[string]QueryDoc
}

func (r *backlinkRows) dest() []any { return append([]any{&r.k, &r.id}, r.docRows.dest()...) }

func (r *backlinkRows) doc() (QueryDoc, error) {
	doc, ok := r.read[r.id]
	if r.raw != nil || !ok {
		var err error
		if doc, err = r.docRows.doc(); err != nil {
			return doc, err
		}
		if r.read == nil {
			r.read = map[string]QueryDoc{}
		}
		r.read[r.id] = doc
	}
	r.targets = append(r.targets, int(r.k-1))
	return doc, nil
}

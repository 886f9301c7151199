package postgres

import (
	"context"
	"fmt"
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
	st, err := compileBacklinks(d, s, q)
	if err != nil || st == nil {
		return out, err
	}
	rr := &backlinkRows{docRows: docRows{d: d, s: s, classes: st.classes}}
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
	st, err := compileBacklinks(d, s, q)
	if err != nil || st == nil {
		return "", err
	}
	return db.explain(ctx, st, analyze)
}

// compileBacklinks returns the statement of q, or nil when it reads no
// table or has no targets. Each target's documents are the page of a
// LATERAL subquery (the condition on the reference column first, where
// its index serves it and the order by id); the pages are joined in
// target order and cut at q.Total, then the rows' JSON is built and
// their commits joined, as compileQuery does for one query.
func compileBacklinks(d *sluice.Database, s *sluice.Schema, q BacklinkQuery) (*statement, error) {
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
	b := &sqlBuilder{db: d, schema: s}
	targets := b.arg(q.Targets)
	where := []string{backlinkCondition(f, "t", "p.id")}
	if dq.Filter != nil {
		cond, err := b.compileFilter(dq.Filter, scope{alias: "t"})
		if err != nil {
			return nil, err
		}
		if cond != "true" {
			where = append(where, cond)
		}
	}
	extra, order, err := unionOrder(c, dq.Order)
	if err != nil {
		return nil, err
	}
	parts, joins, cases, err := unionBranches(d, s, dq.Classes, " WHERE "+strings.Join(where, " AND "), extra, dq.Fields)
	if err != nil {
		return nil, err
	}
	page := ""
	if dq.Limit >= 0 {
		page += " LIMIT " + b.arg(dq.Limit)
	}
	if dq.Offset > 0 {
		page += " OFFSET " + b.arg(dq.Offset)
	}
	// The middle query cuts the pages of all targets at the bound: a
	// top-N sort that holds at most Total rows, whatever the pages hold.
	total := ""
	if q.Total >= 0 {
		total = " ORDER BY p._k, " + order + " LIMIT " + b.arg(q.Total)
	}
	sql := "SELECT u._k, u.cls, CASE u.cls" + strings.Join(cases, "") + " END, c.seq, c.author, c.message, c.committed_at FROM (" +
		"SELECT p._k, u.* FROM unnest(" + targets + "::text[]) WITH ORDINALITY p(id, _k) CROSS JOIN LATERAL (SELECT * FROM (" +
		strings.Join(parts, " UNION ALL ") + ") u ORDER BY " + order + page + ") u" + total +
		") u" + strings.Join(joins, "") + " LEFT JOIN sluice.commits c ON c.uid = u.uid ORDER BY u._k, " + order
	return &statement{sql: sql, args: b.args, classes: dq.Classes}, nil
}

// backlinkCondition returns the SQL condition "reference field f of the
// row alias holds the document id target (SQL text)". A single reference
// is compared in the "C" collation, the one its index is built in; a
// list is a jsonb array of ids, which its GIN index serves by
// containment.
func backlinkCondition(f *sluice.Field, alias, target string) string {
	col := alias + "." + ident(f.Name)
	if f.List {
		return fmt.Sprintf("%s @> jsonb_build_array(%s)", col, target)
	}
	return fmt.Sprintf(`%s COLLATE "C" = %s`, col, target)
}

// backlinkRows reads the rows of a backlink statement: the target's
// number (from 1), then a docRows row. It records each row's target
// index.
type backlinkRows struct {
	docRows
	k       int64
	targets []int
}

func (r *backlinkRows) dest() []any { return append([]any{&r.k}, r.docRows.dest()...) }

func (r *backlinkRows) doc() (QueryDoc, error) {
	doc, err := r.docRows.doc()
	if err == nil {
		r.targets = append(r.targets, int(r.k-1))
	}
	return doc, err
}

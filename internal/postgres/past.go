package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice"
)

// Reads of the past. The state of a class as of a position P is its
// current rows, less the documents changed after P, plus, for each of
// those, its image before the first change after P (none when that change
// inserted it). The log is read from P on, and only for the classes a
// statement reads; filters, ordering and limits then run over that union
// in Postgres, as they do over the table. So a page as of P costs what the
// same page costs now plus the changes since P to the classes read, and
// nothing of a class is held in memory.
//
// Every statement of a snapshot carrying an AsOf reads so (see
// Snapshot.SetAsOf): a query, the documents its references point to, a
// filter through a reference, a REST listing.
//
// How the statement is shaped decides whether Postgres can read a page in
// index order, so three rules hold:
//
//   - A current row is as it was at P unless the commit its _commit_uid
//     names came after P (a commit pruned since came before any position
//     that can be read). That test is a scalar subquery, an index probe
//     per row that Postgres keeps as a filter: as an anti-join it would
//     be planned from the statistics of _commit_uid, which one large
//     commit skews (a class loaded at once, then changed here and there,
//     looked almost all changed), and the whole class would be sorted.
//   - Each class's union has two branches without conditions of their
//     own: the table, and the class's past rows (a CTE of their own,
//     typed once); the test is a condition on the union. Postgres then
//     flattens the union and applies the condition to each branch, so an
//     index of the table serves the union's order (a Merge Append), and a
//     condition on the id reaches the table's primary key.
//   - A query of several classes (a parent and its subclasses) is one
//     flat union of every class's two branches (pastUnion), not a union
//     of unions, for the same reason.

// AsOf is a read of the past: the position read, and what of the images
// the log holds cannot be read through today's tables.
type AsOf struct {
	// Pos is the position read: the state after the change Pos names
	// (Index sluice.WholeCommit: after the whole commit).
	Pos sluice.Position
	// Drop lists, by class, the fields whose columns were made after Pos
	// (added, or dropped and made again with another type). No document
	// changed after Pos held a value of the column's type then, so their
	// images lose these fields; the engine says which of them held values
	// of another kind, which cannot be shown.
	Drop map[string][]string
}

// SetAsOf makes every read of the snapshot read the state as of a (nil:
// the present). Set it before the reads; the engine validates a.Pos
// against the snapshot's history first.
func (s *Snapshot) SetAsOf(a *AsOf) { s.asOf = a }

// asOf returns the past the reads of database dbID with ctx read, nil for
// the present.
func (db *DB) asOf(ctx context.Context, dbID int64) *AsOf {
	if s, ok := ctx.Value(snapshotKey{}).(*Snapshot); ok && s.d.ID == dbID && s.db == db {
		return s.asOf
	}
	return nil
}

// source returns the FROM source of class's rows: its table, or as of b's
// past position a relation with the table's columns (and _past).
func (b *sqlBuilder) source(class string) string {
	if b.past == nil {
		return classTable(b.db, class)
	}
	return b.pastSource(class, b.pastRows(class))
}

// pastSource returns the source of class's rows as of b's past position
// whose changed documents' rows are read from rows: the CTE pastRows, or
// a relation of the same columns holding some of its rows (pastColumns).
func (b *sqlBuilder) pastSource(class, rows string) string {
	cols := []string{colID, colCommitUID}
	for _, f := range b.schema.Class(class).Fields {
		cols = append(cols, ident(f.Name))
	}
	return fmt.Sprintf("(SELECT * FROM (SELECT %s, false AS _past FROM %s t UNION ALL SELECT * FROM %s) u WHERE %s)",
		"t."+strings.Join(cols, ", t."), classTable(b.db, class), rows, b.asItWas("u"))
}

// pastColumns returns the column definitions of class's pastRows, in
// order: to read its rows back from JSON (jsonb_to_recordset(...) AS
// x(defs)).
func (b *sqlBuilder) pastColumns(class string) string {
	defs := []string{colID + ` text COLLATE "C"`, colCommitUID + " bigint"}
	for _, f := range b.schema.Class(class).Fields {
		defs = append(defs, ident(f.Name)+" "+columnType(f))
	}
	return strings.Join(append(defs, "_past boolean"), ", ")
}

// pastRows returns the name of the CTE holding class's documents as they
// were at b's past position that were changed since (with _past true).
func (b *sqlBuilder) pastRows(class string) string {
	i := slices.Index(b.pastClasses, class)
	if i < 0 {
		i = len(b.pastClasses)
		b.pastClasses = append(b.pastClasses, class)
	}
	return fmt.Sprintf("past_%d", i)
}

// asItWas returns the condition that the row alias names, a current row
// or a past one (_past), is as it was at b's past position. A position
// inside a commit also leaves out the documents of that commit changed
// after it, which the log gives.
func (b *sqlBuilder) asItWas(alias string) string {
	cond := fmt.Sprintf("%[1]s._past OR coalesce((SELECT c.seq FROM sluice.commits c WHERE c.uid = %[1]s.%[2]s), 0) <= %[3]s",
		alias, colCommitUID, b.arg(b.past.Pos.Seq))
	if b.past.Pos.Index != sluice.WholeCommit {
		cond += fmt.Sprintf(" AND %s.%s NOT IN (SELECT p.id FROM past p)", alias, colID)
	}
	return "(" + cond + ")"
}

// with returns the WITH clause the sources of b need ("" when b reads the
// present): past, the first change after the past position of every
// document of the classes read, with the document's image before it, and
// for each class its rows from those images (pastRows).
//
// A row of sluice.changes holds a run of a commit's changes as arrays
// (migration 3); a row of insertions only holds the after images, which
// name the documents (migration 4), so their ids are read from them (the
// "@id" of an API document, the "_id" of a row written in SQL).
func (b *sqlBuilder) with() string {
	if b.past == nil || len(b.pastClasses) == 0 {
		return ""
	}
	p := b.past.Pos
	from := p.Seq // commit p.Seq's changes after p.Index count too
	if p.Index == sluice.WholeCommit {
		from = p.Seq + 1
	}
	// A row of one change carries its befores through the sort as
	// stored, unread (a TOAST pointer once large), and its image is read
	// from it for the first change of each document alone: sorting the
	// image before every change wrote the images of a document changed
	// many times to temporary files, for every statement of the read
	// (TestReadAsOfSortsNoImages). The images of a row of several
	// changes are still read and sorted: reading one of them from the
	// row's array would read the whole array, once per document.
	var w strings.Builder
	fmt.Fprintf(&w, `WITH past AS MATERIALIZED (
		SELECT f.id, f.cls, CASE WHEN f.one THEN f.img::json -> 0 ELSE f.img::json END AS img, f.uid
		FROM (SELECT DISTINCT ON (x.id COLLATE "C") x.id COLLATE "C" AS id, split_part(x.id, '/', 1) AS cls, c.uid,
				cardinality(ch.doc_ids) = 1 AS one, CASE WHEN cardinality(ch.doc_ids) = 1 THEN ch.befores ELSE x.img::text END AS img
			FROM sluice.commits c
			JOIN sluice.changes ch ON ch.commit_uid = c.uid
			CROSS JOIN LATERAL ROWS FROM (
				unnest(coalesce(ch.doc_ids, ARRAY(SELECT a ->> (CASE WHEN c.row_images THEN '_id' ELSE '@id' END)
					FROM json_array_elements(ch.afters::json) a))),
				json_array_elements(CASE WHEN cardinality(ch.doc_ids) = 1 THEN NULL ELSE ch.befores::json END)) WITH ORDINALITY AS x(id, img, n)
			WHERE c.db_id = %s AND c.seq >= %s AND (c.seq > %s OR ch.idx + x.n - 1 > %s)
				AND split_part(x.id, '/', 1) = ANY(%s::text[])
			ORDER BY x.id COLLATE "C", c.seq, ch.idx + x.n) f)`,
		b.arg(b.db.ID), b.arg(from), b.arg(p.Seq), b.arg(int64(p.Index)), b.arg(b.pastClasses))
	// The images are API documents ("@id", "@type", fields named as their
	// columns) or, for writes made in SQL, rows (row_to_json: the columns,
	// _commit_uid included); json_to_record reads both as the columns it
	// is given, ignoring other keys, and never reads a dropped field's
	// value (of another type, maybe). The image of a change Sluice made
	// does not say which commit wrote it: its _commit_uid is null
	// (_CommitMetadata is then unknown). (_past cannot be a field's name:
	// fields do not begin with "_".) A document the first change after
	// the position adds has no image there: no row as it was. Its before
	// image is SQL NULL in a row of insertions, but JSON null beside the
	// images of documents replaced in the same row (an upsert: PUT
	// ?create=true), which json_to_record refuses ("cannot call
	// populate_composite on a scalar"): every read as of a position
	// before such a commit failed.
	for i, class := range b.pastClasses {
		dropped := b.past.Drop[class]
		// An image that the commit of the change after it wrote (a
		// position inside a commit that changes the document again
		// later: two UPDATEs of one SQL transaction) is a state of the
		// document no commit's version names: its _commit_uid, that
		// commit's, is the version of the state after it. It has none,
		// as an image of Sluice's own writes has none: so no read
		// answers it a version, and no If-Match takes it.
		cols := []string{"p.id AS " + colID, "nullif(r." + colCommitUID + ", p.uid) AS " + colCommitUID}
		defs := []string{colCommitUID + " bigint"}
		for _, f := range b.schema.Class(class).Fields {
			col := ident(f.Name)
			if slices.Contains(dropped, f.Name) {
				cols = append(cols, "NULL::"+columnType(f)+" AS "+col)
				continue
			}
			cols = append(cols, "r."+col)
			defs = append(defs, col+" "+columnType(f))
		}
		fmt.Fprintf(&w, `, past_%d AS MATERIALIZED (SELECT %s, true AS _past
			FROM past p CROSS JOIN LATERAL json_to_record(p.img) AS r(%s)
			WHERE p.cls = %s AND json_typeof(p.img) = 'object')`,
			i, strings.Join(cols, ", "), strings.Join(defs, ", "), b.arg(class))
	}
	w.WriteString(" ")
	return w.String()
}

// pastStatement returns sql, built by b, with the WITH clause its sources
// need.
func (b *sqlBuilder) pastStatement(sql string) string {
	if w := b.with(); w != "" {
		return w + sql
	}
	return sql
}

// pastUnion returns the FROM source of a query of several classes (q.Class
// and its subclasses, q.Classes) as of b's past position: one flat union,
// two branches a class, whose rows are (_cls, the class's index in
// q.Classes; the id and commit uid; q.Class's fields, which every
// subclass has, for filters and ordering; _j, the row's JSON as docRows
// reads it; _past), and the condition (asItWas) each row must meet, on
// alias. The columns of its own are named with a leading "_", as no
// field's can be.
func (b *sqlBuilder) pastUnion(q DocQuery, alias string) (string, string) {
	parent := b.schema.Class(q.Class)
	var branches []string
	for i, name := range q.Classes {
		cols := []string{fmt.Sprint(i), "%[1]s." + colID, "%[1]s." + colCommitUID}
		for _, f := range parent.Fields {
			cols = append(cols, "%[1]s."+ident(f.Name))
		}
		list := strings.Join(cols, ", ")
		branches = append(branches,
			fmt.Sprintf("SELECT "+fmt.Sprintf(list, "t")+", %s AS j, false AS _past FROM %s t", rowJSONSQL(b.schema.Class(name), q.Fields, "t"), classTable(b.db, name)),
			fmt.Sprintf("SELECT "+fmt.Sprintf(list, "x")+", to_jsonb(x.*), true FROM %s x", b.pastRows(name)))
	}
	cols := []string{"_cls", colID, colCommitUID}
	for _, f := range parent.Fields {
		cols = append(cols, ident(f.Name))
	}
	cols = append(cols, "_j", "_past")
	return "(" + strings.Join(branches, " UNION ALL ") + ") " + alias + "(" + strings.Join(cols, ", ") + ")", b.asItWas(alias)
}

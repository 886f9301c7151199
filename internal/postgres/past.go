package postgres

import (
	"context"
	"fmt"
	"slices"

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
// past position a relation with the same columns.
func (b *sqlBuilder) source(class string) string {
	if b.past == nil {
		return tableName(b.db.ID, class)
	}
	if !slices.Contains(b.pastClasses, class) {
		b.pastClasses = append(b.pastClasses, class)
	}
	tbl := tableName(b.db.ID, class)
	drop := b.past.Drop[class]
	if drop == nil {
		drop = []string{}
	}
	// The images are API documents ("@id", "@type", fields named as their
	// columns) or, for writes made in SQL, rows (row_to_json: the columns,
	// _commit_uid included); jsonb_populate_record reads both as a row of
	// the table, ignoring keys that are no column. The image of a change
	// Sluice made does not say which commit wrote it: its _commit_uid is
	// null (_CommitMetadata is then unknown).
	return fmt.Sprintf(`(SELECT t.* FROM %[1]s t WHERE NOT EXISTS (SELECT 1 FROM past p WHERE p.id = t.%[2]s)
		UNION ALL SELECT r.* FROM past p CROSS JOIN LATERAL jsonb_populate_record(NULL::%[1]s,
			(p.img::jsonb - %[3]s::text[]) || jsonb_build_object('%[2]s', p.id)) r
		WHERE p.cls = %[4]s AND p.img IS NOT NULL)`, tbl, colID, b.arg(drop), b.arg(class))
}

// with returns the WITH clause the sources of b need ("" when b reads the
// present): the first change after the past position of every document of
// the classes read, with the document's image before it.
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
	return fmt.Sprintf(`WITH past AS MATERIALIZED (
		SELECT DISTINCT ON (x.id) x.id COLLATE "C" AS id, split_part(x.id, '/', 1) AS cls, x.img
		FROM sluice.commits c
		JOIN sluice.changes ch ON ch.commit_uid = c.uid
		CROSS JOIN LATERAL (
			SELECT u.id, ch.idx + u.n - 1 AS i, u.img
			FROM ROWS FROM (unnest(ch.doc_ids), json_array_elements(ch.befores::json)) WITH ORDINALITY AS u(id, img, n)
			WHERE ch.doc_ids IS NOT NULL
			UNION ALL
			SELECT a.img ->> (CASE WHEN c.row_images THEN '_id' ELSE '@id' END), ch.idx + a.n - 1, NULL::json
			FROM json_array_elements(ch.afters::json) WITH ORDINALITY AS a(img, n)
			WHERE ch.doc_ids IS NULL) x
		WHERE c.db_id = %s AND c.seq >= %s AND (c.seq > %s OR x.i > %s)
			AND split_part(x.id, '/', 1) = ANY(%s::text[])
		ORDER BY x.id, c.seq, x.i) `,
		b.arg(b.db.ID), b.arg(from), b.arg(p.Seq), b.arg(int64(p.Index)), b.arg(b.pastClasses))
}

// pastStatement returns sql, built by b, with the WITH clause its sources
// need.
func (b *sqlBuilder) pastStatement(sql string) string {
	if w := b.with(); w != "" {
		return w + sql
	}
	return sql
}

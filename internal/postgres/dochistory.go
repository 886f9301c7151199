package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// A document's history is read from the log, newest first. The log has no
// index by document (one would cost every write; see migration 3), so a
// page reads the log back from its cursor, at most HistoryScanRows rows of
// sluice.changes (a row holds a run of changes of one commit, with at
// most 1 MiB of images or one larger change),
// and says where the next page goes on: a page of a long log may hold
// fewer versions than asked, even none, and still not be the last. Rows
// that list their ids are matched by them; a row of insertions, which
// does not (migration 4), by its after images' text, and confirmed by
// reading the images of the rows that match. Of the commit a cursor is
// inside, the rows after it are read too: a change has the commit's
// version only when it is the document's last in the commit (Final).

// HistoryScanRows bounds the rows of the log one page of a document's
// history reads.
const HistoryScanRows = 10000

// VersionPage is one page of a document's versions.
type VersionPage struct {
	// Versions are newest first: each a commit (without its other
	// changes) holding the one change that made the version.
	Versions []*sluice.Commit
	// Final holds, for each of Versions, whether its change is the
	// document's last in its commit: only then is the commit's version
	// (sluice.VersionOf its UID) the document's version after it. A
	// commit that changes a document twice (two UPDATEs of one SQL
	// transaction) makes a version first that no read answers and no
	// If-Match may take.
	Final []bool
	// Next is the position the next page reads before; More reports
	// whether there may be one (the log goes on before Next).
	Next sluice.Position
	More bool
	// Pruned, set by the engine on a page that reached the oldest
	// retained commit, is the end of the newest pruned commit when the
	// document existed there: its versions before it were pruned.
	Pruned *sluice.Position
}

// DocumentHistory returns up to limit versions of document id of database
// d with a position before before (sluice.Position{Seq: 1<<63 - 1}: from
// the newest), newest first, with after images of at most maxBytes in all
// (at least one version). It reads at most HistoryScanRows rows of the log;
// the caller checks that before is within retained history.
func (db *DB) DocumentHistory(ctx context.Context, d *sluice.Database, id string, before sluice.Position, limit int, maxBytes int64) (*VersionPage, error) {
	if err := checkText("document id", id); err != nil {
		return nil, err
	}
	q := db.reader(ctx, d.ID)
	// Where the scan ends: the HistoryScanRows-th row before the cursor,
	// read from the indexes alone.
	var loSeq int64
	var loIdx int
	bounded := true
	err := q.QueryRow(ctx, `SELECT c.seq, ch.idx FROM sluice.commits c JOIN sluice.changes ch ON ch.commit_uid = c.uid
		WHERE c.db_id = $1 AND c.seq <= $2 AND (c.seq < $2 OR ch.idx < $3)
		ORDER BY c.seq DESC, ch.idx DESC OFFSET $4 LIMIT 1`, d.ID, before.Seq, before.Index, db.opts.historyScanRows-1).Scan(&loSeq, &loIdx)
	if errors.Is(err, pgx.ErrNoRows) {
		bounded, loSeq, loIdx = false, 0, 0
	} else if err != nil {
		return nil, mapError(err)
	}
	needle := append(append([]byte(`{"@id":`), appendJSONString(nil, id)...), ',')
	// final: whether the change is the document's last in its commit,
	// whose version (its uid) is the document's after it: of the commit
	// the page starts in, the changes after the cursor are read for it
	// too (of the commit it ends in, earlier changes do not matter).
	rows, err := q.Query(ctx, `SELECT seq, uid, author, message, user_name, committed_at, n_changes, row_images, i, op, after, final, total
		FROM (SELECT w.*, count(*) OVER () AS total,
				sum(coalesce(octet_length(w.after::text), 0)) OVER (ORDER BY w.seq DESC, w.i DESC) AS upto,
				row_number() OVER (ORDER BY w.seq DESC, w.i DESC) AS n
			FROM (SELECT s.seq, s.uid, s.author, s.message, s.user_name, s.committed_at, s.n_changes, s.row_images, v.i, v.op, v.after,
					v.i = max(v.i) OVER (PARTITION BY s.seq) AS final
				FROM (SELECT c.seq, c.uid, c.author, c.message, c.user_name, c.committed_at, c.n_changes, c.row_images, ch.idx, ch.doc_ids, ch.ops, ch.afters
					FROM sluice.commits c JOIN sluice.changes ch ON ch.commit_uid = c.uid
					WHERE c.db_id = $1 AND c.seq BETWEEN $4 AND $2 AND (c.seq > $4 OR ch.idx >= $5)
						AND (ch.doc_ids @> ARRAY[$6::text] OR ch.doc_ids IS NULL AND strpos(ch.afters, $7) > 0)) s
				CROSS JOIN LATERAL (
					SELECT s.idx + u.n - 1 AS i, u.op, u.after
					FROM ROWS FROM (unnest(s.doc_ids), unnest(s.ops), json_array_elements(s.afters::json)) WITH ORDINALITY AS u(id, op, after, n)
					WHERE s.doc_ids IS NOT NULL AND u.id = $6
					UNION ALL
					SELECT s.idx + a.n - 1, 1::smallint, a.after
					FROM json_array_elements(s.afters::json) WITH ORDINALITY AS a(after, n)
					WHERE s.doc_ids IS NULL AND a.after ->> '@id' = $6) v) w
			WHERE w.seq < $2 OR w.i < $3) page
		WHERE n <= $8 AND (n = 1 OR upto <= $9)
		ORDER BY seq DESC, i DESC`,
		d.ID, before.Seq, before.Index, loSeq, loIdx, id, string(needle), limit+1, maxBytes)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	page := &VersionPage{}
	var total int
	for rows.Next() {
		c := &sluice.Commit{DatabaseID: d.ID, Epoch: d.Epoch}
		var ch sluice.Change
		var op int16
		var after []byte
		var final bool
		if err := rows.Scan(&c.Seq, &c.UID, &c.Author, &c.Message, &c.User, &c.Time, &c.NumChanges, &c.RowImages, &ch.Index, &op, &after, &final, &total); err != nil {
			return nil, mapError(err)
		}
		if op < int16(sluice.OpAdded) || op > int16(sluice.OpDeleted) {
			return nil, fmt.Errorf("history of %s: change %d of commit %d has op %d", id, ch.Index, c.Seq, op)
		}
		ch.Class, _, _ = strings.Cut(id, "/")
		ch.DocID, ch.Op = id, sluice.Op(op)
		if after != nil && string(after) != "null" {
			ch.After = after
		}
		c.Changes = []sluice.Change{ch}
		page.Versions = append(page.Versions, c)
		page.Final = append(page.Final, final)
	}
	if err := rows.Err(); err != nil {
		return nil, mapError(err)
	}
	rows.Close()
	if len(page.Versions) > limit {
		page.Versions, page.Final = page.Versions[:limit], page.Final[:limit]
	}
	switch {
	case total > len(page.Versions):
		// The count or the byte budget ended the page: the next one
		// goes on from its last version.
		last := page.Versions[len(page.Versions)-1]
		page.Next, page.More = last.Position(last.Changes[0].Index), true
	case bounded:
		// The scan ended it: the next one goes on from where it
		// stopped.
		page.Next, page.More = sluice.Position{Epoch: d.Epoch, Seq: loSeq, Index: loIdx}, true
	}
	if err := db.documentImages(ctx, d, page.Versions); err != nil {
		return nil, err
	}
	return page, nil
}

// DocumentChangeAfter returns the op of the first change of document id
// of database d at or after position from (the changes of commit from.Seq
// from from.Index on, then those of later commits), and false when the log
// holds none. A page of history that holds no version reads it to know
// whether the document existed at its cursor. It reads the log forward
// from from, HistoryScanRows rows at a time, each run a statement of its
// own, until it finds one or reaches the newest commit: it costs the rows
// between from and that change, no more than the pages of history that
// went back from there to from read.
func (db *DB) DocumentChangeAfter(ctx context.Context, d *sluice.Database, id string, from sluice.Position) (sluice.Op, bool, error) {
	if err := checkText("document id", id); err != nil {
		return 0, false, err
	}
	q := db.reader(ctx, d.ID)
	needle := append(append([]byte(`{"@id":`), appendJSONString(nil, id)...), ',')
	// Each run reads the rows after (loSeq, loIdx), up to and including
	// (hiSeq, hiIdx); the first takes every row of commit from.Seq, whose
	// changes before from.Index are left out one by one (a row holds a
	// run of changes).
	loSeq, loIdx := from.Seq, -1
	for {
		hiSeq, hiIdx := int64(math.MaxInt64), math.MaxInt32
		last := false
		err := q.QueryRow(ctx, `SELECT c.seq, ch.idx FROM sluice.commits c JOIN sluice.changes ch ON ch.commit_uid = c.uid
			WHERE c.db_id = $1 AND c.seq >= $2 AND (c.seq > $2 OR ch.idx > $3)
			ORDER BY c.seq, ch.idx OFFSET $4 LIMIT 1`, d.ID, loSeq, loIdx, db.opts.historyScanRows-1).Scan(&hiSeq, &hiIdx)
		if errors.Is(err, pgx.ErrNoRows) {
			last = true
		} else if err != nil {
			return 0, false, mapError(err)
		}
		var op int16
		err = q.QueryRow(ctx, `SELECT v.op
			FROM (SELECT c.seq, ch.idx, ch.doc_ids, ch.ops, ch.afters
				FROM sluice.commits c JOIN sluice.changes ch ON ch.commit_uid = c.uid
				WHERE c.db_id = $1 AND c.seq BETWEEN $2 AND $4 AND (c.seq > $2 OR ch.idx > $3) AND (c.seq < $4 OR ch.idx <= $5)
					AND (ch.doc_ids @> ARRAY[$6::text] OR ch.doc_ids IS NULL AND strpos(ch.afters, $7) > 0)) s
			CROSS JOIN LATERAL (
				SELECT s.idx + u.n - 1 AS i, u.op
				FROM ROWS FROM (unnest(s.doc_ids), unnest(s.ops)) WITH ORDINALITY AS u(id, op, n)
				WHERE s.doc_ids IS NOT NULL AND u.id = $6
				UNION ALL
				SELECT s.idx + a.n - 1, 1::smallint
				FROM json_array_elements(s.afters::json) WITH ORDINALITY AS a(after, n)
				WHERE s.doc_ids IS NULL AND a.after ->> '@id' = $6) v
			WHERE s.seq > $8 OR v.i >= $9
			ORDER BY s.seq, v.i LIMIT 1`,
			d.ID, loSeq, loIdx, hiSeq, hiIdx, id, string(needle), from.Seq, from.Index).Scan(&op)
		switch {
		case err == nil:
			return sluice.Op(op), true, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return 0, false, mapError(err)
		case last:
			return 0, false, nil
		}
		loSeq, loIdx = hiSeq, hiIdx
	}
}

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// A diff between two positions is computed by Postgres from the log
// between them: for each document changed, its image before the first
// change after the first position and after the last change up to the
// second. Every page reads that part of the log again, ordered by
// document id from the page's cursor on, so a page holds only its own
// documents in memory (Postgres sorts the rest, within work_mem or on
// disk, by their ids and positions alone), whatever the size of the
// diff.

// DiffQuery selects a page of the difference between two states.
type DiffQuery struct {
	// From and To are the two positions (From not after To).
	From, To sluice.Position
	// Classes, when not nil, keeps only documents of these classes; IDs,
	// when not nil, only these documents.
	Classes, IDs []string
	// After is the id the page starts after ("": the first).
	After string
	// Limit bounds the documents of the page, MaxBytes their images (at
	// least one document).
	Limit    int
	MaxBytes int64
}

// DiffEntry is one document changed between the two positions.
type DiffEntry struct {
	ID string
	// Before holds the document's image before the first change after
	// From (in Changes[0].Before); After its image after the last change
	// up to To (in Changes[0].After).
	Before, After *sluice.Commit
}

// DiffPage is one page of a diff, by document id.
type DiffPage struct {
	Entries []DiffEntry
	// Next is the After of the next page; More reports whether there is
	// one.
	Next string
	More bool
}

// Diff returns a page of the documents of database d changed between
// q.From and q.To (see DiffQuery), ordered by id (byte order). The caller
// checks both positions against retained history.
func (db *DB) Diff(ctx context.Context, d *sluice.Database, q DiffQuery) (*DiffPage, error) {
	if err := checkText("document id", q.After); err != nil {
		return nil, err
	}
	for _, id := range q.IDs {
		if err := checkText("document id", id); err != nil {
			return nil, err
		}
	}
	fromSeq := q.From.Seq // commit From.Seq's changes after From.Index count too
	if q.From.Index == sluice.WholeCommit {
		fromSeq++
	}
	var classes, ids any // NULL: no filter
	if q.Classes != nil {
		classes = q.Classes
	}
	if q.IDs != nil {
		ids = q.IDs
	}
	// The changes are sorted by document without their images (each row
	// names its commit and the row of sluice.changes holding it), and only
	// the page's documents' two images are read, by the row's key: every
	// image of the range, carried through the sorts, made each page write
	// several times the range's images to temporary files.
	rows, err := db.reader(ctx, d.ID).Query(ctx, `WITH ch AS MATERIALIZED (
			SELECT x.id COLLATE "C" AS id, c.seq, x.i, c.uid, ch.idx AS row_idx, c.row_images
			FROM sluice.commits c
			JOIN sluice.changes ch ON ch.commit_uid = c.uid
			CROSS JOIN LATERAL (
				SELECT u.id, ch.idx + u.n - 1 AS i
				FROM unnest(ch.doc_ids) WITH ORDINALITY AS u(id, n)
				WHERE ch.doc_ids IS NOT NULL
				UNION ALL
				SELECT a.after ->> (CASE WHEN c.row_images THEN '_id' ELSE '@id' END), ch.idx + a.n - 1
				FROM json_array_elements(ch.afters::json) WITH ORDINALITY AS a(after, n)
				WHERE ch.doc_ids IS NULL) x
			WHERE c.db_id = $1 AND c.seq BETWEEN $2 AND $4
				AND (c.seq > $3 OR x.i > $5) AND (c.seq < $4 OR x.i <= $6)
				AND x.id COLLATE "C" > $7
				AND ($8::text[] IS NULL OR split_part(x.id, '/', 1) = ANY($8))
				AND ($9::text[] IS NULL OR x.id = ANY($9)))
		SELECT p.id, p.fseq, p.frow, b.img, p.lseq, p.lrow, a.img,
			coalesce(octet_length(b.img::text), 0) + coalesce(octet_length(a.img::text), 0)
		FROM (SELECT f.id, f.seq AS fseq, f.row_images AS frow, f.uid AS fuid, f.row_idx AS fidx, f.i AS fi,
				l.seq AS lseq, l.row_images AS lrow, l.uid AS luid, l.row_idx AS lidx, l.i AS li
			FROM (SELECT DISTINCT ON (id) id, seq, i, uid, row_idx, row_images FROM ch ORDER BY id, seq, i) f
			JOIN (SELECT DISTINCT ON (id) id, seq, i, uid, row_idx, row_images FROM ch ORDER BY id, seq DESC, i DESC) l ON l.id = f.id
			ORDER BY f.id
			LIMIT $10) p
		LEFT JOIN LATERAL (SELECT (r.befores::json) -> (p.fi - p.fidx)::int AS img
			FROM sluice.changes r WHERE r.commit_uid = p.fuid AND r.idx = p.fidx) b ON true
		LEFT JOIN LATERAL (SELECT (r.afters::json) -> (p.li - p.lidx)::int AS img
			FROM sluice.changes r WHERE r.commit_uid = p.luid AND r.idx = p.lidx) a ON true
		ORDER BY p.id`,
		d.ID, fromSeq, q.From.Seq, q.To.Seq, int64(q.From.Index), int64(q.To.Index), q.After, classes, ids, q.Limit+1)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	page := &DiffPage{}
	var used int64
	var images []*sluice.Commit
	for rows.Next() {
		var e DiffEntry
		var b, a sluice.Commit
		var before, after []byte
		var size int64
		if err := rows.Scan(&e.ID, &b.Seq, &b.RowImages, &before, &a.Seq, &a.RowImages, &after, &size); err != nil {
			return nil, mapError(err)
		}
		if len(page.Entries) == q.Limit || len(page.Entries) > 0 && used+size > q.MaxBytes {
			page.More = true
			break // Close discards the rest unread
		}
		used += size
		class, _, _ := strings.Cut(e.ID, "/")
		ch := sluice.Change{Class: class, DocID: e.ID}
		b.DatabaseID, b.Epoch, a.DatabaseID, a.Epoch = d.ID, d.Epoch, d.ID, d.Epoch
		b.Changes, a.Changes = []sluice.Change{ch}, []sluice.Change{ch}
		b.Changes[0].Before, a.Changes[0].After = image(before), image(after)
		e.Before, e.After = &b, &a
		page.Entries = append(page.Entries, e)
		images = append(images, &b, &a)
		page.Next = e.ID
	}
	if err := rows.Err(); err != nil {
		return nil, mapError(err)
	}
	rows.Close()
	if err := db.documentImages(ctx, d, images); err != nil {
		return nil, err
	}
	return page, nil
}

// DiffRange is how many changes the log between two positions holds, as
// far as DB.DiffRange counts them.
type DiffRange struct {
	// Over reports whether the log holds more than the most changes
	// asked for, or (ByCommits) more than that many commits and one
	// after from's; Fits, then, is the furthest position after from up
	// to which it holds neither.
	Over, ByCommits bool
	Fits            sluice.Position
}

// DiffRange reports whether the log of database d between from and to
// (from not after to, both retained) holds more than most changes (most
// at least 1). It reads the commits' rows alone, through their key, and
// at most most+2 of them, so that it costs what most allows whatever the
// range: a commit holds a change but for those written without any, so
// that many commits hold more than most changes after from's own, or
// are over by themselves.
func (db *DB) DiffRange(ctx context.Context, d *sluice.Database, from, to sluice.Position, most int64) (DiffRange, error) {
	var r rangeRow
	err := db.reader(ctx, d.ID).QueryRow(ctx, rangeSQL("$5", "$4", "$6", "$7", "$8"),
		d.ID, rangeFromSeq(from), from.Seq, to.Seq, int64(from.Index), int64(to.Index), most+2, most).Scan(&r.seq, &r.n, &r.upto, &r.prev, &r.first)
	if errors.Is(err, pgx.ErrNoRows) {
		return DiffRange{}, nil
	} else if err != nil {
		return DiffRange{}, mapError(err)
	}
	return r.over(d, from, most), nil
}

// PastRange returns the history of database d (as History does),
// whether the log from position from (retained, not ahead of it) to its
// head holds more than most changes (most at least 1), counted as
// DiffRange counts them, and, when the checks of client position from
// need it (NamesCommit), the commit it names (as PositionCommit), in one
// statement: so a read of the past that begins with it (its snapshot's
// first statement) learns all of it in the one round trip that begins it.
func (db *DB) PastRange(ctx context.Context, d *sluice.Database, from sluice.Position, most int64) (sluice.History, DiffRange, PositionCommit, error) {
	var h sluice.History
	var r struct{ seq, n, upto, prev, first *int64 }
	var n *int
	var uid *int64
	var at *time.Time
	err := db.reader(ctx, d.ID).QueryRow(ctx, `SELECT h.last_seq, h.pruned_seq, r.seq, r.n, r.upto, r.prev, r.first, c.n_changes, c.uid, c.committed_at
		FROM sluice.commit_counters h LEFT JOIN LATERAL (`+rangeSQL("$4", "h.last_seq", strconv.Itoa(sluice.WholeCommit), "$5", "$6")+`) r ON true
		LEFT JOIN sluice.commits c ON $7 AND c.db_id = h.db_id AND c.seq = $3
		WHERE h.db_id = $1`,
		d.ID, rangeFromSeq(from), from.Seq, int64(from.Index), most+2, most, NamesCommit(from)).Scan(&h.LastSeq, &h.PrunedSeq, &r.seq, &r.n, &r.upto, &r.prev, &r.first, &n, &uid, &at)
	if errors.Is(mapError(err), errNotFound) {
		return h, DiffRange{}, PositionCommit{}, sluice.Errorf(sluice.CodeNotFound, "database %d does not exist", d.ID)
	} else if err != nil {
		return h, DiffRange{}, PositionCommit{}, mapError(err)
	}
	c := positionCommit(n, uid, at)
	if r.seq == nil {
		return h, DiffRange{}, c, nil
	}
	return h, rangeRow{*r.seq, *r.n, *r.upto, *r.first, r.prev}.over(d, from, most), c, nil
}

// OldestPast returns the oldest position of database d from which the
// log to its head holds at most most changes (most at least 1), counted
// as DiffRange counts them, reading at most most+2 commits' rows, the
// newest; ok is false when every retained position is such. byCommits
// reports that the log from the end of any commit before p's holds more
// than most commits (written without changes) but not more than most
// changes.
func (db *DB) OldestPast(ctx context.Context, d *sluice.Database, most int64) (p sluice.Position, byCommits, ok bool, err error) {
	// Going back from the head, the first commit at which the changes
	// after its start (upto, its own included) pass most, or that is one
	// commit too many.
	var seq, n, upto, k int64
	err = db.reader(ctx, d.ID).QueryRow(ctx, `SELECT seq, n_changes, upto, k FROM (
			SELECT seq, n_changes, sum(n_changes) OVER w AS upto, row_number() OVER w AS k
			FROM (SELECT seq, n_changes FROM sluice.commits WHERE db_id = $1 ORDER BY seq DESC LIMIT $2) c
			WINDOW w AS (ORDER BY seq DESC)) r
		WHERE upto > $3 OR k = $2
		ORDER BY seq DESC LIMIT 1`, d.ID, most+2, most).Scan(&seq, &n, &upto, &k)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, false, nil
	} else if err != nil {
		return p, false, false, mapError(err)
	}
	p = sluice.Position{Epoch: d.Epoch, Seq: seq, Index: sluice.WholeCommit}
	if k < most+2 && upto-n < most {
		// Its last changes fit, as many as most leaves.
		p.Index = int(upto - most - 1)
	}
	// Its row passes most by its changes, or else by being one commit
	// too many.
	return p, upto <= most, true, nil
}

// rangeFromSeq is the first commit of the log after position from that
// holds changes after it: from's own when from is inside it.
func rangeFromSeq(from sluice.Position) int64 {
	if from.Index == sluice.WholeCommit {
		return from.Seq + 1
	}
	return from.Seq
}

// rangeSQL returns the statement that finds the first commit of a range
// of the log at which it passes a bound: parameters $1 the database, $2
// the range's first commit (rangeFromSeq), $3 the sequence of its start;
// the others are the SQL of the index of its start (fromIndex), of the
// sequence and index of its end (to, toIndex), and of most+2 and most of
// the bound (rows, most). Its row is a rangeRow, none when the range is
// within the bound.
func rangeSQL(fromIndex, to, toIndex, rows, most string) string {
	// n: the changes of each commit in the range (those of from's commit
	// after from.Index, those of to's up to to.Index); first: the index
	// of its first.
	return strings.NewReplacer("$FROM_INDEX", fromIndex, "$TO_INDEX", toIndex, "$TO", to, "$ROWS", rows, "$MOST", most).Replace(`SELECT seq, n, upto, prev, first FROM (
			SELECT seq, n, first, sum(n) OVER w AS upto, lag(seq) OVER w AS prev, row_number() OVER w AS k
			FROM (SELECT seq,
					greatest(0, CASE WHEN seq = $TO THEN least(n_changes, $TO_INDEX::bigint + 1) ELSE n_changes END
						- CASE WHEN seq = $3 THEN least(n_changes, $FROM_INDEX::bigint + 1) ELSE 0 END) AS n,
					CASE WHEN seq = $3 THEN $FROM_INDEX::bigint + 1 ELSE 0 END AS first
				FROM sluice.commits WHERE db_id = $1 AND seq BETWEEN $2 AND $TO
				ORDER BY seq LIMIT $ROWS) c
			WINDOW w AS (ORDER BY seq)) r
		WHERE upto > $MOST OR k = $ROWS
		ORDER BY seq LIMIT 1`)
}

// rangeRow is the row of rangeSQL: the commit seq at which the range
// passes the bound, its changes n in the range, upto those of the range
// up to it, the index of its first first, and the commit before it.
type rangeRow struct {
	seq, n, upto, first int64
	prev                *int64
}

// over returns the DiffRange of a range from position from that the row
// says passes most.
func (r rangeRow) over(d *sluice.Database, from sluice.Position, most int64) DiffRange {
	// The commit at seq passes most: the changes before it, and as many
	// of its own as most leaves, fit (all of the commits before it when
	// it was the last read and none passed most).
	before := r.upto - r.n
	if r.upto <= most || before >= most {
		fits := from // never: a commit before seq was read
		if r.prev != nil {
			fits = sluice.Position{Epoch: d.Epoch, Seq: *r.prev, Index: sluice.WholeCommit}
		}
		return DiffRange{Over: true, ByCommits: r.upto <= most, Fits: fits}
	}
	return DiffRange{Over: true, Fits: sluice.Position{Epoch: d.Epoch, Seq: r.seq, Index: int(r.first + most - before - 1)}}
}

// image returns a JSON image read from the log, nil for none.
func image(b []byte) json.RawMessage {
	if b == nil || string(b) == "null" {
		return nil
	}
	return b
}

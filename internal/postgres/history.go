package postgres

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice"
)

// Pages of history (/api/changes, /api/log) are bounded in bytes as well as
// in commits, so that a response holds a bounded amount of memory however
// large the commits are. Each page is read in two statements: the first
// reads only sizes (octet_length reads a stored value's header, not the
// value) and decides where the page ends; the second reads exactly the rows
// the page holds, and no more.

// maxPlanRows bounds the rows of sluice.changes one page plans from, so that
// planning a page is bounded too; a page of very many small changes ends
// there.
const maxPlanRows = 4096

// plannedCommit is a commit a page holds, and which of its rows.
type plannedCommit struct {
	seq        int64
	n          int // all of its changes
	head       int64
	rows       int // planned rows of sluice.changes
	firstIdx   int
	lastIdx    int
	startIndex int // its first change in the page
}

// Changes returns the page of database d's change log that comes after
// position after: the changes with a greater (Seq, Index), where Index -1
// means "from the start of commit Seq". The page holds at most limit
// commits, and change images and commit text of at most maxBytes bytes,
// except that it always holds at least one change (or one commit without
// changes) when there is one. The caller checks that after is within
// retained history (see History); a page that would start in history
// pruned meanwhile gives a Gone error.
func (db *DB) Changes(ctx context.Context, d *sluice.Database, after sluice.Position, limit int, maxBytes int64) (*sluice.ChangePage, error) {
	plan, more, err := db.planChanges(ctx, d, after, limit, maxBytes)
	if err != nil || len(plan) == 0 {
		return &sluice.ChangePage{}, err
	}
	page := &sluice.ChangePage{Commits: make([]*sluice.Commit, 0, len(plan)), More: more}
	first, last := plan[0], plan[len(plan)-1]
	lastIdx := last.lastIdx
	if last.rows == 0 {
		lastIdx = sluice.WholeCommit
	}
	// The uid, with the time, tags the page's positions (Commit.Position).
	rows, err := db.reader(ctx, d.ID).Query(ctx, `SELECT c.seq, c.uid, c.author, c.message, c.user_name, c.committed_at, c.n_changes, c.row_images,
			ch.idx, ch.doc_ids, ch.ops, ch.befores, ch.afters
		FROM sluice.commits c
		LEFT JOIN sluice.changes ch ON ch.commit_uid = c.uid
			AND (c.seq > $2 OR ch.idx >= $3) AND (c.seq < $4 OR ch.idx <= $5)
		WHERE c.db_id = $1 AND c.seq BETWEEN $2 AND $4
		ORDER BY c.seq, ch.idx`, d.ID, first.seq, first.firstIdx, last.seq, lastIdx)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	var used int64
	var c *sluice.Commit
	var p *plannedCommit
	full := false // the budget cut the page inside a row
read:
	for rows.Next() {
		var seq int64
		var hdr sluice.Commit
		var idx *int
		var ids []string
		var ops []int16
		var befores, afters []byte
		if err := rows.Scan(&seq, &hdr.UID, &hdr.Author, &hdr.Message, &hdr.User, &hdr.Time, &hdr.NumChanges, &hdr.RowImages,
			&idx, &ids, &ops, &befores, &afters); err != nil {
			return nil, mapError(err)
		}
		if c == nil || c.Seq != seq {
			if c == nil && seq != first.seq {
				return nil, goneWhileReading(d, after)
			}
			p = &plan[len(page.Commits)]
			if seq != p.seq {
				return nil, fmt.Errorf("changes of %s: commit %d read where %d was planned", d.Path(), seq, p.seq)
			}
			hdr.DatabaseID, hdr.Epoch, hdr.Seq = d.ID, d.Epoch, seq
			c = &hdr
			c.Changes = make([]sluice.Change, 0, max(min(c.NumChanges-p.startIndex, 256), 0))
			page.Commits = append(page.Commits, c)
			used += p.head
		}
		if idx == nil {
			continue // a commit without changes
		}
		cs, err := appendChanges(nil, *idx, ids, ops, befores, afters)
		if err != nil {
			return nil, fmt.Errorf("commit %d: %w", seq, err)
		}
		for _, ch := range cs {
			if ch.Index < p.startIndex {
				continue // read with its row; the previous page had it
			}
			size := int64(len(ch.Before) + len(ch.After))
			if used+size > maxBytes && (len(c.Changes) > 0 || len(page.Commits) > 1) {
				// Only the first row of a page can be larger than the
				// budget; the planned rows after it fit. Close discards
				// the rest unread.
				full = true
				break read
			}
			used += size
			c.Changes = append(c.Changes, ch)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapError(err)
	}
	if len(page.Commits) != len(plan) {
		if len(page.Commits) == 0 {
			return nil, goneWhileReading(d, after)
		}
		if !full {
			return nil, fmt.Errorf("changes of %s: read %d commits where %d were planned", d.Path(), len(page.Commits), len(plan))
		}
	}
	c = page.Commits[len(page.Commits)-1]
	if len(c.Changes) == 0 && c.NumChanges > 0 && len(page.Commits) > 1 {
		// Its first change did not fit after all: it goes to the next
		// page whole.
		page.Commits = page.Commits[:len(page.Commits)-1]
		page.More = true
		c = page.Commits[len(page.Commits)-1]
	}
	switch {
	case len(c.Changes) == 0:
		// A commit without changes (a full budget never leaves one
		// empty: it keeps at least one change).
		page.Next = c.Position(sluice.WholeCommit)
	case c.Changes[len(c.Changes)-1].Index == c.NumChanges-1:
		page.Next = c.Position(sluice.WholeCommit)
	default:
		page.Next = c.Position(c.Changes[len(c.Changes)-1].Index)
		page.More = true
	}
	page.More = page.More || full
	rows.Close()
	if err := db.documentImages(ctx, d, page.Commits); err != nil {
		return nil, err
	}
	return page, nil
}

// planChanges reads the sizes of the commits and change rows after
// position after and returns the ones a page holds (see Changes), and
// whether more follow.
func (db *DB) planChanges(ctx context.Context, d *sluice.Database, after sluice.Position, limit int, maxBytes int64) ([]plannedCommit, bool, error) {
	if after.Seq < 1 {
		after = sluice.Position{Seq: 1, Index: -1}
	}
	start := after.Index + 1 // the first change wanted from commit after.Seq
	// The lateral subquery starts commit after.Seq at the row that holds
	// change start (a row holds a run of changes, see migration 3), and
	// every later commit at its first row. Commit after.Seq may turn out
	// to be read already, hence limit+2 commits.
	rows, err := db.reader(ctx, d.ID).Query(ctx, `SELECT c.seq, c.n_changes,
			octet_length(c.author) + octet_length(c.message) + octet_length(c.user_name),
			ch.idx, coalesce(octet_length(ch.befores), 0) + coalesce(octet_length(ch.afters), 0)
		FROM (SELECT seq, uid, n_changes, author, message, user_name FROM sluice.commits
			WHERE db_id = $1 AND seq >= $2 ORDER BY seq LIMIT $4) c
		LEFT JOIN LATERAL (SELECT idx, befores, afters FROM sluice.changes
			WHERE commit_uid = c.uid AND idx >= CASE WHEN c.seq = $2 THEN coalesce(
				(SELECT max(s.idx) FROM sluice.changes s WHERE s.commit_uid = c.uid AND s.idx <= $3), 0) ELSE 0 END
			ORDER BY idx LIMIT $5) ch ON true
		ORDER BY c.seq, ch.idx
		LIMIT $5`, d.ID, after.Seq, start, limit+2, maxPlanRows+1)
	if err != nil {
		return nil, false, mapError(err)
	}
	defer rows.Close()
	var plan []plannedCommit
	var used int64
	progress := false // the plan holds a change row or a commit without changes
	more := false
	expect := after.Seq // the sequence is gapless: anything else was pruned
	skip := int64(-1)   // commit after.Seq, when every change of it was read before
	n := 0
	for rows.Next() {
		if n++; n > maxPlanRows {
			more = true
			break
		}
		var seq, head int64
		var nChanges int
		var idx *int
		var size int64
		if err := rows.Scan(&seq, &nChanges, &head, &idx, &size); err != nil {
			return nil, false, mapError(err)
		}
		if seq == skip {
			continue
		}
		if len(plan) == 0 || plan[len(plan)-1].seq != seq {
			if seq != expect {
				if len(plan) == 0 && skip < 0 {
					return nil, false, goneWhileReading(d, after)
				}
				return nil, false, fmt.Errorf("changes of %s: commit %d where %d was expected", d.Path(), seq, expect)
			}
			expect = seq + 1
			firstIndex := 0
			if seq == after.Seq && after.Index >= 0 {
				if start >= nChanges {
					skip = seq
					continue
				}
				firstIndex = start
			}
			if progress && (len(plan) == limit || used+head > maxBytes) {
				more = true
				break
			}
			used += head
			plan = append(plan, plannedCommit{seq: seq, n: nChanges, head: head, startIndex: firstIndex})
			if nChanges == 0 {
				progress = true
			}
		}
		p := &plan[len(plan)-1]
		if idx == nil {
			continue
		}
		if progress && used+size > maxBytes {
			more = true
			break
		}
		used += size
		progress = true
		if p.rows == 0 {
			p.firstIdx = *idx
		}
		p.lastIdx = *idx
		p.rows++
	}
	if err := rows.Err(); err != nil {
		return nil, false, mapError(err)
	}
	// A commit whose rows did not fit is left whole to the next page.
	for len(plan) > 0 && plan[len(plan)-1].n > 0 && plan[len(plan)-1].rows == 0 {
		plan = plan[:len(plan)-1]
		more = true
	}
	return plan, more, nil
}

func goneWhileReading(d *sluice.Database, after sluice.Position) error {
	return sluice.Errorf(sluice.CodeGone, "history of %s after commit %d was pruned while it was read; re-read the current state", d.Path(), after.Seq)
}

// Log returns up to limit commits of database d, newest first, starting
// below sequence before (0: from the newest), with author, message and
// user of at most maxBytes bytes in all (at least one commit). Changes are
// not loaded.
func (db *DB) Log(ctx context.Context, d *sluice.Database, before int64, limit int, maxBytes int64) (*sluice.LogPage, error) {
	// before is typed: Postgres types a parameter by its first use, and
	// "$2 = 0" made it an int4, so that a commit id past 2^31-1 (a client's
	// before=9223372036854775807) failed to encode, a 500.
	rows, err := db.reader(ctx, d.ID).Query(ctx, `SELECT seq, octet_length(author) + octet_length(message) + octet_length(user_name)
		FROM sluice.commits WHERE db_id = $1 AND ($2::bigint = 0 OR seq < $2::bigint) ORDER BY seq DESC LIMIT $3`, d.ID, before, limit+1)
	if err != nil {
		return nil, mapError(err)
	}
	page := &sluice.LogPage{}
	var used int64
	var newest, oldest int64
	n := 0
	for rows.Next() {
		var seq, size int64
		if err := rows.Scan(&seq, &size); err != nil {
			rows.Close()
			return nil, mapError(err)
		}
		if n > 0 && (n == limit || used+size > maxBytes) {
			page.More = true
			break
		}
		if n == 0 {
			newest = seq
		}
		oldest = seq
		used += size
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, mapError(err)
	}
	if n == 0 {
		return page, nil
	}
	rows, err = db.reader(ctx, d.ID).Query(ctx, "SELECT "+commitColumns+" FROM sluice.commits WHERE db_id = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq DESC",
		d.ID, oldest, newest)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	page.Commits = make([]*sluice.Commit, 0, n)
	for rows.Next() {
		c := &sluice.Commit{Epoch: d.Epoch}
		if err := scanCommit(rows, c, &c.UID); err != nil {
			return nil, mapError(err)
		}
		page.Commits = append(page.Commits, c)
	}
	return page, mapError(rows.Err())
}

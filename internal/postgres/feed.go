package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// ReadLog returns the commits of database d after position after (Index
// sluice.WholeCommit: after every change of commit after.Seq; otherwise
// the changes after after.Index of commit after.Seq come first), oldest
// first, with their changes in order: at most limit commits, and change
// rows (each a run of changes, see migration 3) of about maxBytes of
// images; a larger commit comes in pieces (sluice.Commit.Partial), at
// least one row at a time. Every commit carries the access log's version
// read in the same statement (sluice.Commit.AccessVersion), the time of
// that statement by Postgres' clock, after its snapshot was taken, so not
// before the commit's own time (sluice.Commit.ReadAt), and the schema
// version it was made under (sluice.Commit.SchemaVersion, NewSchema), and
// each change whether a later one of its commit supersedes it
// (sluice.Change.Superseded; a piece's changes too, against the rest of
// its commit). more reports whether the log held more.
//
// The change feed reads the log this way, so what it holds is bounded by
// maxBytes whatever the size of a commit. The caller checks that after is
// within retained history (History); a result that does not start with
// the commit it expected means history was pruned meanwhile, and a read
// from inside a commit that was pruned meanwhile is CodeGone.
//
// of, unless zero, is the stamp of commit after.Seq as the caller read it,
// or its tag (a client's position, sluice.TaggedStamp): when the log
// holds another commit of that number (its newest commits were lost and
// new ones took their numbers), the read fails with
// sluice.ErrCommitReplaced, whether or not commits follow. The statement
// reads it; a commit the log no longer holds at all (pruned, or lost
// without a new one of its number yet) passes.
func (db *DB) ReadLog(ctx context.Context, d *sluice.Database, after sluice.Position, of sluice.Stamp, limit int, maxBytes int64) ([]*sluice.Commit, bool, error) {
	cs, more, _, err := db.readLog(ctx, d, after, of, limit, maxBytes, false)
	return cs, more, err
}

// ReadLogWithin is ReadLog with the first row bounded too: the change
// images it returns take at most maxBytes. When the first change row
// after after is larger, it returns no commits, and need, the bytes of
// that row's images (read from their headers, the images left in
// Postgres). The webhooks read the log this way, within the room they
// took in their budget for it.
func (db *DB) ReadLogWithin(ctx context.Context, d *sluice.Database, after sluice.Position, limit int, maxBytes int64) (cs []*sluice.Commit, need int64, err error) {
	cs, _, need, err = db.readLog(ctx, d, after, sluice.Stamp{}, limit, maxBytes, true)
	return cs, need, err
}

// readLog is ReadLog, and ReadLogWithin when bounded.
func (db *DB) readLog(ctx context.Context, d *sluice.Database, after sluice.Position, of sluice.Stamp, limit int, maxBytes int64, bounded bool) ([]*sluice.Commit, bool, int64, error) {
	startSeq, startIdx := after.Seq+1, 0
	if after.Index != sluice.WholeCommit {
		startSeq, startIdx = after.Seq, after.Index+1
	}
	// The lateral subquery starts commit startSeq at the row that holds
	// change startIdx, every later commit at its first row. octet_length
	// reads a stored value's size from its header, so the running size
	// costs no detoasting; rows past the budget are never sent. limit+1
	// commits and rows tell whether more follow.
	// Bounded, a first row past maxBytes comes without its images (CASE
	// reads them only when they are sent), its size telling the need.
	// The first columns are the stamp of commit after.Seq when of asks
	// (null when the log does not hold it), compared with of below; the
	// left join gives them a row, all else null, when no commit follows:
	// the commit that took a lost one's number may be the newest. It
	// costs a sort of the page's rows, already cut to maxLogRows (joined
	// under the window, a sort of every row of the limit+1 commits before
	// the cut).
	rows, err := db.logRows(ctx, `SELECT of_uid, of_at,
			seq, uid, author, message, user_name, committed_at, n_changes, row_images, last_idx,
			idx, doc_ids, ops, CASE WHEN $7 AND upto > $5 THEN NULL ELSE befores END, CASE WHEN $7 AND upto > $5 THEN NULL ELSE afters END,
			unknown, access, has_next, upto,
			(SELECT schema_version FROM sluice.commit_counters WHERE db_id = $1), clock_timestamp()
		FROM (SELECT) one LEFT JOIN (SELECT uid AS of_uid, committed_at AS of_at FROM sluice.commits WHERE $8 AND db_id = $1 AND seq = $9) o ON true
		LEFT JOIN (SELECT c.seq, c.uid, c.author, c.message, c.user_name, c.committed_at, c.n_changes, c.row_images, c.last_idx,
				ch.idx, ch.doc_ids, ch.ops, ch.befores, ch.afters, ch.unknown, `+accessVersionSQL+` AS access,
				sum(coalesce(octet_length(ch.befores), 0) + coalesce(octet_length(ch.afters), 0)) OVER w AS upto,
				row_number() OVER w AS n,
				lead(c.seq) OVER w IS NOT NULL AS has_next
			FROM (SELECT seq, uid, author, message, user_name, committed_at, n_changes, row_images,
					(SELECT max(l.idx) FROM sluice.changes l WHERE l.commit_uid = commits.uid) AS last_idx
				FROM sluice.commits WHERE db_id = $1 AND seq >= $2 ORDER BY seq LIMIT $4 + 1) c
			LEFT JOIN LATERAL (SELECT idx, doc_ids, ops, befores, afters, unknown FROM sluice.changes
				WHERE commit_uid = c.uid AND (c.seq > $2 OR idx >= coalesce(
					(SELECT max(s.idx) FROM sluice.changes s WHERE s.commit_uid = c.uid AND s.idx <= $3), 0))
				ORDER BY idx LIMIT $6) ch ON true
			WINDOW w AS (ORDER BY c.seq, ch.idx ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
			ORDER BY c.seq, ch.idx
			LIMIT $6) page ON n = 1 OR upto <= $5
		ORDER BY seq, idx`, d.ID, startSeq, startIdx, limit, maxBytes, maxLogRows, bounded, !of.IsZero(), after.Seq)
	if err != nil {
		return nil, false, 0, mapError(err)
	}
	defer rows.Close()
	var out []*sluice.Commit
	var c *sluice.Commit
	more := false
	version := 0 // the database's schema version in the statement's snapshot
	for rows.Next() {
		var ofUID *int64
		var ofTime *time.Time
		if rows.RawValues()[2] == nil { // no commit follows
			dest := make([]any, len(rows.FieldDescriptions()))
			dest[0], dest[1] = &ofUID, &ofTime
			if err := rows.Scan(dest...); err != nil {
				return nil, false, 0, mapError(err)
			}
			if ofUID != nil && !of.Is(sluice.Stamp{UID: *ofUID, Time: *ofTime}) {
				return nil, false, 0, replacedError(d, after.Seq)
			}
			continue
		}
		var cur sluice.Commit
		var lastIdx, idx *int
		var ids []string
		var ops []int16
		var befores, afters, unknown []byte
		var upto int64
		if err := rows.Scan(&ofUID, &ofTime, &cur.Seq, &cur.UID, &cur.Author, &cur.Message, &cur.User, &cur.Time, &cur.NumChanges, &cur.RowImages, &lastIdx,
			&idx, &ids, &ops, &befores, &afters, &unknown, &cur.AccessVersion, &more, &upto, &version, &cur.ReadAt); err != nil {
			return nil, false, 0, mapError(err)
		}
		if ofUID != nil && !of.Is(sluice.Stamp{UID: *ofUID, Time: *ofTime}) {
			return nil, false, 0, replacedError(d, after.Seq)
		}
		if bounded && upto > maxBytes {
			// Only the first row can be past maxBytes (the others are
			// cut at it): nothing is read.
			rows.Close()
			return nil, false, upto, mapError(rows.Err())
		}
		if c == nil || c.Seq != cur.Seq {
			c = &cur
			c.DatabaseID, c.Epoch = d.ID, d.Epoch
			out = append(out, c)
		}
		if idx == nil {
			if c.NumChanges != 0 {
				db.checkCount(d, c) // it holds none
			}
			continue // a commit without changes
		}
		from := len(c.Changes)
		if c.Changes, err = appendChanges(c.Changes, *idx, ids, ops, befores, afters); err != nil {
			return nil, false, 0, fmt.Errorf("commit %d: %w: %w", c.Seq, sluice.ErrUnreadableCommit, err)
		}
		if err := setUnknown(c.Changes[from:], unknown); err != nil {
			return nil, false, 0, fmt.Errorf("commit %d: %w: %w", c.Seq, sluice.ErrUnreadableCommit, err)
		}
		if lastIdx != nil && *idx == *lastIdx {
			db.checkCount(d, c) // its last stored row
		}
		if c.Seq == startSeq && startIdx > 0 {
			// The row holding the first change wanted may hold earlier
			// ones, read before.
			kept := c.Changes[:from]
			for _, ch := range c.Changes[from:] {
				if ch.Index >= startIdx {
					kept = append(kept, ch)
				}
			}
			c.Changes = kept
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, 0, mapError(err)
	}
	if len(out) > limit {
		out, more = out[:limit], true // the extra commit only told that more follow
	}
	// The budget (or the row bound) may have cut the last commit.
	if len(out) > 0 {
		last := out[len(out)-1]
		if k := len(last.Changes); k > 0 && last.Changes[k-1].Index < last.NumChanges-1 {
			last.Partial, more = true, true
		}
	}
	if startIdx > 0 && (len(out) == 0 || out[0].Seq != startSeq) {
		// The position is inside commit startSeq, which the caller found
		// retained (History), and the statement did not see it: it was
		// pruned meanwhile. Without this, a read that starts at the next
		// commit would pass for one whose start commit had no changes
		// left (which is dropped just below), and the rest of startSeq's
		// changes would be skipped without a word.
		return nil, false, 0, sluice.Errorf(sluice.CodeGone, "commit %d of %s was pruned before the rest of its changes were read", startSeq, d.Path())
	}
	if startIdx > 0 && len(out[0].Changes) == 0 {
		out = out[1:] // its remaining changes were none
	}
	rows.Close()
	if err := db.markCommits(ctx, d, out); err != nil {
		return nil, false, 0, err
	}
	if err := db.commitVersions(ctx, d, version, out); err != nil {
		return nil, false, 0, err
	}
	if err := db.documentImages(ctx, d, out); err != nil {
		return nil, false, 0, err
	}
	return out, more, 0, nil
}

// replacedError is the error of a read after commit seq of d that found
// another commit of that number (ReadLog).
func replacedError(d *sluice.Database, seq int64) error {
	return fmt.Errorf("commit %d of %s: %w", seq, d.Path(), sluice.ErrCommitReplaced)
}

// logRows runs the statement of readLog: on the pool, or, for a read
// counted for a user (CountFor), on a connection of acquire, given back
// with its count when the rows end.
func (db *DB) logRows(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if _, ok := countedFor(ctx); !ok {
		return db.pool.Query(ctx, sql, args...)
	}
	conn, release, err := db.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		conn.Release()
		release()
		return nil, err
	}
	return &sharedRows{Rows: rows, conn: conn, release: release}, nil
}

// maxLogRows bounds the change rows one ReadLog returns, so that a read of
// many small commits is bounded too.
const maxLogRows = 1024

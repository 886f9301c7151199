package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/sluice-dev/sluice"
)

// A commit's version (its uid) is a document's version after its last
// change in the commit only: a change that a later change of the same
// commit follows on the same document is Superseded (sluice.Change), and
// has none. Every read of the log marks its commits: in Go over the
// changes read, which is the whole commit unless it comes in pieces; a
// piece that more changes follow (Partial) takes the rest from
// supersededIn.

// markSuperseded sets Superseded on each change of cs, changes of one
// commit in order, that a later change of cs changes the document of.
func markSuperseded(cs []sluice.Change) {
	if len(cs) < 2 {
		return
	}
	seen := make(map[string]struct{}, len(cs))
	for i := len(cs) - 1; i >= 0; i-- {
		if _, ok := seen[cs[i].DocID]; ok {
			cs[i].Superseded = true
			continue
		}
		seen[cs[i].DocID] = struct{}{}
	}
}

// markCommits marks the changes of commits cs read from the log of d:
// each within itself and, for a piece that more changes follow, against
// the whole commit.
func (db *DB) markCommits(ctx context.Context, d *sluice.Database, cs []*sluice.Commit) error {
	for _, c := range cs {
		markSuperseded(c.Changes)
		if !c.Partial || len(c.Changes) == 0 {
			continue
		}
		later, err := db.supersededIn(ctx, d, c)
		if err != nil {
			return err
		}
		for i := range c.Changes {
			if _, ok := slices.BinarySearch(later, c.Changes[i].Index); ok {
				c.Changes[i].Superseded = true
			}
		}
	}
	return nil
}

// supersededTTL is how long supersededIn keeps what it read of a commit.
// A commit never changes, so this only bounds memory: the pieces of one
// commit are read one after the other (by the change feed, a catch-up, a
// webhook), within it.
const supersededTTL = 5 * time.Minute

// supersededIn returns the indexes of the changes of commit c (a piece of
// it) that a later change of the commit changes the document of, in
// order; a CodeGone error when the commit was pruned meanwhile.
//
// It reads the ids of the whole commit in one statement, once per commit
// (kept for supersededTTL): per piece, reading the rest of the commit
// made a commit of n rows read about n²/2 (a SQL UPDATE of 100,000 rows
// logs 100,000). Rows of insertions (no doc_ids, migration 4) name their
// documents only in their images, which are then parsed; that is needed
// only when the commit holds a row with ids, since a document added
// twice in a commit was deleted in between, and a deletion is always in
// a row with ids.
func (db *DB) supersededIn(ctx context.Context, d *sluice.Database, c *sluice.Commit) ([]int, error) {
	if later, ok := db.superseded.Get(c.UID); ok {
		return later, nil
	}
	rows, err := db.logRows(ctx, `SELECT coalesce(array_agg(i ORDER BY i) FILTER (WHERE later), '{}'),
			EXISTS (SELECT 1 FROM sluice.changes WHERE commit_uid = $1)
		FROM (SELECT i, lead(i) OVER (PARTITION BY id ORDER BY i) IS NOT NULL AS later
			FROM (SELECT (ch.idx + u.n - 1)::int AS i, u.id COLLATE "C" AS id
					FROM sluice.changes ch CROSS JOIN LATERAL unnest(ch.doc_ids) WITH ORDINALITY AS u(id, n)
					WHERE ch.commit_uid = $1 AND ch.doc_ids IS NOT NULL
				UNION ALL
				SELECT (ch.idx + a.n - 1)::int, (a.after ->> '@id') COLLATE "C"
					FROM sluice.changes ch CROSS JOIN LATERAL json_array_elements(ch.afters::json) WITH ORDINALITY AS a(after, n)
					WHERE ch.commit_uid = $1 AND ch.doc_ids IS NULL
						AND EXISTS (SELECT 1 FROM sluice.changes o WHERE o.commit_uid = $1 AND o.doc_ids IS NOT NULL)) x) y`, c.UID)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	var later []int
	found := false
	for rows.Next() {
		if err := rows.Scan(&later, &found); err != nil {
			return nil, mapError(err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapError(err)
	}
	if !found {
		return nil, sluice.Errorf(sluice.CodeGone, "commit %d of %s was pruned before the rest of its changes were read", c.Seq, d.Path())
	}
	db.superseded.Put(c.UID, later)
	return later, nil
}

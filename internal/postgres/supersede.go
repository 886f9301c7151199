package postgres

import (
	"context"
	"sync"
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
			if later.has(c.Changes[i].Index) {
				c.Changes[i].Superseded = true
			}
		}
	}
	return nil
}

// bitset is a set of change indexes: a bit each, up to the largest.
type bitset []uint64

func (b bitset) has(i int) bool { return i >= 0 && i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

func (b *bitset) add(i int) {
	for i/64 >= len(*b) {
		*b = append(*b, 0)
	}
	(*b)[i/64] |= 1 << (i % 64)
}

// supersededIn returns the changes of commit c (a piece of it) that a
// later change of the commit changes the document of; a CodeGone error
// when the commit was pruned meanwhile.
//
// It reads them for the whole commit in one statement, once per commit
// (kept, see supersededCache): per piece, reading the rest of the commit
// made a commit of n rows read about n²/2 (a SQL UPDATE of 100,000 rows
// logs 100,000). They come as rows, into a bitset: what it holds is a bit
// per change of the commit, 2 MB for a commit of 16 million, whatever
// the ids. Rows of insertions (no doc_ids, migration 4) name their
// documents only in their images, which are then parsed; that is needed
// only when the commit holds a row with ids, since a document added
// twice in a commit was deleted in between, and a deletion is always in
// a row with ids.
func (db *DB) supersededIn(ctx context.Context, d *sluice.Database, c *sluice.Commit) (bitset, error) {
	if later, ok := db.superseded.get(c.UID); ok {
		return later, nil
	}
	// The first row, -1, says the commit is still in the log.
	rows, err := db.logRows(ctx, `SELECT -1 WHERE EXISTS (SELECT 1 FROM sluice.changes WHERE commit_uid = $1)
		UNION ALL
		SELECT i FROM (SELECT i, lead(i) OVER (PARTITION BY id ORDER BY i) IS NOT NULL AS later
			FROM (SELECT (ch.idx + u.n - 1)::int AS i, u.id COLLATE "C" AS id
					FROM sluice.changes ch CROSS JOIN LATERAL unnest(ch.doc_ids) WITH ORDINALITY AS u(id, n)
					WHERE ch.commit_uid = $1 AND ch.doc_ids IS NOT NULL
				UNION ALL
				SELECT (ch.idx + a.n - 1)::int, (a.after ->> '@id') COLLATE "C"
					FROM sluice.changes ch CROSS JOIN LATERAL json_array_elements(ch.afters::json) WITH ORDINALITY AS a(after, n)
					WHERE ch.commit_uid = $1 AND ch.doc_ids IS NULL
						AND EXISTS (SELECT 1 FROM sluice.changes o WHERE o.commit_uid = $1 AND o.doc_ids IS NOT NULL)) x) y
		WHERE later`, c.UID)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	var later bitset
	found := false
	for rows.Next() {
		var i int
		if err := rows.Scan(&i); err != nil {
			return nil, mapError(err)
		}
		if i < 0 {
			found = true
			continue
		}
		later.add(i)
	}
	if err := rows.Err(); err != nil {
		return nil, mapError(err)
	}
	if !found {
		return nil, sluice.Errorf(sluice.CodeGone, "commit %d of %s was pruned before the rest of its changes were read", c.Seq, d.Path())
	}
	db.superseded.put(c.UID, later)
	return later, nil
}

// supersededCache keeps what supersededIn read of the commits read in
// pieces lately, by commit uid. A commit never changes, so time and size
// only bound memory: the pieces of one commit are read one after the
// other (by the change feed, a catch-up, a webhook), within minutes; past
// supersededBytes held, the oldest commits are dropped.
type supersededCache struct {
	mu      sync.Mutex
	entries map[int64]supersededEntry
	bytes   int
}

type supersededEntry struct {
	later bitset
	added time.Time
}

const (
	supersededTTL   = 5 * time.Minute
	supersededBytes = 16 << 20
)

func (sc *supersededCache) get(uid int64) (bitset, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	e, ok := sc.entries[uid]
	if !ok || time.Since(e.added) >= supersededTTL {
		return nil, false
	}
	return e.later, true
}

// put keeps later for uid, dropping the expired commits and then, past
// supersededBytes, the oldest; one commit's bitset larger than that is
// not kept.
func (sc *supersededCache) put(uid int64, later bitset) {
	size := 8 * len(later)
	if size > supersededBytes {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.entries == nil {
		sc.entries = map[int64]supersededEntry{}
	}
	if old, ok := sc.entries[uid]; ok {
		sc.bytes -= 8 * len(old.later)
	}
	for u, e := range sc.entries {
		if time.Since(e.added) >= supersededTTL {
			sc.bytes -= 8 * len(e.later)
			delete(sc.entries, u)
		}
	}
	for sc.bytes+size > supersededBytes {
		oldest := int64(0)
		var at time.Time
		for u, e := range sc.entries {
			if at.IsZero() || e.added.Before(at) {
				oldest, at = u, e.added
			}
		}
		sc.bytes -= 8 * len(sc.entries[oldest].later)
		delete(sc.entries, oldest)
	}
	sc.entries[uid] = supersededEntry{later: later, added: time.Now()}
	sc.bytes += size
}

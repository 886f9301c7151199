package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice"
)

// Row locks in a group-commit batch. A write locks its documents in one
// order, class name then id (Writer.lock), so that two writes of
// overlapping documents wait for each other instead of deadlocking. A
// batch is one transaction that locks the documents of its commits one
// commit after another: as a whole it does not lock in that order. Were
// it to wait for a document while holding a later one that an earlier
// commit of the batch locked, it could close a cycle with any transaction
// that locks both, in order: another Sluice process's batch, or a write
// that is not grouped (a large one, or one with Before). (A process's own
// batches of a database do not overlap so: the next starts once this
// one's commit rows have answered, see group.go.) Postgres then ends one
// of them as deadlocked (40P01), often the one that did lock in order,
// which waited first.
//
// So a batch waits for a lock only as a write alone would: while it holds
// only the locks of the commit that asks, or for documents that all come
// after every one it has locked. Otherwise it asks without waiting
// (NOWAIT); a document locked by another transaction then fails the
// attempt (lock_not_available, an errConcurrent), and the batch runs again
// (commitBatch), first locking every document its commits asked for
// (every one a Writer's call names, told before its first statement), in
// order, which may wait as a write alone would. A deadlock Postgres
// reports anyway (an insert waits for another transaction's insert of the
// same id, which locks nothing beforehand) makes the batch run again the
// same way. If the run again fails too (a commit that had not run asked
// for more, or a lock_timeout), each commit of the batch runs alone, in
// turn: none fails because of another's documents.

// errPrelock wraps the error of a run again's first locks (prelock): a
// lock_timeout, a deadlock, a cancellation. The batch then runs each of
// its commits alone.
var errPrelock = errors.New("locking a batch's documents in order")

// lockKey is a document's place in the order of locks.
type lockKey struct{ class, id string }

// compare orders keys as Writer.lock takes them: by class name, then id
// (byte order: ids are COLLATE "C").
func (k lockKey) compare(o lockKey) int {
	return cmp.Or(strings.Compare(k.class, o.class), strings.Compare(k.id, o.id))
}

func (k lockKey) less(o lockKey) bool { return k.compare(o) < 0 }

// lockOrder is what a group-commit batch knows of its row locks: the
// documents its commits asked to lock, over all its attempts, and, in the
// attempt running (its Tx's order), what the transaction holds.
type lockOrder struct {
	// asked holds the ids every Writer call of the batch locks (see ask;
	// the calls' slices, not copies: a grouped delete may name a
	// million), sorted and made unique only when a run again locks them.
	asked []classIDs
	// Of the attempt running.
	locked bool    // the transaction has asked for a lock
	owner  *Writer // the Writer that asked first (nil: the prelock)
	shared bool    // another Writer (or the prelock) asked too
	last   lockKey // the greatest document asked for
	// doomed is set once the attempt must run again: it then learns
	// which documents its later commits lock without waiting for any.
	doomed bool
}

// attempt starts an attempt of the batch: nothing is locked.
func (o *lockOrder) attempt() {
	o.locked, o.owner, o.shared, o.last, o.doomed = false, nil, false, lockKey{}, false
}

// classIDs are ids of documents of class.
type classIDs struct {
	class string
	ids   []string
}

// ask records that a commit of the batch is about to lock the documents
// ids, all of class: a Writer tells all it locks in a call before its
// first statement, so that a run again locks all of them first, not only
// those of the statements that ran before one failed.
func (o *lockOrder) ask(class string, ids []string) {
	o.asked = append(o.asked, classIDs{class, ids})
}

// mayWait records that w (nil: the prelock) locks the documents ids, all
// of class, in one statement, and reports whether that statement may
// wait for a lock (else it must use NOWAIT).
func (o *lockOrder) mayWait(w *Writer, class string, ids []string) bool {
	lo, hi := slices.Min(ids), slices.Max(ids)
	others := o.locked && (o.shared || o.owner != w)
	wait := !o.doomed && (!others || o.last.less(lockKey{class, lo}))
	switch {
	case !o.locked:
		o.locked, o.owner = true, w
	case o.owner != w:
		o.shared = true
	}
	if o.last.less(lockKey{class, hi}) {
		o.last = lockKey{class, hi}
	}
	return wait
}

// prelock locks, in order, the rows of every document the attempts before
// this one asked for: the first locks of a batch run again. It waits for
// them as a write alone would. w is a Writer of the batch (for its
// database and schema).
func (o *lockOrder) prelock(ctx context.Context, w *Writer) error {
	var keys []lockKey
	for _, a := range o.asked {
		for _, id := range a.ids {
			keys = append(keys, lockKey{a.class, id})
		}
	}
	slices.SortFunc(keys, lockKey.compare)
	keys = slices.Compact(keys)
	for len(keys) > 0 {
		class := keys[0].class
		var ids []string
		for len(keys) > 0 && keys[0].class == class {
			ids = append(ids, keys[0].id)
			keys = keys[1:]
		}
		if c := w.schema.Classes[class]; c == nil || c.Kind != sluice.KindDocument {
			continue // the class is gone: the commit asking fails on its own
		}
		o.mayWait(nil, class, ids)
		sql := fmt.Sprintf("SELECT FROM %[1]s WHERE %[2]s = ANY($1) ORDER BY %[2]s FOR UPDATE", classTable(w.d, class), colID)
		if _, err := w.t.tx.Exec(ctx, sql, ids); err != nil {
			return mapError(err)
		}
	}
	return nil
}

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
)

// copyThreshold is the number of rows from which a write uses COPY instead of
// pipelined INSERT statements. COPY costs an extra round trip to describe the
// table, so it pays off only for larger batches.
const copyThreshold = 32

// Writer writes the documents of one commit, inside the transaction of a
// DB.Write, which hands it to the WriteSpec's Documents: the documents, and
// their changes in request order (sluice.changes rows of at most
// maxChangeRowBytes of images, see migration 3). Calls may be repeated (a long NDJSON stream is written in
// chunks). Statements whose results are not needed at once are held back
// and sent together, at the latest with the commit row, so an error may be
// reported by a later call than the one that caused it (Flush reports it
// at once). A Writer is used by one goroutine, during its Documents call
// only; if any call fails, Documents must return the error.
type Writer struct {
	t      *Tx
	d      *sluice.Database
	schema *sluice.Schema
	meta   CommitMeta
	// keep is WriteSpec.Keep.
	keep func(replacement, stored []byte) (*sluice.Document, error)
	uid  int64
	next int // index of the next change
	// pending holds statements whose results are not needed right away;
	// they are sent in one round trip by flush, before anything that
	// reads or copies, and at the latest with the commit row. The Writers
	// of one group-commit batch share it: a later commit of the batch
	// that reads a document must see what an earlier one wrote, and
	// their rows go in shared statements (pipeline.go).
	pending *pipeline
	// deferred holds change rows (changesInsert rows) not yet in
	// pending. They join pending when another statement is queued behind
	// them (keeping the order of statements), when they exceed
	// maxDeferredBytes, or with the commit row, so that a large write's
	// COPYs are not each preceded by a round trip for the previous chunk's
	// changes.
	deferred      [][]any
	deferredBytes int
	// sends counts the round trips that sent pending.
	sends int
	// stale lists the documents whose preconditions did not hold: they
	// are not written, and the write fails with them (see DB.Write).
	stale []sluice.StaleDocument
	// checked counts the documents whose preconditions were checked: one
	// for a write of one document (StaleError.OfOne).
	checked int
	// key, when set, is recorded with the commit (idempotency.go).
	key *IdempotencyKey
	// budget is the bytes of stored documents' images the Writer reads
	// and holds at a time (imageBudget); held counts those it holds, and
	// peakHeld the most it held.
	budget, held, peakHeld int
	// storedCharge is WriteSpec.Stored (nil: the stored documents a
	// write reads are not charged).
	storedCharge StoredCharge
}

// maxDeferredBytes bounds the change images a Writer holds back.
const maxDeferredBytes = 1 << 20

// newWriters starts one commit for each spec in this transaction, sharing
// pending (the statements not sent yet): each becomes a commit of its own,
// finished together by finish.
func (t *Tx) newWriters(ctx context.Context, specs []*WriteSpec, pending *pipeline) ([]*Writer, error) {
	uids, err := t.db.takeUIDs(ctx, t.tx, len(specs))
	if err != nil {
		return nil, err
	}
	ws := make([]*Writer, len(specs))
	for i, uid := range uids {
		ws[i] = &Writer{t: t, d: specs[i].Database, schema: specs[i].Schema, meta: specs[i].Meta, keep: specs[i].Keep, storedCharge: specs[i].Stored, uid: uid, pending: pending, budget: imageBudget}
	}
	return ws, nil
}

// queue adds a statement to pending, after the deferred change rows.
func (w *Writer) queue(sql string, args ...any) {
	w.queueDeferred()
	w.pending.queue(sql, args...)
}

// queueRow adds a row of ins to pending, after the deferred change rows.
func (w *Writer) queueRow(ins *rowInsert, row []any) {
	w.queueDeferred()
	w.pending.queueRow(ins, row)
}

// queueDeferred moves the deferred change rows to pending.
func (w *Writer) queueDeferred() {
	for _, row := range w.deferred {
		if len(row) == changesInsert.cols {
			w.pending.queueRow(changesInsert, row)
		} else {
			w.pending.queueRow(changesUnknownInsert, row)
		}
	}
	w.deferred, w.deferredBytes = nil, 0
}

// flush sends the pending statements (not the deferred change rows).
func (w *Writer) flush(ctx context.Context) error {
	if w.pending.Len() == 0 {
		return nil
	}
	w.sends++
	return insertError(w.t.tx.SendBatch(ctx, w.pending.batch()).Close())
}

// Flush sends every statement the Writer has queued and reports their
// first error (a duplicate id is a Conflict naming the document): a write
// made of several parts calls it between them to know which part an error
// belongs to.
func (w *Writer) Flush(ctx context.Context) error {
	w.queueDeferred()
	return w.flush(ctx)
}

// change is one change waiting to be written.
type change struct {
	id            string
	op            sluice.Op
	before, after []byte
	// unknown names the fields before leaves out as values Sluice could
	// not read (stored.unknown).
	unknown []string
}

// Rows are validated documents encoded for writing: each one's table row
// and its API-form JSON (its after image). Encoding is CPU work a large
// write does on another goroutine while its Writer waits on Postgres.
type Rows struct {
	docs []*sluice.Document
	// vals are the table rows; vals[i][1], the commit uid, is set by the
	// Writer that writes them.
	vals  [][]any
	after [][]byte
	// copy, when not nil, replaces vals: the rows, all of class, as a
	// binary COPY stream (InsertEncoder).
	copy  []byte
	class string
}

// EncodeRows encodes docs, validated against s, for a Writer of s.
func EncodeRows(s *sluice.Schema, docs []*sluice.Document) (*Rows, error) {
	r := &Rows{docs: docs, vals: make([][]any, len(docs)), after: make([][]byte, len(docs))}
	for i, doc := range docs {
		c := s.Classes[doc.Type]
		var err error
		if r.after[i], err = DocumentJSON(c, doc); err != nil {
			return nil, err
		}
		if r.vals[i], err = rowValues(c, doc, 0); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Len returns the number of documents.
func (r *Rows) Len() int { return len(r.docs) }

// Insert adds new documents. A document whose id exists gives a Conflict
// error naming it.
func (w *Writer) Insert(ctx context.Context, docs []*sluice.Document) error {
	r, err := EncodeRows(w.schema, docs)
	if err != nil {
		return err
	}
	return w.InsertRows(ctx, r)
}

// InsertRows is Insert for documents already encoded.
func (w *Writer) InsertRows(ctx context.Context, r *Rows) error {
	changes := make([]change, r.Len())
	all := make([]int, r.Len())
	for i, doc := range r.docs {
		changes[i] = change{id: doc.ID, op: sluice.OpAdded, after: r.after[i]}
		all[i] = i
	}
	var err error
	if r.copy != nil {
		err = w.copyRows(ctx, r)
	} else {
		err = w.writeRows(ctx, r, all)
	}
	if err != nil {
		return err
	}
	w.writeChanges(changes)
	return nil
}

// Replace replaces existing documents by new versions. A document that does
// not exist gives a NotFound error naming it, unless create is set, in which
// case it is inserted.
func (w *Writer) Replace(ctx context.Context, docs []*sluice.Document, create bool) error {
	r, err := EncodeRows(w.schema, docs)
	if err != nil {
		return err
	}
	return w.ReplaceRows(ctx, r, create)
}

// ReplaceRows is Replace for documents already encoded. A document whose
// Expect does not hold is not written: it is recorded as stale, and the
// write fails with a *sluice.StaleError naming every stale document.
//
// Rows are locked and read with SELECT … FOR UPDATE and then UPDATEd in
// place. Deleting and re-inserting them would be wrong under concurrency: a
// transaction waiting on the row lock would find the old row gone and miss
// the new one. The lock also makes a precondition's check and the write
// atomic: a concurrent write of the document waits for this one to commit,
// and then finds the version this one gave it.
func (w *Writer) ReplaceRows(ctx context.Context, r *Rows, create bool) error {
	ids := make([]string, r.Len())
	for i, d := range r.docs {
		ids[i] = d.ID
	}
	within, charge := w.chargeStored()
	found, err := w.lock(ctx, ids, within)
	if err != nil {
		return err
	}
	expect := make([]sluice.Precondition, len(ids))
	for i, doc := range r.docs {
		expect[i] = doc.Expect
	}
	// A missing document matters unless it is to be inserted: one that
	// must not exist (Absent) and is there after all fails its insert
	// (ErrExists), and the write runs again.
	err = w.lockAgain(ctx, ids, found, within, func(i int) bool { return !create || expect[i].Version != "" || expect[i].Exists })
	if err != nil {
		return err
	}
	if ok, err := w.check(ids, expect, found, !create, " (use create=true to insert it)"); !ok {
		return err
	}
	return w.inRuns(ctx, ids, found, charge, func(run []int) error {
		if w.keep != nil {
			if r, err = w.keepStored(r, found, run); err != nil {
				return err
			}
		}
		changes := make([]change, 0, len(run))
		var updates, inserts []int
		for _, i := range run {
			doc := r.docs[i]
			c := change{id: doc.ID, op: sluice.OpUpdated, after: r.after[i]}
			if cur := found[doc.ID]; cur != nil {
				c.before, c.unknown = cur.json, cur.unknown
				updates = append(updates, i)
			} else {
				c.op = sluice.OpAdded
				inserts = append(inserts, i)
			}
			changes = append(changes, c)
		}
		if err := w.updateRows(ctx, r, updates); err != nil {
			return err
		}
		if err := w.writeRows(ctx, r, inserts); err != nil {
			return err
		}
		w.writeChanges(changes)
		return nil
	})
}

// keepStored returns r with each document of run that replaces a stored
// one (in found) as w.keep makes it, encoded again. r itself is left as
// it is: a write's Documents may run again (see DB.Write).
func (w *Writer) keepStored(r *Rows, found map[string]*stored, run []int) (*Rows, error) {
	out := r
	for _, i := range run {
		cur := found[r.docs[i].ID]
		if cur == nil {
			continue
		}
		kept, err := w.keep(r.after[i], cur.json)
		if err != nil {
			return nil, err
		}
		if kept == nil {
			continue
		}
		kept.Expect = r.docs[i].Expect
		enc, err := EncodeRows(w.schema, []*sluice.Document{kept})
		if err != nil {
			return nil, err
		}
		if out == r {
			out = &Rows{docs: slices.Clone(r.docs), vals: slices.Clone(r.vals), after: slices.Clone(r.after)}
		}
		out.docs[i], out.vals[i], out.after[i] = kept, enc.vals[0], enc.after[0]
	}
	return out, nil
}

// Patch replaces existing documents by what patch makes of them: it locks
// and reads the documents ids (as Replace does), calls patch with each
// one's index in ids and its current API-form JSON, and replaces the
// document by the validated document patch returns (of the same id and
// class). A document that does not exist gives a NotFound error naming it;
// one whose precondition (expect[i], when expect is not nil) does not hold
// is recorded as stale (see ReplaceRows). An error of patch fails the
// write.
func (w *Writer) Patch(ctx context.Context, ids []string, expect []sluice.Precondition, patch func(i int, current []byte) (*sluice.Document, error)) error {
	for _, id := range ids {
		if err := checkText("document id", id); err != nil {
			return err
		}
	}
	// A patch rewrites its whole document, however small the patch.
	within, charge := w.chargeStored()
	found, err := w.lock(ctx, ids, within)
	if err == nil {
		err = w.lockAgain(ctx, ids, found, within, func(int) bool { return true })
	}
	if err != nil {
		return err
	}
	if ok, err := w.check(ids, expect, found, true, ""); !ok {
		return err
	}
	return w.inRuns(ctx, ids, found, charge, func(run []int) error {
		docs := make([]*sluice.Document, len(run))
		for k, i := range run {
			doc, err := patch(i, found[ids[i]].json)
			if err != nil {
				return err
			}
			if doc.ID != ids[i] {
				return fmt.Errorf("patch of %s made document %s", ids[i], doc.ID)
			}
			docs[k] = doc
		}
		r, err := EncodeRows(w.schema, docs)
		if err != nil {
			return err
		}
		all := make([]int, len(docs))
		changes := make([]change, len(docs))
		for k, doc := range docs {
			all[k] = k
			changes[k] = change{id: doc.ID, op: sluice.OpUpdated, before: found[doc.ID].json, after: r.after[k], unknown: found[doc.ID].unknown}
		}
		if err := w.updateRows(ctx, r, all); err != nil {
			return err
		}
		w.writeChanges(changes)
		return nil
	})
}

// write runs a WriteSpec's Documents with w. Stale documents are not
// written, and fail the write: before any other error, which they may
// have caused (a later part of the request that needed what was not
// written).
func (w *Writer) write(ctx context.Context, docs func(context.Context, *Writer) error) error {
	err := docs(ctx, w)
	if se := w.staleError(); se != nil {
		return se
	}
	return err
}

// staleError returns the error of the stale documents recorded, nil when
// there are none.
func (w *Writer) staleError() error {
	if len(w.stale) == 0 {
		return nil
	}
	se := sluice.NewStaleError(w.stale)
	se.OfOne = w.checked == 1
	return se
}

// updateRows overwrites the rows of existing documents, by class: pipelined
// UPDATEs for small batches, COPY into a temporary table and one UPDATE … FROM
// for large ones.
func (w *Writer) updateRows(ctx context.Context, r *Rows, which []int) error {
	byClass, byIndex, order := w.groupRows(r, which)
	for _, class := range order {
		c := w.schema.Classes[class]
		rows := byClass[class]
		cols := columns(c)
		tbl := classTable(w.d, class)
		if len(rows) < copyThreshold {
			sql := fmt.Sprintf("UPDATE %s SET %s WHERE %s = $1", tbl, setClause(cols[1:], func(i int, _ string) string { return fmt.Sprintf("$%d", i+2) }), colID)
			for _, r := range rows {
				w.queue(sql, r...)
			}
			continue
		}
		if err := w.flush(ctx); err != nil {
			return err
		}
		tmp := pgx.Identifier{"sluice_replace_" + strconv.FormatInt(w.uid, 10)}
		if _, err := w.t.tx.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE %s (LIKE %s) ON COMMIT DROP", tmp.Sanitize(), tbl)); err != nil {
			return mapError(err)
		}
		if err := w.copyDocs(ctx, tmp.Sanitize(), c, docsOf(r, byIndex[class])); err != nil {
			return mapError(err)
		}
		set := setClause(cols[1:], func(_ int, col string) string { return "n." + pgx.Identifier{col}.Sanitize() })
		sql := fmt.Sprintf("UPDATE %s t SET %s FROM %s n WHERE t.%s = n.%s", tbl, set, tmp.Sanitize(), colID, colID)
		if _, err := w.t.tx.Exec(ctx, sql); err != nil {
			return mapError(err)
		}
		if _, err := w.t.tx.Exec(ctx, "DROP TABLE "+tmp.Sanitize()); err != nil {
			return mapError(err)
		}
	}
	return nil
}

// Delete removes documents by id. An id that names no document gives a
// NotFound error naming it; one whose precondition (expect[i], when expect
// is not nil) does not hold is recorded as stale (see ReplaceRows).
func (w *Writer) Delete(ctx context.Context, ids []string, expect []sluice.Precondition) error {
	for _, id := range ids {
		if err := checkText("document id", id); err != nil {
			return err
		}
	}
	// The rows are locked in id order first, as Replace locks them, so that
	// overlapping deletes and replaces wait for each other instead of
	// deadlocking.
	within, charge := w.chargeStored()
	found, err := w.lock(ctx, ids, within)
	if err == nil {
		err = w.lockAgain(ctx, ids, found, within, func(int) bool { return true })
	}
	if err != nil {
		return err
	}
	if ok, err := w.check(ids, expect, found, true, ""); !ok {
		return err
	}
	if err := w.refuseCascades(ctx, ids); err != nil {
		return err
	}
	err = w.inRuns(ctx, ids, found, charge, func(run []int) error {
		changes := make([]change, len(run))
		for k, i := range run {
			changes[k] = change{id: ids[i], op: sluice.OpDeleted, before: found[ids[i]].json, unknown: found[ids[i]].unknown}
		}
		w.writeChanges(changes)
		return nil
	})
	if err != nil {
		return err
	}
	// The rows go last: each run of images above is read before anything
	// queued is sent, so none may be gone yet (an id may be named twice).
	byClass, order := idsByClass(ids)
	for _, class := range order {
		w.queue(fmt.Sprintf("DELETE FROM %s WHERE %s = ANY($1)", classTable(w.d, class), colID), byClass[class])
	}
	return nil
}

// cascadesSQL finds a foreign key of another table that references one
// of the class tables $1 and acts on a deletion (CASCADE, SET NULL, SET
// DEFAULT) or is checked only at COMMIT (INITIALLY DEFERRED), by the
// internal triggers it puts on the referenced table (pg_trigger is
// indexed by table; pg_constraint is not by the table referenced), and
// whether it only defers. Sluice's tables reference none.
const cascadesSQL = `SELECT n.nspname, r.relname, c.conname, p.relname, c.confdeltype NOT IN ('c', 'n', 'd')
FROM pg_trigger t JOIN pg_constraint c ON c.oid = t.tgconstraint
	JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace
	JOIN pg_class p ON p.oid = t.tgrelid
WHERE t.tgrelid = ANY($1::regclass[]) AND t.tgisinternal AND c.contype = 'f' AND c.confrelid = t.tgrelid
	AND (c.confdeltype IN ('c', 'n', 'd') OR c.condeferred)
ORDER BY 1, 2, 3 LIMIT 1`

// refuseCascades returns a Conflict when a foreign key of another
// Postgres role's table that acts on a deletion references the table of
// a class of ids. Postgres runs that action's statement, and then the
// triggers it fires on the role's own table, after the statement that
// deleted, as the role that deleted: an API deletion ran a role's trigger
// as Sluice's role (a superuser, on the embedded Postgres), which could
// read Sluice's password hashes and make the role a superuser. Such a key
// needs REFERENCES, which Sluice revokes, but one made before stays
// (docs/security.md); a key that only refuses (NO ACTION, RESTRICT) runs
// nothing of the role's, and refuses the documents it references
// (foreignKeyError) (TestSQLForeignKeyActionsNeverRunAsSluice). A key
// checked only at COMMIT (INITIALLY DEFERRED) is refused too: its refusal
// at COMMIT failed every write grouped with the deletion, with a 500
// (TestSQLDeferredForeignKeyRefusesDeletesFirst).
func (w *Writer) refuseCascades(ctx context.Context, ids []string) error {
	byClass, order := idsByClass(ids)
	tables := make([]string, 0, len(byClass))
	for _, class := range order {
		tables = append(tables, tableName(w.d.ID, class))
	}
	var schema, table, key, class string
	var deferred bool
	err := w.t.tx.QueryRow(ctx, cascadesSQL, tables).Scan(&schema, &table, &key, &class, &deferred)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return mapError(err)
	}
	if deferred {
		return sluice.Errorf(sluice.CodeConflict, "documents of class %s cannot be deleted: table %s of another Postgres role references its table by foreign key %s, "+
			"checked only at commit, where its refusal would fail every write committed with the deletion; the table's owner must drop the key first", class,
			pgx.Identifier{schema, table}.Sanitize(), pgx.Identifier{key}.Sanitize())
	}
	return sluice.Errorf(sluice.CodeConflict, "documents of class %s cannot be deleted: table %s of another Postgres role references its table by foreign key %s, "+
		"whose action on a deletion would run that role's code as Sluice's role; the table's owner must drop the key first", class,
		pgx.Identifier{schema, table}.Sanitize(), pgx.Identifier{key}.Sanitize())
}

// check checks the documents ids a write locked (found) before it writes
// any of them, and reports whether to write them: every precondition
// (expect[i], when expect is not nil), and, when mustExist, that each
// exists. Documents whose precondition does not hold are recorded as
// stale, and nothing is written: the write then fails with every stale
// document (see write), before any other error. The first document
// missing gives a NotFound error naming it, followed by hint, whether or
// not ids hold stale documents: so a request's stale documents are
// reported first, then a missing one, then errors of the documents'
// contents (found as the runs read them).
//
// A large request calls check once per chunk, and a chunk's error ends
// it there, as docs/rest.md promises: a chunk with stale documents and no
// error goes on to find those of the later chunks, one with a missing
// document too does not. So which stale documents a 412 names depends on
// where the first error is, not on whether its chunk also holds a stale
// document (the NotFound was dropped then, and the request went on).
func (w *Writer) check(ids []string, expect []sluice.Precondition, found map[string]*stored, mustExist bool, hint string) (bool, error) {
	w.checked += len(ids)
	stale, first := len(w.stale), ""
	for i, id := range ids {
		cur := found[id]
		if expect != nil && !expect[i].None() && !expect[i].Holds(cur.Version()) {
			w.stale = append(w.stale, sluice.StaleDocument{ID: id, Version: cur.Version()})
			continue
		}
		if cur == nil && mustExist && first == "" {
			first = id
		}
	}
	switch {
	case first != "":
		return false, sluice.Errorf(sluice.CodeNotFound, "document %s does not exist%s", first, hint)
	case len(w.stale) > stale:
		return false, nil
	}
	return true, nil
}

// imageBudget bounds the bytes of stored documents (Postgres's JSON of
// their rows) that a delete, replace or patch holds at a time, so that what
// a write holds is bounded by configuration (the largest document,
// max_body_bytes for the API's) rather than by how many documents it
// touches: inRuns reads the images in runs of at most the budget (one
// larger document alone), each run's changes queued, and its images
// dropped, before the next is read.
const imageBudget = 4 << 20

// stored is what a write found of a document it locked.
type stored struct {
	version string
	size    int    // bytes of Postgres's JSON of its row (estimated until read)
	json    []byte // its API-form JSON (a change image), nil until read
	// unknown names the fields json leaves out as values Sluice could not
	// read (a row written in SQL past its checks), logged with the image.
	unknown []string
}

// Version is the document's version, "" for a document not found (nil).
func (s *stored) Version() string {
	if s == nil {
		return ""
	}
	return s.version
}

// idsByClass returns ids ("Class/key") by class, and the classes in name
// order.
func idsByClass(ids []string) (map[string][]string, []string) {
	byClass := map[string][]string{}
	var order []string
	for _, id := range ids {
		class, _, _ := strings.Cut(id, "/")
		if _, ok := byClass[class]; !ok {
			order = append(order, class)
		}
		byClass[class] = append(byClass[class], id)
	}
	sort.Strings(order)
	return byClass, order
}

// lock locks the rows of the documents ids (FOR UPDATE) and returns what
// it found of each by id; ids that name no row are absent. A write of one
// document reads its image with the lock, in the same statement (when
// within is not negative, only if its size, as imageSize estimates it,
// is at most within: else its size); a write of several reads only their
// versions and sizes, and inRuns their images, in runs. Ids must be
// "Class/key" with Class a document class (the engine checks).
func (w *Writer) lock(ctx context.Context, ids []string, within int64) (map[string]*stored, error) {
	if err := w.flush(ctx); err != nil {
		return nil, err
	}
	w.held = 0 // what an earlier call left counted is not held any more
	found := make(map[string]*stored, len(ids))
	return found, w.lockInto(ctx, ids, within, len(ids) > 1, found)
}

// lockAgain locks, in statements of their own, the documents of ids that
// lock found missing and that must exist (need(i): a write that answers
// "does not exist" or "stale" for a missing one), adding them to found,
// as lock would have read them (several: versions and sizes only).
//
// A row another transaction deletes and inserts again (one commit that
// deletes a document and adds one of the same id: a GraphQL
// _deleteDocuments then X_insert, or SQL) while this one waits for its
// lock is missed by the statement that waited: Postgres skips the row it
// waited for, now deleted, and the statement's snapshot, older than
// that commit, does not show the new one. A statement of its own sees
// it (READ COMMITTED: each statement its own snapshot). Without this, a
// PATCH or DELETE of a document that existed throughout answered 404,
// and a conditional write 412 with no version. Only missing documents
// that matter are locked again, at most twice: a write of documents that
// exist, and an insert, pay nothing.
func (w *Writer) lockAgain(ctx context.Context, ids []string, found map[string]*stored, within int64, need func(i int) bool) error {
	for range 2 {
		var missing []string
		for i, id := range ids {
			if found[id] == nil && need(i) && !slices.Contains(missing, id) {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		n := len(found)
		if err := w.lockInto(ctx, missing, within, len(ids) > 1, found); err != nil {
			return err
		}
		if len(found) == n {
			return nil // missing indeed
		}
	}
	return nil
}

// lockInto is lock's statements: it locks the rows of ids, adding what
// it found of each to found, their images read unless several is set
// (see lock).
func (w *Writer) lockInto(ctx context.Context, ids []string, within int64, several bool, found map[string]*stored) error {
	byClass, order := idsByClass(ids)
	// Classes in name order and rows in id order: two requests locking
	// overlapping documents take the locks in the same order, so they
	// wait for each other instead of deadlocking. (A group-commit batch
	// locks its commits' documents one commit after another, and waits
	// for each at most batchLockWait: see lockorder.go.)
	for _, class := range order {
		c := w.schema.Classes[class]
		if c == nil || c.Kind != sluice.KindDocument {
			return sluice.Errorf(sluice.CodeNotFound, "document %s does not exist: no document class %q", byClass[class][0], class)
		}
		what, args := "to_jsonb(t.*)", []any{byClass[class]}
		switch {
		case several:
			what = imageSize(c)
		case within >= 0:
			what = "CASE WHEN s._size <= $2 THEN to_jsonb(t.*) END, s._size"
			args = append(args, within)
		}
		sql := fmt.Sprintf("SELECT %[2]s, %[3]s, %[4]s FROM %[1]s t WHERE %[2]s = ANY($1) ORDER BY %[2]s FOR UPDATE", classTable(w.d, class), colID, colCommitUID, what)
		if !several && within >= 0 {
			sql = fmt.Sprintf("SELECT %[2]s, %[3]s, %[4]s FROM %[1]s t CROSS JOIN LATERAL (SELECT %[5]s AS _size) s WHERE %[2]s = ANY($1) FOR UPDATE OF t", classTable(w.d, class), colID, colCommitUID, what, imageSize(c))
		}
		rows, err := w.t.tx.Query(ctx, sql, args...)
		if err != nil {
			return mapError(err)
		}
		for rows.Next() {
			var id string
			var uid *int64
			s := &stored{}
			var raw []byte
			var size int64
			switch {
			case several:
				err = rows.Scan(&id, &uid, &size)
			case within >= 0:
				err = rows.Scan(&id, &uid, &raw, &size)
			default:
				err = rows.Scan(&id, &uid, &raw)
			}
			s.size = int(min(size, 1<<40))
			if err == nil && raw != nil {
				s.size = len(raw)
				s.json, s.unknown, err = w.image(c, raw)
				w.hold(s.size)
			}
			if err != nil {
				rows.Close()
				return mapError(err)
			}
			if uid != nil {
				s.version = sluice.VersionOf(*uid)
			}
			found[id] = s
		}
		if err := rows.Err(); err != nil {
			return mapError(err)
		}
	}
	return nil
}

// imageSize returns an expression of about the length of the image of a
// row of class c (to_jsonb(t.*)), without building it: its keys and
// punctuation, known from the class; a text column's length (a string's
// JSON is longer by its escapes: at most six times, for control
// characters); the text of a JSON or numeric value (stored compressed, a
// hundredfold smaller for a repetitive value, or as a numeric of a few
// bytes that prints as 100,000 digits); the longest text of the other
// types. Building every image to measure it cost a delete of many
// documents about 30% more time (docs/benchmarks.md, "Replacing and
// deleting many documents").
func imageSize(c *sluice.Class) string {
	// {"_id": …, "_commit_uid": …, and per column "name": … and a comma.
	fixed := len(`{"_id":"",`) + len(`"_commit_uid":`) + 20 + 1
	var b strings.Builder
	b.WriteString("octet_length(t." + colID + ")::bigint")
	for _, f := range c.Fields {
		fixed += len(f.Name) + len(`"":,`) + len("null")
		col := "t." + pgx.Identifier{f.Name}.Sanitize()
		switch columnType(f) {
		case "text":
			fixed += 2 // its quotes
			fmt.Fprintf(&b, " + coalesce(octet_length(%s)::bigint, 0)", col)
		case "jsonb", "numeric":
			fmt.Fprintf(&b, " + coalesce(octet_length(%s::text)::bigint, 0)", col)
		case "timestamptz":
			fixed += len(`"0001-01-01T00:00:00.000000+00:00"`)
		default: // integer, double precision, boolean
			fixed += 24
		}
	}
	return fmt.Sprintf("%d + %s", fixed, b.String())
}

// image returns the API-form JSON of raw, a row of class c as to_jsonb
// gives it, and the fields it leaves out as values Sluice cannot read.
func (w *Writer) image(c *sluice.Class, raw []byte) ([]byte, []string, error) {
	doc, err := transcodeRow(c, raw, false)
	if err != nil {
		return nil, nil, err
	}
	w.t.db.unreadable(w.d, doc.ID, doc.Unreadable)
	return doc.JSON, doc.Unreadable, nil
}

// chargeStored returns how a write of documents that exist charges the
// stored documents it reads (WriteSpec.Stored): how large a document it
// may read with its lock (see lock), and the charge of each run of them
// (see inRuns), before it is read. A patch merges into each, and a
// replace or a delete holds each as its change's before image: however
// small the request, it holds what it reads. Not charged: -1 and nil.
func (w *Writer) chargeStored() (within int64, charge func(size int) error) {
	if w.storedCharge == nil {
		return -1, nil
	}
	return w.storedCharge.Room(), func(n int) error { return w.storedCharge.Hold(int64(n)) }
}

// hold counts n more bytes of images held (n < 0: fewer).
func (w *Writer) hold(n int) {
	w.held += n
	w.peakHeld = max(w.peakHeld, w.held)
}

// inRuns calls fn with the indexes of ids in runs, in order, each run's
// documents found (not nil in found) read, their images taking at most
// the budget together (a run holds one document at least). After each
// run, the images it read are dropped. charge, when not nil, is called
// with the bytes of each run's images (read already, or to read, as
// lock estimated them) before the run is read, and again with their
// sizes as read; its error ends the write.
func (w *Writer) inRuns(ctx context.Context, ids []string, found map[string]*stored, charge func(size int) error, fn func(run []int) error) error {
	runSize := func(from, to int) int {
		n := 0
		for i := from; i < to; i++ {
			if cur := found[ids[i]]; cur != nil {
				n += cur.size
			}
		}
		return n
	}
	for start := 0; start < len(ids); {
		end, size := start, 0
		for ; end < len(ids); end++ {
			cur := found[ids[end]]
			if cur == nil || cur.json != nil {
				continue // nothing to read
			}
			if end > start && size+cur.size > w.budget {
				break
			}
			size += cur.size
		}
		run := make([]int, 0, end-start)
		for i := start; i < end; i++ {
			run = append(run, i)
		}
		if charge != nil {
			if err := charge(runSize(start, end)); err != nil {
				return err
			}
		}
		if err := w.load(ctx, ids, found, run); err != nil {
			return err
		}
		if charge != nil {
			// As read: lock's estimate may fall short (escapes).
			if err := charge(runSize(start, end)); err != nil {
				return err
			}
		}
		if err := fn(run); err != nil {
			return err
		}
		for _, i := range run {
			if cur := found[ids[i]]; cur != nil && cur.json != nil {
				cur.json, cur.unknown = nil, nil
				w.hold(-cur.size)
			}
		}
		start = end
	}
	return nil
}

// load reads the images of the documents ids[i], i in run, found and not
// read yet (the rows are locked already).
func (w *Writer) load(ctx context.Context, ids []string, found map[string]*stored, run []int) error {
	var need []string
	for _, i := range run {
		if cur := found[ids[i]]; cur != nil && cur.json == nil {
			need = append(need, ids[i])
		}
	}
	if len(need) == 0 {
		return nil
	}
	// What is queued is sent first: a statement of this write may have
	// changed these rows, and the change rows queued so far are let go.
	if err := w.flush(ctx); err != nil {
		return err
	}
	byClass, order := idsByClass(need)
	for _, class := range order {
		c := w.schema.Classes[class]
		sql := fmt.Sprintf("SELECT %[2]s, to_jsonb(t.*) FROM %[1]s t WHERE %[2]s = ANY($1)", classTable(w.d, class), colID)
		rows, err := w.t.tx.Query(ctx, sql, byClass[class])
		if err != nil {
			return mapError(err)
		}
		for rows.Next() {
			var id string
			var raw []byte
			if err := rows.Scan(&id, &raw); err != nil {
				rows.Close()
				return mapError(err)
			}
			b, unknown, err := w.image(c, raw)
			if err != nil {
				rows.Close()
				return err
			}
			if cur := found[id]; cur != nil && cur.json == nil {
				// Counted as read, not as lock estimated it.
				cur.json, cur.unknown, cur.size = b, unknown, len(raw)
				w.hold(cur.size)
			}
		}
		if err := rows.Err(); err != nil {
			return mapError(err)
		}
	}
	return nil
}

// writeRows inserts the documents' rows, by class, with COPY for large
// batches and pipelined INSERTs otherwise.
func (w *Writer) writeRows(ctx context.Context, r *Rows, which []int) error {
	byClass, byIndex, order := w.groupRows(r, which)
	for _, class := range order {
		c := w.schema.Classes[class]
		rows := byClass[class]
		cols := columns(c)
		if len(rows) >= copyThreshold {
			if err := w.flush(ctx); err != nil {
				return err
			}
			if err := w.copyDocs(ctx, classTable(w.d, class), c, docsOf(r, byIndex[class])); err != nil {
				return insertError(err)
			}
			continue
		}
		ins := newRowInsert(classTable(w.d, class), cols)
		for _, r := range rows {
			w.queueRow(ins, r)
		}
	}
	return nil
}

// setClause returns "col1 = v1, col2 = v2…" with each value expression from
// value(i, col).
func setClause(cols []string, value func(i int, col string) string) string {
	var b strings.Builder
	for i, col := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = %s", pgx.Identifier{col}.Sanitize(), value(i, col))
	}
	return b.String()
}

// groupRows returns the rows r.vals[i] for i in which, by class, with this
// Writer's commit uid, the indexes i by class, and the classes in order of
// first appearance.
func (w *Writer) groupRows(r *Rows, which []int) (map[string][][]any, map[string][]int, []string) {
	byClass := map[string][][]any{}
	byIndex := map[string][]int{}
	var order []string
	for _, i := range which {
		class := r.docs[i].Type
		vals := r.vals[i]
		vals[1] = w.uid
		if _, ok := byClass[class]; !ok {
			order = append(order, class)
		}
		byClass[class] = append(byClass[class], vals)
		byIndex[class] = append(byIndex[class], i)
	}
	return byClass, byIndex, order
}

// docsOf returns the documents r.docs[i] for i in which.
func docsOf(r *Rows, which []int) []*sluice.Document {
	out := make([]*sluice.Document, len(which))
	for k, i := range which {
		out[k] = r.docs[i]
	}
	return out
}

// insertError turns a duplicate primary key into a Conflict naming the
// document (matching ErrExists); Postgres reports it as `Key
// (_id)=(Person/alice) already exists.` And a foreign key of another
// role's table into a Conflict naming it (foreignKeyError).
func insertError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		id := pe.Detail
		if _, rest, ok := strings.Cut(id, ")=("); ok {
			id, _, _ = strings.Cut(rest, ") already exists")
		}
		return existsError{sluice.Errorf(sluice.CodeConflict, "document %s already exists", id)}
	}
	if errors.As(err, &pe) && pe.Code == "23503" && pe.SchemaName != "sluice" {
		return foreignKeyError(pe)
	}
	return mapError(err)
}

// foreignKeyError is the Conflict of a deletion that a foreign key of
// another Postgres role's table refuses (23503, foreign_key_violation,
// which names the referencing table and its key). Sluice's class tables
// have no foreign key, and nothing references them but what a role
// granted REFERENCES made before Sluice revoked it (docs/security.md):
// Postgres refuses the deletion of a document its rows reference. That
// was answered 500 "internal error"; nothing Sluice does can lift it,
// only the table's owner (TestSQLForeignKeyRefusesDeletesWithConflict).
// Postgres' detail names the document (`Key (_id)=(Note/a) is still
// referenced from table "keep".`); a detail in another language names
// none.
func foreignKeyError(pe *pgconn.PgError) error {
	doc := "a document this request deletes"
	if _, rest, ok := strings.Cut(pe.Detail, "Key (_id)=("); ok {
		if id, _, ok := strings.Cut(rest, ") is still referenced"); ok {
			doc = "document " + sluice.EchoPlain(id)
		}
	}
	return sluice.Errorf(sluice.CodeConflict, "%s cannot be deleted: table %s of another Postgres role references it by foreign key %s; "+
		"the table's owner must drop the key, or the rows referencing it, first", doc,
		pgx.Identifier{pe.SchemaName, pe.TableName}.Sanitize(), pgx.Identifier{pe.ConstraintName}.Sanitize())
}

// ErrExists matches the error of writing a new document whose id exists.
// For a replace with create, that means another request created the
// document after this one found it missing.
var ErrExists = errors.New("document exists")

type existsError struct{ err *sluice.Error }

func (e existsError) Error() string        { return e.err.Error() }
func (e existsError) Unwrap() error        { return e.err }
func (e existsError) Is(target error) bool { return target == ErrExists }

// changesInsert writes rows of changes, each one batch of a commit's
// changes (see migration 0003).
var changesInsert = newRowInsert("sluice.changes", []string{"commit_uid", "idx", "doc_ids", "ops", "befores", "afters"})

// changesUnknownInsert is changesInsert for a row whose before images left
// out values Sluice could not read, naming them (unknownArray, migration
// 30): the rows without, almost all, are written as before.
var changesUnknownInsert = newRowInsert("sluice.changes", []string{"commit_uid", "idx", "doc_ids", "ops", "befores", "afters", "unknown"})

// maxChangeRowBytes bounds the change images one row of sluice.changes
// holds (a row of one larger change holds just it). Readers of the log
// (the change feed, /api/changes, a commit's pages) read a row whole, so
// this, not the size of a commit, bounds what one read of the log holds
// beyond its byte budget.
const maxChangeRowBytes = 1 << 20

// writeChanges queues the changes, in order, as the next batches of the
// commit's changes: rows of at most maxChangeRowBytes of images.
func (w *Writer) writeChanges(changes []change) {
	for len(changes) > 0 {
		n, size := 1, len(changes[0].before)+len(changes[0].after)
		for ; n < len(changes); n++ {
			size += len(changes[n].before) + len(changes[n].after)
			if size > maxChangeRowBytes {
				break
			}
		}
		w.writeChangeRow(changes[:n])
		changes = changes[n:]
	}
}

// writeChangeRow queues one row holding the changes, in order, as the
// next batch of the commit's changes.
func (w *Writer) writeChangeRow(changes []change) {
	befores := make([][]byte, len(changes))
	afters := make([][]byte, len(changes))
	inserts := true
	for i, c := range changes {
		befores[i], afters[i] = c.before, c.after
		inserts = inserts && c.op == sluice.OpAdded && c.before == nil && c.after != nil
	}
	bs, as := jsonArray(befores), jsonArray(afters)
	// A row of insertions leaves out its ids and ops (NULL): the after
	// images hold the ids (migration 4).
	var ids, ops any
	if !inserts {
		idList, opList := make([]string, len(changes)), make([]int16, len(changes))
		for i, c := range changes {
			idList[i], opList[i] = c.id, int16(c.op)
		}
		ids, ops = idList, opList
	}
	row := []any{w.uid, w.next, ids, ops, textOrNull(bs), textOrNull(as)}
	if unknown := unknownArray(changes); unknown != nil {
		row = append(row, string(unknown))
	}
	w.deferred = append(w.deferred, row)
	w.deferredBytes += len(bs) + len(as)
	if w.deferredBytes > maxDeferredBytes {
		w.queueDeferred()
	}
	w.next += len(changes)
}

// unknownArray returns the changes' unknown fields as a JSON array, one
// element per change (null, or the array of names), or nil when none has
// any (migration 30): nothing is built then.
func unknownArray(changes []change) []byte {
	some := false
	for _, c := range changes {
		some = some || len(c.unknown) > 0
	}
	if !some {
		return nil
	}
	vals := make([]any, len(changes))
	for i, c := range changes {
		if len(c.unknown) > 0 {
			vals[i] = c.unknown
		}
	}
	b, _ := json.Marshal(vals) // strings: cannot fail
	return b
}

// jsonArray returns the JSON array of the given JSON values (nil ones as
// null), or nil when all are nil.
func jsonArray(vals [][]byte) []byte {
	n := 2
	for _, v := range vals {
		n += len(v) + 5
	}
	if n == 2+5*len(vals) {
		return nil
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		if v == nil {
			v = []byte("null")
		}
		b = append(b, v...)
	}
	b = append(b, ']')
	return b
}

// textOrNull is b for a text parameter (pgx sends a []byte as it is), or
// NULL when b is nil.
func textOrNull(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// DocQuery and QueryDoc are the storage layer's GraphQL read types.
type (
	DocQuery = postgres.DocQuery
	QueryDoc = postgres.QueryDoc
	OrderKey = postgres.OrderKey
	// BacklinkQuery selects the documents that point at each of several
	// (see postgres.BacklinkQuery).
	BacklinkQuery = postgres.BacklinkQuery
	// AggregateQuery, Agg and AggregateResult are a count and aggregates
	// of the documents a filter selects (see postgres.AggregateQuery).
	AggregateQuery  = postgres.AggregateQuery
	Agg             = postgres.Agg
	AggregateResult = postgres.AggregateResult
	// Snapshot is one read of a database in one snapshot, which answers
	// the position it reflects (see postgres.Snapshot).
	Snapshot = postgres.Snapshot
)

// CountStatements returns a context under which QueryDocuments and
// DocumentsByID count the SQL statements they send, and the function
// returning the count so far (see postgres.CountStatements).
func CountStatements(ctx context.Context) (context.Context, func() int64) {
	return postgres.CountStatements(ctx)
}

// ErrReadBytes is the error of a read past the bytes LimitReads allows.
var ErrReadBytes = postgres.ErrReadBytes

// ErrAggregateRange is (errors.Is) the error of an aggregate whose value
// the documents put out of its type's range (see postgres.ErrAggregateRange).
var ErrAggregateRange = postgres.ErrAggregateRange

// LimitReads returns a context under which the reads of documents fail
// with ErrReadBytes once they have read max bytes together (see
// postgres.LimitReads).
func LimitReads(ctx context.Context, max int64) context.Context {
	return postgres.LimitReads(ctx, max)
}

// ReadSnapshot returns ctx carrying a new snapshot of database d, and the
// snapshot: every read of d made with the returned context runs in it,
// and its Position is the position they reflect. Close it when done.
func (e *Engine) ReadSnapshot(ctx context.Context, d *sluice.Database) (context.Context, *Snapshot) {
	s := e.store.Snapshot(d)
	return postgres.WithSnapshot(ctx, s), s
}

// GraphQLDatabase authorizes a GraphQL request on database org/name: u
// needs the read role. It returns the database, its schema and u's role,
// which decides the fields the generated schema shows (field protection).
func (e *Engine) GraphQLDatabase(ctx context.Context, u *sluice.User, org, name string) (*sluice.Database, *sluice.Schema, sluice.Role, error) {
	d, s, err := e.Database(ctx, u, org, name, sluice.RoleRead)
	if err != nil {
		return nil, nil, sluice.RoleNone, err
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, nil, sluice.RoleNone, err
	}
	return d, s, role, nil
}

// QueryDocuments runs one GraphQL document query (one SQL statement). The
// caller has authorized the reader with GraphQLDatabase and hides the
// fields the reader may not see. It, and the reads below, count as small
// requests for the collector's target (loadGC).
func (e *Engine) QueryDocuments(ctx context.Context, d *sluice.Database, s *sluice.Schema, q DocQuery) ([]QueryDoc, error) {
	defer processLoadGC.serving()()
	return e.store.QueryDocuments(ctx, d, s, q)
}

// QueryDocumentsEach runs several GraphQL document queries with one SQL
// statement (see postgres.DB.QueryDocumentsEach). Authorization as
// QueryDocuments.
func (e *Engine) QueryDocumentsEach(ctx context.Context, d *sluice.Database, s *sluice.Schema, qs []DocQuery) ([][]QueryDoc, error) {
	defer processLoadGC.serving()()
	return e.store.QueryDocumentsEach(ctx, d, s, qs)
}

// Backlinks reads, in one SQL statement, the documents whose reference
// field points at each of q's targets (see postgres.DB.Backlinks).
// Authorization as QueryDocuments.
func (e *Engine) Backlinks(ctx context.Context, d *sluice.Database, s *sluice.Schema, q BacklinkQuery) ([][]QueryDoc, error) {
	defer processLoadGC.serving()()
	return e.store.Backlinks(ctx, d, s, q)
}

// Aggregate counts, and aggregates fields of, the documents q selects, in
// one SQL statement (see postgres.DB.Aggregate). Authorization as
// QueryDocuments.
func (e *Engine) Aggregate(ctx context.Context, d *sluice.Database, s *sluice.Schema, q AggregateQuery) (AggregateResult, error) {
	defer processLoadGC.serving()()
	return e.store.Aggregate(ctx, d, s, q)
}

// DocumentsByID reads documents by id, of any classes, in one SQL
// statement; missing ids are left out, and at most limit documents are
// read (< 0: no limit). Authorization as QueryDocuments.
func (e *Engine) DocumentsByID(ctx context.Context, d *sluice.Database, s *sluice.Schema, ids []string, limit int) ([]QueryDoc, error) {
	defer processLoadGC.serving()()
	return e.store.DocumentsByID(ctx, d, s, ids, limit)
}

// CommitChanges returns commit seq of d (0: the newest) with its changes
// as a reader with role sees them through the current schema s (see
// RedactCommit), NotFound when it does not exist, or HistoryGone when it
// was pruned (as a read as of a pruned position is). It
// stops reading once it holds more than maxChanges changes or maxBytes
// bytes of change images (< 0: no bound), and the commit is then Partial
// (see postgres.DB.Commit). Authorization as QueryDocuments.
//
// The commit is judged against the snapshot ctx carries (begun here when
// nothing read in it yet), whose position the answer then carries as
// every read's does: the newest commit is the snapshot's, and one made
// after it is one not made yet. The log's rows are immutable, so the
// commit itself may be read outside the snapshot; one pruned since it
// began is HistoryGone.
func (e *Engine) CommitChanges(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, seq int64, maxChanges int, maxBytes int64) (*sluice.Commit, error) {
	h, err := e.store.History(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	if seq == 0 {
		seq = h.LastSeq
	}
	switch {
	case seq == 0:
		return nil, sluice.Errorf(sluice.CodeNotFound, "database %s has no commits", d.Path())
	case seq > h.LastSeq:
		return nil, sluice.Errorf(sluice.CodeNotFound, "commit %d of %s is not made yet: the newest is %d", seq, d.Path(), h.LastSeq)
	case seq <= h.PrunedSeq:
		return nil, sluice.Errorf(sluice.CodeHistoryGone, "commit %d of %s is older than the history it retains (log_retention); the oldest commit it holds is %d", seq, d.Path(), h.PrunedSeq+1)
	}
	c, err := e.store.Commit(ctx, d, seq, maxChanges, maxBytes)
	if sluice.ErrorCode(err) == sluice.CodeNotFound {
		return nil, sluice.Errorf(sluice.CodeHistoryGone, "commit %d of %s was pruned while it was read (log_retention)", seq, d.Path())
	}
	if err != nil {
		return nil, err
	}
	return e.RedactCommit(ctx, d, s, role, c)
}

// WriteKind says what a WriteOp does.
type WriteKind int

// The kinds of write.
const (
	WriteInsert WriteKind = iota + 1
	WriteReplace
	WriteDelete
	WritePatch
)

// WriteOp is one write of a batch: documents to insert or replace (Docs),
// ids to delete (IDs), or documents to patch (Patches).
type WriteOp struct {
	Kind WriteKind
	Docs DocSource
	IDs  []string
	// Expect, for a delete, holds the precondition of each of IDs (nil:
	// none).
	Expect  []sluice.Precondition
	Patches []Patch
	// Create makes a replace insert documents that do not exist.
	Create bool
}

// OpError is an error of WriteBatch caused by one of its ops: Index is the
// op's position, so that the caller can name the request part that failed.
type OpError struct {
	Index int
	Err   error
}

func (e *OpError) Error() string { return e.Err.Error() }
func (e *OpError) Unwrap() error { return e.Err }

// BatchResult is what WriteBatch answers: the ids each op wrote, and the
// commit. Replayed is set when the request's Idempotency-Key was
// recorded by an earlier write: it is the answer that write recorded
// (Idempotency.Answer), Commit is that write's (its Seq and UID), IDs is
// nil, and nothing was written.
type BatchResult struct {
	IDs      [][]string
	Commit   *sluice.Commit
	Replayed json.RawMessage
}

// WriteBatch runs several writes, in order, as one commit (one GraphQL
// request with several mutation fields). It needs the write role. Any
// error rolls the whole batch back. An error an op causes is an *OpError
// naming it, except that documents whose preconditions do not hold, in
// any op, fail the batch with one *sluice.StaleError naming them all.
// With opt.Idempotency, a key recorded by an earlier write answers that
// write's answer (BatchResult.Replayed). With opt.SchemaVersion, a
// database whose schema has another version now is an error matching
// ErrSchemaChanged, and nothing is written.
//
// Every op is read and validated before anything is written, so a batch
// of at most groupMax documents joins group commit as a REST request of
// that size does. Its documents and patches are charged to the write
// budget together first (batchSize), as a REST write's are one by one:
// past it the batch waits, then fails with the budget's error.
func (e *Engine) WriteBatch(ctx context.Context, u *sluice.User, org, name string, ops []WriteOp, opt WriteOptions) (*BatchResult, error) {
	// The documents are in memory: the batch can always run again.
	ops = slices.Clone(ops)
	rps := make([]*replay, len(ops))
	for i := range ops {
		if ops[i].Docs != nil {
			rps[i] = newReplay(ops[i].Docs, -1, -1)
			ops[i].Docs = rps[i]
		}
	}
	// The batch holds every document and patch it writes, validated and
	// encoded, until its commit is done: they are charged to the write
	// budget at once, once the user is known to have the write role and
	// before any is validated, as a REST write's documents are one at a
	// time (writeBudget). One charge for the whole batch, so that it
	// never waits while it holds some; kept if the batch runs again.
	charge := e.ChargeWrite(u)
	defer charge.Release()
	var pc *storedCharge // the stored documents its patches, replaces and deletes read
	for attempt := 0; ; attempt++ {
		d, s, err := e.Database(ctx, u, org, name, sluice.RoleWrite)
		if err != nil {
			return nil, err
		}
		if opt.SchemaVersion != 0 && d.SchemaVersion != opt.SchemaVersion {
			return nil, fmt.Errorf("%w: %w", ErrSchemaChanged, sluice.Errorf(sluice.CodeConflict,
				"the schema of %s changed after the request was validated; send it again", d.Path()))
		}
		if pc == nil {
			if err := charge.Grow(ctx, batchSize(ops, rps)); err != nil {
				return nil, err
			}
			pc = newStoredCharge(charge)
		}
		res, err := e.writeBatch(ctx, u, d, s, ops, opt, pc)
		again, err := pc.wait(ctx, err)
		if again {
			// Had the charge its stored documents needed: run again, as it
			// was, not as an attempt with the schema read afresh.
			attempt--
		} else if attempt > 0 || !e.outdated(ctx, d, err) {
			return res, err
		}
		for _, rp := range rps {
			if rp != nil {
				rp.rewind()
			}
		}
	}
}

// batchSize returns what the documents and patches of ops, a batch, are
// charged to the write budget: each document's JSON size (its text's
// length, or decodedJSONSize of a decoded one), and each patch's id and
// decodedJSONSize of its fields. Each op's documents are read from rps
// (its replay, which keeps them) and rewound. A delete holds only its
// ids, and is charged nothing, as a REST delete is not.
func batchSize(ops []WriteOp, rps []*replay) int64 {
	var n int64
	for i, op := range ops {
		for _, p := range op.Patches {
			n += int64(len(p.ID)) + decodedJSONSize(p.Fields)
		}
		if rps[i] == nil {
			continue
		}
		for {
			raw, err := rps[i].Next()
			if err != nil {
				break // io.EOF, or an error validation meets again
			}
			if raw.JSON != nil {
				n += int64(len(raw.JSON))
			} else {
				n += decodedJSONSize(raw.Map)
			}
		}
		rps[i].rewind()
	}
	return n
}

// writeBatch is WriteBatch with database d and its schema s.
func (e *Engine) writeBatch(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, ops []WriteOp, opt WriteOptions, pc *storedCharge) (*BatchResult, error) {
	if err := writable(d); err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, sluice.Errorf(sluice.CodeInvalid, "no writes in the request")
	}
	docs := make([][]*sluice.Document, len(ops))
	ids := make([][]string, len(ops))
	expects := make([][]sluice.Precondition, len(ops))
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, err
	}
	n := 0
	prepare := func() error {
		for i, op := range ops {
			var err error
			if op.Kind == WritePatch {
				ids[i], expects[i], err = checkPatches(s, role, op.Patches, false)
			} else {
				// Validation stops at the request's allowance of
				// documents, as a REST write's does, rather than after
				// every document of the op.
				left := -1
				if e.maxWriteDocuments > 0 {
					left = int(max(e.maxWriteDocuments-int64(n), 0))
				}
				docs[i], ids[i], err = batchOp(s, op, left, e.tooManyDocuments)
				if op.Kind == WriteDelete {
					// A delete's preconditions, for
					// checkLaterVersions as a patch's.
					expects[i] = op.Expect
				}
			}
			if err != nil {
				return &OpError{Index: i, Err: err}
			}
			if n += len(ids[i]); e.maxWriteDocuments > 0 && int64(n) > e.maxWriteDocuments {
				return &OpError{Index: i, Err: e.tooManyDocuments()}
			}
		}
		return checkLaterVersions(ids, docs, expects)
	}
	if err := prepare(); err != nil {
		c, answer, kerr := e.recorded(ctx, u, d, opt)
		if kerr != nil {
			return nil, kerr
		}
		if c == nil {
			return nil, err
		}
		return &BatchResult{Commit: c, Replayed: answer}, nil
	}
	spec := postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt), Group: n <= groupMax, Keep: keepHidden(role, s), Stored: pc,
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			for i, op := range ops {
				var err error
				if op.Kind == WritePatch {
					err = writePatches(ctx, w, s, role, op.Patches, ids[i], expects[i])
				} else {
					err = writeOp(ctx, w, op, docs[i])
				}
				if err != nil {
					return &OpError{Index: i, Err: err}
				}
				// An op's pipelined statements report their errors (a
				// duplicate id) when they are sent: send them before
				// the next op, so each error is known to be its op's.
				// The last op's go with the commit row.
				if i < len(ops)-1 {
					if err := w.Flush(ctx); err != nil {
						return &OpError{Index: i, Err: err}
					}
				}
			}
			return nil
		}}
	key := e.idempotencyKey(u, opt, func() ([]byte, error) {
		if opt.Idempotency.Answer != nil {
			return opt.Idempotency.Answer(ids)
		}
		return json.Marshal(ids)
	})
	spec.Idempotency = key
	commit, err := e.store.Write(ctx, spec)
	if errors.Is(err, postgres.ErrExists) && ops[opError(err, len(ops)).Index].Kind == WriteReplace {
		// Another request created a document this upsert had found
		// missing: run it again, which now updates that document.
		commit, err = e.store.Write(ctx, spec)
	}
	if err != nil {
		e.forgetDatabase(d)
		var stale *sluice.StaleError
		if errors.As(err, &stale) {
			// Every op's, not one's; shown on the op of its documents
			// when they are all one op's.
			return nil, staleOp(stale, ids)
		}
		return nil, opError(err, len(ops))
	}
	if key != nil && key.Replayed != nil {
		return &BatchResult{Commit: commit, Replayed: key.Replayed}, nil
	}
	return &BatchResult{IDs: ids, Commit: commit}, nil
}

// staleOp returns stale as the error of the op that writes all of its
// documents (ids: each op's), or as it is when they are several ops'.
func staleOp(stale *sluice.StaleError, ids [][]string) error {
	op := -1
	for _, d := range stale.Docs {
		i := slices.IndexFunc(ids, func(ids []string) bool { return slices.Contains(ids, d.ID) })
		if i < 0 || op >= 0 && i != op {
			return stale
		}
		op = i
	}
	if op < 0 {
		return stale
	}
	return &OpError{Index: op, Err: stale}
}

// checkLaterVersions refuses an op that expects a document to be at a
// version (_version) when an earlier op of the request writes it (expects:
// each patch's and each delete's precondition, docs: each replacement,
// which carries its own): the ops
// run in one transaction, so the later op would find the version the
// earlier one made, which no reader ever sees, and fail naming it. The
// precondition belongs on the document's first write. (Expecting it to
// exist, or not to, stays allowed: a delete and then a create is sound.)
func checkLaterVersions(ids [][]string, docs [][]*sluice.Document, expects [][]sluice.Precondition) error {
	written := map[string]int{} // by id, the first op that writes it
	for i := range ids {
		for k, id := range ids[i] {
			var p sluice.Precondition
			switch {
			case k < len(expects[i]):
				p = expects[i][k]
			case k < len(docs[i]):
				p = docs[i][k].Expect
			}
			if j, ok := written[id]; ok && j < i && p.Version != "" {
				return &OpError{Index: i, Err: sluice.Errorf(sluice.CodeInvalid,
					"document %s: its expected version (%s) is checked when the request first writes it, and an earlier write of this request writes it; give the version there", id, p.Version)}
			}
			if _, ok := written[id]; !ok {
				written[id] = i
			}
		}
	}
	return nil
}

// opError returns err, an error of a WriteBatch of n ops, as an *OpError:
// one that is not already is the last op's, whose statements are sent
// with the commit row.
func opError(err error, n int) *OpError {
	var oe *OpError
	if errors.As(err, &oe) {
		return oe
	}
	return &OpError{Index: n - 1, Err: err}
}

// batchOp reads and validates one op of WriteBatch, returning the
// documents to write (none for a delete) and the ids it writes. It reads
// at most left documents (< 0: no bound), answering tooMany's error at the
// next one.
func batchOp(s *sluice.Schema, op WriteOp, left int, tooMany func() error) ([]*sluice.Document, []string, error) {
	if op.Kind == WriteDelete {
		if err := checkDeleteIDs(s, op.IDs); err != nil {
			return nil, nil, err
		}
		return nil, op.IDs, nil
	}
	var docs []*sluice.Document
	var ids []string
	seen := map[string]bool{}
	for n := 0; ; n++ {
		raw, err := op.Docs.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err // names the document (DocSource)
		}
		if left >= 0 && n >= left {
			return nil, nil, tooMany()
		}
		doc, err := raw.Validate(s)
		if err != nil {
			return nil, nil, docError(n, raw.Label(), err)
		}
		if op.Kind == WriteInsert && !doc.Expect.None() {
			return nil, nil, docError(n, raw.Label(), errInsertPreconditionGraphQL)
		}
		if doc.ID == "" {
			if op.Kind == WriteReplace {
				return nil, nil, sluice.Errorf(sluice.CodeInvalid, "document %d: a replaced %s document needs an @id", n, doc.Type)
			}
			doc.ID = doc.Type + "/" + randomKey()
		}
		if seen[doc.ID] {
			return nil, nil, sluice.Errorf(sluice.CodeInvalid, "document %d: %s appears twice in the request", n, sluice.Echo(doc.ID))
		}
		seen[doc.ID] = true
		docs = append(docs, doc)
		ids = append(ids, doc.ID)
	}
	if len(docs) == 0 {
		return nil, nil, sluice.Errorf(sluice.CodeInvalid, "the request holds no documents")
	}
	return docs, ids, nil
}

// writeOp writes one op of WriteBatch, validated by batchOp, in chunks of
// chunkSize documents.
func writeOp(ctx context.Context, w *postgres.Writer, op WriteOp, docs []*sluice.Document) error {
	if op.Kind == WriteDelete {
		return w.Delete(ctx, op.IDs, op.Expect)
	}
	for start := 0; start < len(docs); start += chunkSize {
		chunk := docs[start:min(start+chunkSize, len(docs))]
		var err error
		if op.Kind == WriteInsert {
			err = w.Insert(ctx, chunk)
		} else {
			err = w.Replace(ctx, chunk, op.Create)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

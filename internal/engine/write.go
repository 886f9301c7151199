package engine

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// chunkSize is how many documents a large write sends to Postgres at a
// time. Chunks bound memory for a stream of any length (apart from the list
// of ids the response returns), and they let decoding and validating the
// next chunk overlap with Postgres writing this one: 250 keeps a 1,000
// document request in four steps, each large enough for COPY.
const chunkSize = 250

// chunkBytes bounds a chunk by the JSON text of its documents too (it
// ends with the document that reaches it), and a large write sends what
// it has queued once it has written that much: counted only in
// documents, 250 documents of 6 MB made one chunk, and a write of few
// large documents (up to max_body_bytes) held them all, decoded, encoded
// and queued for Postgres at once. 4 MiB still makes chunks of 60 KB
// documents large enough for COPY.
const chunkBytes = 4 << 20

// chunksAhead is how many validated chunks may wait for the writer.
const chunksAhead = 2

// DocSource yields the raw documents of a write request. Next returns
// io.EOF after the last one, and its errors name the document they are
// about ("document 3: …"). A document's JSON text may be reused by the
// following call to Next: validate it first.
type DocSource interface {
	Next() (schema.RawDocument, error)
}

// A readAhead source can read the rest of its input before a large
// write's transaction begins (a REST body into a temporary file), so that
// the transaction, its connection and its row locks do not wait for a
// slow client.
type readAhead interface {
	ReadAhead() error
}

// WriteOptions are the optional parameters of a write.
type WriteOptions struct {
	Author  string
	Message string
	// Create makes a replace insert documents that do not exist.
	Create bool
	// Expect is the precondition of the request's one document, given
	// apart from it (a REST request's If-Match or If-None-Match: *): a
	// request with one writes exactly one document, whose own "@version",
	// if any, must agree.
	Expect sluice.Precondition
	// Idempotency, when set, makes the write idempotent under its key.
	Idempotency *Idempotency
	// SchemaVersion, when not 0, is the schema version of the database
	// the request was validated against (a GraphQL operation): WriteBatch
	// refuses to write under another one with ErrSchemaChanged, so that
	// the request is validated again against the current schema rather
	// than refused by it halfway.
	SchemaVersion int
	// Charge, for Patch, is the write's charge of the write budget (a
	// REST PATCH's, holding its body), which Patch grows by the stored
	// documents it rewrites; nil: Patch charges them alone.
	Charge *WriteCharge
}

// Idempotency is a write's Idempotency-Key: the same key from the same
// user with the same request, within the retention, answers the first
// answer again without writing (see postgres.IdempotencyKey).
type Idempotency struct {
	Key string
	// Request returns the SHA-256 of what the request asks (a REST body
	// is then read to its end); it is called once the write has read the
	// request, before a grouped write joins a batch, or when the key is
	// found recorded.
	Request func() ([]byte, error)
	// Answer, for WriteBatch, returns what the request answers given the
	// ids each op wrote, recorded for a retry to answer again
	// (BatchResult.Replayed); nil records the ids, as JSON.
	Answer func(ids [][]string) ([]byte, error)
}

// maxIdempotencyKey is the longest Idempotency-Key accepted, in bytes.
const maxIdempotencyKey = 255

// IdempotencyKeyOf returns the key of a request's Idempotency-Key header
// values, "" when there are none: a string of 1 to 255 printable ASCII
// characters, quoted as a structured field string (the IETF draft's form)
// or not (Stripe's). Anything else is a CodeInvalid error.
func IdempotencyKeyOf(values []string) (string, error) {
	if len(values) == 0 {
		return "", nil
	}
	k := strings.TrimSpace(values[0])
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(k[1 : len(k)-1])
	}
	if len(values) > 1 || k == "" || len(k) > maxIdempotencyKey {
		return "", sluice.Errorf(sluice.CodeInvalid, "Idempotency-Key: give one key of 1 to %d characters, such as a UUID", maxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", sluice.Errorf(sluice.CodeInvalid, "Idempotency-Key: only printable ASCII characters, such as a UUID")
		}
	}
	return k, nil
}

// WriteResult is what a write answers: the ids it wrote, in request order,
// and the commit it made. Replayed is set when the write's Idempotency-Key
// had been recorded by an earlier write: the result is that write's (its
// ids, and its commit's Seq and UID), and nothing was written.
type WriteResult struct {
	IDs      []string
	Commit   *sluice.Commit
	Replayed bool
}

// Insert validates every document from src and inserts them all in one
// commit. Any invalid document, or one whose id exists, fails the whole
// request and nothing is written. A document may not carry a precondition
// ("@version"): it would never hold.
func (e *Engine) Insert(ctx context.Context, u *sluice.User, org, name string, src DocSource, opt WriteOptions) (*WriteResult, error) {
	if !opt.Expect.None() {
		return nil, errInsertPrecondition
	}
	return e.writeDocs(ctx, u, org, name, src, opt, true, func(ctx context.Context, w *postgres.Writer, r *postgres.Rows) error {
		return w.InsertRows(ctx, r)
	})
}

var errInsertPrecondition = sluice.Errorf(sluice.CodeInvalid, "an insert takes no precondition (If-Match, If-None-Match, \"@version\"): it fails anyway when the document exists; to write only a document's given version, replace it (PUT)")

// errInsertPreconditionGraphQL is errInsertPrecondition in GraphQL's
// words, for _insertDocuments, which has no headers and no PUT.
var errInsertPreconditionGraphQL = sluice.Errorf(sluice.CodeInvalid, "an insert takes no precondition (\"@version\"): it fails anyway when the document exists; to write only a document's given version, replace it (_replaceDocuments)")

// Replace validates every document from src and replaces them all in one
// commit (inserting missing ones when opt.Create is set). A document whose
// precondition (its "@version", or opt.Expect) does not hold is not
// written, and fails the request with a *sluice.StaleError naming every
// such document.
func (e *Engine) Replace(ctx context.Context, u *sluice.User, org, name string, src DocSource, opt WriteOptions) (*WriteResult, error) {
	return e.writeDocs(ctx, u, org, name, src, opt, false, func(ctx context.Context, w *postgres.Writer, r *postgres.Rows) error {
		return w.ReplaceRows(ctx, r, opt.Create)
	})
}

// Delete deletes the documents with the given ids in one commit. An id that
// names no document fails the whole request; so does one whose
// precondition (expect[i], when expect is not nil) does not hold (a
// *sluice.StaleError). opt.Expect applies to a request of one id.
func (e *Engine) Delete(ctx context.Context, u *sluice.User, org, name string, ids []string, expect []sluice.Precondition, opt WriteOptions) (*WriteResult, error) {
	if !opt.Expect.None() {
		if len(ids) != 1 || expect != nil && !expect[0].None() && expect[0] != opt.Expect {
			return nil, errOnePrecondition
		}
		expect = []sluice.Precondition{opt.Expect}
	}
	// The stored documents it deletes are charged to the write budget
	// (see storedCharge).
	charge := opt.Charge
	if charge == nil {
		charge = e.ChargeWrite(u)
		defer charge.Release()
	}
	sc := newStoredCharge(charge)
	var res *WriteResult
	err := e.current(ctx, u, org, name, sluice.RoleWrite, func(d *sluice.Database, s *sluice.Schema) error {
		if err := writable(d); err != nil {
			return err
		}
		for {
			var err error
			res, err = e.deleteWith(ctx, u, d, s, ids, expect, opt, sc)
			if again, err := sc.wait(ctx, err); !again {
				return err
			}
		}
	})
	return res, err
}

// deleteWith is Delete with database d and its schema s, charging the
// stored documents it deletes to sc.
func (e *Engine) deleteWith(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, ids []string, expect []sluice.Precondition, opt WriteOptions, sc *storedCharge) (*WriteResult, error) {
	if e.maxWriteDocuments > 0 && int64(len(ids)) > e.maxWriteDocuments {
		return e.refused(ctx, u, d, opt, e.tooManyDocuments())
	}
	if err := checkDeleteIDs(s, ids); err != nil {
		return e.refused(ctx, u, d, opt, err)
	}
	for _, p := range expect {
		if p.Absent {
			return e.refused(ctx, u, d, opt, sluice.Errorf(sluice.CodeInvalid, "a delete cannot require that its document does not exist (If-None-Match: *)"))
		}
	}
	res := &WriteResult{IDs: ids}
	spec := postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt), Group: true, Stored: sc,
		Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Delete(ctx, ids, expect) }}
	return e.write(ctx, u, d, spec, opt, res)
}

// errOnePrecondition refuses a precondition given apart from the
// documents (If-Match) for a request of several, or that disagrees with
// its document's own.
var errOnePrecondition = sluice.Errorf(sluice.CodeInvalid, "If-Match and If-None-Match apply to a request of one document, and must agree with its \"@version\" if it has one; give each document of a larger request its own \"@version\"")

// write runs spec, the write of res.IDs, with opt's idempotency key, and
// returns res with its commit (an earlier write's, res.Replayed set, when
// the key was recorded).
func (e *Engine) write(ctx context.Context, u *sluice.User, d *sluice.Database, spec postgres.WriteSpec, opt WriteOptions, res *WriteResult) (*WriteResult, error) {
	key := e.idempotencyKey(u, opt, func() ([]byte, error) { return json.Marshal(res.IDs) })
	spec.Idempotency = key
	if spec.Group {
		defer processLoadGC.serving()()
	}
	c, err := e.store.Write(ctx, spec)
	if err != nil {
		e.forgetDatabase(d)
		return nil, err
	}
	res.Commit = c
	if key != nil && key.Replayed != nil {
		res.Replayed = true
		if err := json.Unmarshal(key.Replayed, &res.IDs); err != nil {
			return nil, fmt.Errorf("idempotency key's answer: %w", err)
		}
	}
	return res, nil
}

// idempotencyKey returns the storage's key of opt's Idempotency (nil
// without one), whose answer is what answer returns.
func (e *Engine) idempotencyKey(u *sluice.User, opt WriteOptions, answer func() ([]byte, error)) *postgres.IdempotencyKey {
	if opt.Idempotency == nil {
		return nil
	}
	return &postgres.IdempotencyKey{UserID: u.ID, Key: opt.Idempotency.Key, Request: opt.Idempotency.Request, Answer: answer,
		Retention: e.idempotency.retention, MaxKeys: e.idempotency.maxKeys}
}

// checkDeleteIDs refuses a list of ids to delete that is empty, names a
// class without documents of its own (see checkIDClass), or names a
// document twice.
func checkDeleteIDs(s *sluice.Schema, ids []string) error {
	if len(ids) == 0 {
		return sluice.Errorf(sluice.CodeInvalid, "no document ids to delete")
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := checkIDClass(s, id); err != nil {
			return err
		}
		if seen[id] {
			return sluice.Errorf(sluice.CodeInvalid, "document %s is listed twice", id)
		}
		seen[id] = true
	}
	return nil
}

// checkIDClass refuses a document id that is not <Class>/<key> with Class
// a class of s with documents of its own. An id of an abstract class, a
// subdocument type or a class s lacks can name no document: every method
// (a read, a patch, a delete, a write of a document with that "@type")
// answers it 400 saying why, rather than 404 for some and 400 for others.
func checkIDClass(s *sluice.Schema, id string) error {
	class, key, ok := strings.Cut(id, "/")
	if !ok || key == "" {
		return sluice.Errorf(sluice.CodeInvalid, "invalid document id %s: want <Class>/<key>", sluice.Echo(id))
	}
	if err := schema.CheckDocumentClass(s, class); err != nil {
		return sluice.Errorf(sluice.CodeInvalid, "invalid document id %s: %s", sluice.Echo(id), sluice.ErrorMessage(err))
	}
	return nil
}

func (e *Engine) meta(u *sluice.User, opt WriteOptions) postgres.CommitMeta {
	return postgres.CommitMeta{Author: opt.Author, Message: opt.Message, User: u.Name}
}

// writable refuses user writes to _system, which only the daemon writes.
func writable(d *sluice.Database) error {
	if d.Org == sluice.SystemOrg {
		return sluice.Errorf(sluice.CodeForbidden, "the _system database is written only by Sluice itself")
	}
	return nil
}

type writeFunc func(ctx context.Context, w *postgres.Writer, r *postgres.Rows) error

// groupMax is the largest request, in documents, that joins group commit
// (postgres.WriteSpec.Group): its documents are read before it is written.
// A larger one, of any length, is validated and written chunk by chunk in
// a transaction of its own, as it is read.
const groupMax = 100

// groupBytes is the most JSON text of documents a request joining group
// commit holds (groupMax bounds only their number): one with more, even a
// single document, is written as a large one, in chunks of chunkBytes.
const groupBytes = 1 << 20

// writeDocs runs one document write request. An insert allows documents
// without an @id, which get a random key. A request of at most groupMax
// documents joins group commit; a larger one is written as it is read.
func (e *Engine) writeDocs(ctx context.Context, u *sluice.User, org, name string, src DocSource, opt WriteOptions, insert bool, write writeFunc) (*WriteResult, error) {
	rp := newReplay(src, groupMax+1, groupBytes)
	for attempt := 0; ; attempt++ {
		d, s, err := e.Database(ctx, u, org, name, sluice.RoleWrite)
		if err != nil {
			return nil, err
		}
		res, err := e.writeDocsWith(ctx, u, d, s, rp, opt, insert, write)
		if attempt > 0 || !e.outdated(ctx, d, err) || !rp.rewind() {
			return res, err
		}
	}
}

// writeDocsWith is writeDocs with database d and its schema s.
func (e *Engine) writeDocsWith(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, src DocSource, opt WriteOptions, insert bool, write writeFunc) (*WriteResult, error) {
	if err := writable(d); err != nil {
		return nil, err
	}
	v := &validator{schema: s, src: src, newIDs: insert, seen: map[string]bool{}, expect: opt.Expect, max: e.maxWriteDocuments, tooMany: e.tooManyDocuments,
		budget: e.writeBytes, user: budgetUserOf(u)}
	// What the validator holds of the budget when the write ends (its
	// first documents' after a small write, the chunk a large write's
	// reader was building) goes back then; it runs after the reader has
	// stopped (deferred before it).
	defer v.giveBack()
	// The first documents, up to groupMax and groupBytes, decide whether
	// the request is small (group commit) or large. A small request may
	// not wait for the budget while it holds some of it (two could wait
	// for each other): one whose next document must wait becomes a large
	// one, which writes what it holds first.
	var first []*sluice.Document
	firstBytes, large := 0, false
	for !large {
		doc, err := v.next(ctx, len(first) == 0)
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errWouldWait) {
			large = true
			break
		}
		if err != nil {
			return e.refused(ctx, u, d, opt, err)
		}
		first = append(first, doc)
		firstBytes += v.size
		large = len(first) > groupMax || firstBytes > groupBytes
	}
	if len(first) == 0 {
		return e.refused(ctx, u, d, opt, errNoDocuments)
	}
	answer := func() ([]byte, error) { return json.Marshal(v.ids) }
	var keep func(replacement, stored []byte) (*sluice.Document, error)
	if !insert {
		role, err := e.Role(ctx, u, d)
		if err != nil {
			return nil, err
		}
		keep = keepHidden(role, s)
	}
	if !large {
		// A small replace is charged the stored documents it replaces
		// (see storedCharge), on a charge that takes over what the
		// validator holds for its documents, so that a replace that
		// must wait for it waits holding nothing.
		var stored *storedCharge
		if !insert {
			charge := &WriteCharge{budget: e.writeBytes, user: v.user, held: v.held}
			v.held = 0
			defer charge.Release()
			stored = newStoredCharge(charge)
		}
		r, err := postgres.EncodeRows(s, first)
		if err != nil {
			return nil, err
		}
		spec := postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt), Group: true, Keep: keep,
			Documents: func(ctx context.Context, w *postgres.Writer) error { return write(ctx, w, r) }}
		if stored != nil {
			spec.Stored = stored
		}
		res := &WriteResult{IDs: v.ids}
		rerun := false
		for {
			out, err := e.write(ctx, u, d, spec, opt, res)
			if !insert && errors.Is(err, postgres.ErrExists) && !rerun {
				// Another request created a document this upsert had
				// found missing: run it again, which now updates that
				// document.
				rerun = true
				continue
			}
			if stored != nil {
				var again bool
				if again, err = stored.wait(ctx, err); again {
					continue
				}
			}
			if err != nil {
				return nil, upsertError(insert, err)
			}
			return out, nil
		}
	}
	if ra, ok := src.(readAhead); ok {
		if err := ra.ReadAhead(); err != nil {
			return e.refused(ctx, u, d, opt, err)
		}
	}
	// A large request: a goroutine reads, validates and encodes the rest
	// while this one writes the chunks before it. The collector's target
	// is raised for many documents only: for a few large ones it would
	// let the garbage of their copies grow to several times the budget.
	if len(first) > groupMax {
		processGC.begin(e.gcPercent)
		defer processGC.end(e.gcPercent)
	}
	// unsentCharge is the charge of the documents written whose
	// statements the Writer may not have sent yet (the first documents',
	// to begin with): it goes back once they are sent, or when the write
	// ends.
	unsentCharge := v.held
	v.held = 0
	defer func() { e.writeBytes.give(v.user, unsentCharge) }()
	var chunks *chunkReader
	// Stopped on every way out, a panic too (the reader would wait to
	// send, and read the body after the handler returned); stopping
	// twice is harmless.
	defer func() {
		if chunks != nil {
			chunks.stop()
		}
	}()
	key := e.idempotencyKey(u, opt, answer)
	// A large replace's stored documents are not charged: it cannot run
	// again, and waiting for their charge inside its transaction would
	// wait for what its own reader holds (see storedCharge).
	spec := postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt), Idempotency: key, Keep: keep}
	spec.Documents = func(ctx context.Context, w *postgres.Writer) error {
		// The reader starts once the transaction has begun. Started
		// before, it kept a core busy validating, and with two cores
		// the reply to BEGIN waited for this goroutine to be scheduled
		// (figures in docs/benchmarks.md, "Measured choices in the code").
		encode := func(docs []*sluice.Document) (*postgres.Rows, error) { return postgres.EncodeRows(s, docs) }
		if insert {
			encode = w.InsertEncoder() // rows ready for COPY
		}
		chunks = v.readChunks(ctx, encode)
		// unsent counts the JSON of the documents written since
		// their statements were last sent: the Writer holds back
		// those it need not send yet (an insert of fewer rows than
		// COPY takes, change rows), and past chunkBytes they are
		// sent, so that it holds no more than a chunk of them. They
		// are sent too when the reader waits for the budget, which
		// their charge may be keeping from it.
		unsent := 0
		send := func() error {
			unsent = 0
			err := w.Flush(ctx)
			e.writeBytes.give(v.user, unsentCharge)
			unsentCharge = 0
			return err
		}
		// The documents read before the request was known to be
		// large are encoded and written here, while the reader
		// validates the next chunk: handed to the reader, they
		// waited for it to be scheduled first (docs/benchmarks.md,
		// "Measured choices in the code").
		r, err := encode(first)
		if err != nil {
			return err
		}
		first = nil // held by r now (a large write's Documents runs once)
		if err := write(ctx, w, r); err != nil {
			return err
		}
		if unsent = firstBytes; unsent >= chunkBytes {
			if err := send(); err != nil {
				return err
			}
		}
		for {
			if unsentCharge > 0 && chunks.starving.Load() {
				if err := send(); err != nil {
					return err
				}
			}
			var c chunk
			var ok bool
			select {
			case c, ok = <-chunks.out:
			case <-chunks.starved:
				continue
			}
			if !ok {
				return chunks.wait()
			}
			unsentCharge += c.charge
			if err := write(ctx, w, c.rows); err != nil {
				return err
			}
			if unsent += c.bytes; unsent >= chunkBytes {
				if err := send(); err != nil {
					return err
				}
			}
		}
	}
	c, err := e.store.Write(ctx, spec)
	if chunks != nil {
		chunks.stop() // before v.ids is read: the reader appends to it
	}
	if err != nil {
		e.forgetDatabase(d)
		return nil, upsertError(insert, err)
	}
	res := &WriteResult{IDs: v.ids, Commit: c}
	if key != nil && key.Replayed != nil {
		res.Replayed = true
		if err := json.Unmarshal(key.Replayed, &res.IDs); err != nil {
			return nil, fmt.Errorf("idempotency key's answer: %w", err)
		}
	}
	return res, nil
}

// refused answers a write refused before it ran (an invalid request): with
// an idempotency key, a write that recorded the key answers instead (see
// recorded).
func (e *Engine) refused(ctx context.Context, u *sluice.User, d *sluice.Database, opt WriteOptions, err error) (*WriteResult, error) {
	c, answer, kerr := e.recorded(ctx, u, d, opt)
	if kerr != nil {
		return nil, kerr
	}
	if c == nil {
		return nil, err
	}
	res := &WriteResult{Commit: c, Replayed: true}
	if err := json.Unmarshal(answer, &res.IDs); err != nil {
		return nil, fmt.Errorf("idempotency key's answer: %w", err)
	}
	return res, nil
}

// Replayed returns the commit and the recorded answer of an earlier
// write of user u to database d whose Idempotency-Key was key and whose
// request hashed to request, within idempotency_retention; a nil commit
// when there is none (the key is not recorded, was another request's, or
// expired): the request then runs, and its write answers a key of
// another request as every write does. While another request holds the
// key (it is still running), the error is the Conflict a write with the
// key answers. A GraphQL request looks its key up with it before it is
// parsed and validated, as a REST write does before it reads its body,
// so that a retry answers the first answer (or that the first still
// runs) even when the schema changed since and would refuse the request
// now. A user without the write role on d gets none (nil commit,
// nil error): the request then runs, and its mutation is refused as
// another write of that user would be, as a REST retry is.
func (e *Engine) Replayed(ctx context.Context, u *sluice.User, d *sluice.Database, key string, request []byte) (*sluice.Commit, []byte, error) {
	// The GraphQL request was authorized for reading only: the user may
	// have lost the write role since the first request.
	role, err := e.Role(ctx, u, d)
	if err != nil || role < sluice.RoleWrite {
		return nil, nil, err
	}
	return e.store.RecordedAnswer(ctx, d, u.ID, key, request, e.idempotency.retention)
}

// recorded looks up opt's idempotency key for a write refused before it
// ran: a retry of a write that succeeded answers as it did (the commit and
// the answer it recorded), even if the request would not be valid now.
// The key's own refusal (another request with it, or one still running)
// is the error. Without a key, or with one not recorded, the commit is
// nil.
func (e *Engine) recorded(ctx context.Context, u *sluice.User, d *sluice.Database, opt WriteOptions) (*sluice.Commit, []byte, error) {
	key := e.idempotencyKey(u, opt, nil)
	if key == nil {
		return nil, nil, nil
	}
	c, err := e.store.Recorded(ctx, d, key)
	if err != nil || c == nil {
		return nil, nil, err
	}
	return c, key.Replayed, nil
}

var errNoDocuments = sluice.Errorf(sluice.CodeInvalid, "the request holds no documents")

// upsertError explains the error of a replace with create (not an insert)
// that found a document missing and then could not create it: another
// request created it meanwhile. (A large request is not run again: its
// body has been read.)
func upsertError(insert bool, err error) error {
	if insert || !errors.Is(err, postgres.ErrExists) {
		return err
	}
	return sluice.Errorf(sluice.CodeConflict, "%s: another request created it while this one ran; retry", sluice.ErrorMessage(err))
}

// validator reads documents from a request, validates each against the
// schema, assigns missing ids and refuses an id given twice.
type validator struct {
	schema *sluice.Schema
	src    DocSource
	newIDs bool
	seen   map[string]bool
	ids    []string
	// expect is the precondition given apart from the documents (see
	// WriteOptions.Expect): it applies to the request's one document.
	expect sluice.Precondition
	// max is the most documents the request may hold (the ids it keeps,
	// and answers, grow with them); tooMany is the error past it.
	max     int64
	tooMany func() error
	// budget is charged the JSON size of each document read, for user;
	// held is what the validator holds of it, for the documents it
	// returned that are not yet handed on (given back by the write, or
	// giveBack).
	budget *writeBudget
	user   budgetUser
	held   int64
	// size is the JSON size of the last document returned.
	size int
	// waiting is a document read whose charge could not be had without
	// waiting (errWouldWait): the next call returns it.
	waiting *schema.RawDocument
	// starving, when set, is told when the validator starts and stops
	// waiting for the budget.
	starving func(bool)
}

// giveBack gives back what the validator holds of the budget.
func (v *validator) giveBack() {
	v.budget.give(v.user, v.held)
	v.held = 0
}

// chunk is a chunk of a large write, encoded, with its documents' JSON
// size and their charge to the budget (given back once it is written).
type chunk struct {
	rows   *postgres.Rows
	bytes  int
	charge int64
}

// chunkReader reads, validates and encodes the rest of a large request on
// a goroutine of its own, in chunks of chunkSize, so that this CPU work
// overlaps with Postgres writing the chunks before.
type chunkReader struct {
	out     chan chunk
	stopped atomic.Bool
	// starving is set while the reader waits for the budget, and starved
	// wakes the writer when it starts to: what the writer holds back may
	// be what the reader waits for.
	starving atomic.Bool
	starved  chan struct{}
	// cancel ends a wait of the reader for the budget.
	cancel context.CancelFunc
	// give gives back a chunk's charge (one stop drops).
	give func(int64)
	done chan struct{}
	err  error // the reader's error, set before done is closed
}

// readChunks starts reading the documents not read yet, encoding each
// chunk with encode.
// The caller ranges over out, then calls wait for the reader's error, and
// in every case calls stop before the request ends: the request body must
// not be read after the handler returns.
func (v *validator) readChunks(ctx context.Context, encode func([]*sluice.Document) (*postgres.Rows, error)) *chunkReader {
	ctx, cancel := context.WithCancel(ctx)
	cr := &chunkReader{out: make(chan chunk, chunksAhead), done: make(chan struct{}), cancel: cancel,
		give: func(n int64) { v.budget.give(v.user, n) }, starved: make(chan struct{}, 1)}
	v.starving = func(on bool) {
		cr.starving.Store(on)
		if on {
			select {
			case cr.starved <- struct{}{}:
			default: // the writer has yet to see the last one
			}
		}
	}
	go func() {
		defer close(cr.done)
		defer close(cr.out)
		cr.err = v.sendChunks(ctx, encode, cr)
	}()
	return cr
}

func (v *validator) sendChunks(ctx context.Context, encode func([]*sluice.Document) (*postgres.Rows, error), cr *chunkReader) error {
	docs := make([]*sluice.Document, 0, chunkSize)
	size := 0
	send := func() error {
		r, err := encode(docs)
		if err != nil {
			return err
		}
		cr.out <- chunk{rows: r, bytes: size, charge: v.held}
		v.held = 0
		docs, size = make([]*sluice.Document, 0, chunkSize), 0
		return nil
	}
	for !cr.stopped.Load() {
		if len(docs) >= chunkSize || size >= chunkBytes {
			if err := send(); err != nil {
				return err
			}
		}
		// The reader waits for the budget only with an empty chunk:
		// the chunks it sent are given back as they are written, and
		// one it held would never be.
		doc, err := v.next(ctx, len(docs) == 0)
		if errors.Is(err, errWouldWait) {
			if err := send(); err != nil {
				return err
			}
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(docs) > 0 {
				return send()
			}
			return nil
		}
		if err != nil {
			return err
		}
		docs = append(docs, doc)
		size += v.size
	}
	return nil
}

// wait returns the reader's error once it is done; call it after out is
// closed.
func (cr *chunkReader) wait() error {
	<-cr.done
	return cr.err
}

// stop makes the reader stop at its next document and waits for it; it
// may be called again.
func (cr *chunkReader) stop() {
	cr.stopped.Store(true)
	cr.cancel()
	for c := range cr.out { // unblocks a reader waiting to send
		cr.give(c.charge)
	}
	<-cr.done
}

// next returns the next document, validated, having charged its JSON
// size to the budget first. When the charge cannot be had at once it
// waits for it if mayWait is set, and otherwise returns errWouldWait,
// keeping the document for the next call.
func (v *validator) next(ctx context.Context, mayWait bool) (*sluice.Document, error) {
	n := len(v.ids)
	var raw schema.RawDocument
	if v.waiting != nil {
		raw, v.waiting = *v.waiting, nil
	} else {
		var err error
		if raw, err = v.src.Next(); err != nil {
			return nil, err // io.EOF, or an error naming the document
		}
		if v.max > 0 && int64(n) >= v.max {
			return nil, v.tooMany()
		}
	}
	v.size = len(raw.JSON)
	if v.budget != nil && v.size > 0 {
		charge, ok := v.budget.tryTake(v.user, int64(v.size))
		if !ok {
			if !mayWait {
				v.waiting = &raw // src's text stays valid: src is not read before it is used
				return nil, errWouldWait
			}
			if v.starving != nil {
				v.starving(true)
			}
			var err error
			charge, err = v.budget.take(ctx, v.user, int64(v.size))
			if v.starving != nil {
				v.starving(false)
			}
			if err != nil {
				return nil, err
			}
		}
		v.held += charge
	}
	doc, err := raw.Validate(v.schema)
	if err != nil {
		return nil, docError(n, raw.Label(), err)
	}
	if v.newIDs && !doc.Expect.None() {
		return nil, docError(n, raw.Label(), errInsertPrecondition)
	}
	if !v.expect.None() {
		if n > 0 || !doc.Expect.None() && doc.Expect != v.expect {
			return nil, errOnePrecondition
		}
		doc.Expect = v.expect
	}
	if doc.ID == "" {
		if !v.newIDs {
			return nil, docError(n, "", sluice.Errorf(sluice.CodeInvalid, "a replaced %s document needs an @id", doc.Type))
		}
		doc.ID = doc.Type + "/" + randomKey()
	}
	if v.seen[doc.ID] {
		return nil, sluice.Errorf(sluice.CodeInvalid, "document %d: %s appears twice in the request", n, sluice.Echo(doc.ID))
	}
	v.seen[doc.ID] = true
	v.ids = append(v.ids, doc.ID)
	return doc, nil
}

// docError prefixes a validation error with which document of the request
// it is about: its position and, when it has one, its label (its @id, its
// line in an NDJSON body: schema.RawDocument.Label).
func docError(n int, id string, err error) error {
	var se *sluice.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("document %d: %w", n, err)
	}
	which := fmt.Sprintf("document %d", n)
	if id != "" {
		which += fmt.Sprintf(" (%s)", id)
	}
	return sluice.Errorf(se.Code, "%s: %s", which, se.Message)
}

var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// randomKey returns a new random document key (80 bits).
func randomKey() string {
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return keyEncoding.EncodeToString(b)
}

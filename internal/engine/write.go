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
	var res *WriteResult
	err := e.current(ctx, u, org, name, sluice.RoleWrite, func(d *sluice.Database, s *sluice.Schema) error {
		if err := writable(d); err != nil {
			return err
		}
		var err error
		res, err = e.deleteWith(ctx, u, d, s, ids, expect, opt)
		return err
	})
	return res, err
}

// deleteWith is Delete with database d and its schema s.
func (e *Engine) deleteWith(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, ids []string, expect []sluice.Precondition, opt WriteOptions) (*WriteResult, error) {
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
	spec := postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt), Group: true,
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
// class the schema lacks, or names a document twice.
func checkDeleteIDs(s *sluice.Schema, ids []string) error {
	if len(ids) == 0 {
		return sluice.Errorf(sluice.CodeInvalid, "no document ids to delete")
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		class, key, ok := strings.Cut(id, "/")
		if !ok || key == "" || s.Class(class) == nil {
			return sluice.Errorf(sluice.CodeInvalid, "invalid document id %q: want <Class>/<key> with a class of the schema", id)
		}
		if seen[id] {
			return sluice.Errorf(sluice.CodeInvalid, "document %s is listed twice", id)
		}
		seen[id] = true
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

// writeDocs runs one document write request. An insert allows documents
// without an @id, which get a random key. A request of at most groupMax
// documents joins group commit; a larger one is written as it is read.
func (e *Engine) writeDocs(ctx context.Context, u *sluice.User, org, name string, src DocSource, opt WriteOptions, insert bool, write writeFunc) (*WriteResult, error) {
	rp := newReplay(src, groupMax+1)
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
	v := &validator{schema: s, src: src, newIDs: insert, seen: map[string]bool{}, expect: opt.Expect, max: e.maxWriteDocuments, tooMany: e.tooManyDocuments}
	var first []*sluice.Document
	for len(first) <= groupMax {
		doc, err := v.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return e.refused(ctx, u, d, opt, err)
		}
		first = append(first, doc)
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
	if len(first) <= groupMax {
		r, err := postgres.EncodeRows(s, first)
		if err != nil {
			return nil, err
		}
		spec := postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt), Group: true, Keep: keep,
			Documents: func(ctx context.Context, w *postgres.Writer) error { return write(ctx, w, r) }}
		res := &WriteResult{IDs: v.ids}
		out, err := e.write(ctx, u, d, spec, opt, res)
		if !insert && errors.Is(err, postgres.ErrExists) {
			// Another request created a document this upsert had found
			// missing: run it again, which now updates that document.
			out, err = e.write(ctx, u, d, spec, opt, res)
		}
		if err != nil {
			return nil, upsertError(insert, err)
		}
		return out, nil
	}
	if ra, ok := src.(readAhead); ok {
		if err := ra.ReadAhead(); err != nil {
			return e.refused(ctx, u, d, opt, err)
		}
	}
	// A large request: a goroutine reads, validates and encodes the rest
	// while this one writes the chunks before it.
	processGC.begin(e.gcPercent)
	defer processGC.end(e.gcPercent)
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
	c, err := e.store.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt), Idempotency: key, Keep: keep,
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			// The reader starts once the transaction has begun. Started
			// before, it kept a core busy validating, and with two cores
			// the reply to BEGIN waited for this goroutine to be scheduled
			// (figures in docs/benchmarks.md, "Measured choices in the code").
			encode := func(docs []*sluice.Document) (*postgres.Rows, error) { return postgres.EncodeRows(s, docs) }
			if insert {
				encode = w.InsertEncoder() // rows ready for COPY
			}
			chunks = v.readChunks(encode)
			// The documents read before the request was known to be
			// large are encoded and written here, while the reader
			// validates the next chunk: handed to the reader, they
			// waited for it to be scheduled first (docs/benchmarks.md,
			// "Measured choices in the code").
			r, err := encode(first)
			if err != nil {
				return err
			}
			if err := write(ctx, w, r); err != nil {
				return err
			}
			for r := range chunks.out {
				if err := write(ctx, w, r); err != nil {
					return err
				}
			}
			return chunks.wait()
		}})
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
// another request, or one still running, as every write does. A GraphQL
// request looks its key up with it before it is parsed and validated, as
// a REST write does before it reads its body, so that a retry answers the
// first answer even when the schema changed since and would refuse the
// request now. A user without the write role on d gets none (nil commit,
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
}

// chunkReader reads, validates and encodes the rest of a large request on
// a goroutine of its own, in chunks of chunkSize, so that this CPU work
// overlaps with Postgres writing the chunks before.
type chunkReader struct {
	out     chan *postgres.Rows
	stopped atomic.Bool
	done    chan struct{}
	err     error // the reader's error, set before done is closed
}

// readChunks starts reading the documents not read yet, encoding each
// chunk with encode.
// The caller ranges over out, then calls wait for the reader's error, and
// in every case calls stop before the request ends: the request body must
// not be read after the handler returns.
func (v *validator) readChunks(encode func([]*sluice.Document) (*postgres.Rows, error)) *chunkReader {
	cr := &chunkReader{out: make(chan *postgres.Rows, chunksAhead), done: make(chan struct{})}
	go func() {
		defer close(cr.done)
		defer close(cr.out)
		cr.err = v.sendChunks(encode, cr)
	}()
	return cr
}

func (v *validator) sendChunks(encode func([]*sluice.Document) (*postgres.Rows, error), cr *chunkReader) error {
	chunk := make([]*sluice.Document, 0, chunkSize)
	send := func() error {
		r, err := encode(chunk)
		if err != nil {
			return err
		}
		cr.out <- r
		chunk = make([]*sluice.Document, 0, chunkSize)
		return nil
	}
	for !cr.stopped.Load() {
		if len(chunk) >= chunkSize {
			if err := send(); err != nil {
				return err
			}
		}
		doc, err := v.next()
		if errors.Is(err, io.EOF) {
			if len(chunk) > 0 {
				return send()
			}
			return nil
		}
		if err != nil {
			return err
		}
		chunk = append(chunk, doc)
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
	for range cr.out { // unblocks a reader waiting to send
	}
	<-cr.done
}

func (v *validator) next() (*sluice.Document, error) {
	n := len(v.ids)
	raw, err := v.src.Next()
	if err != nil {
		return nil, err // io.EOF, or an error naming the document
	}
	if v.max > 0 && int64(n) >= v.max {
		return nil, v.tooMany()
	}
	doc, err := raw.Validate(v.schema)
	if err != nil {
		return nil, docError(n, raw.ID(), err)
	}
	if v.newIDs && !doc.Expect.None() {
		return nil, docError(n, raw.ID(), errInsertPrecondition)
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
		return nil, sluice.Errorf(sluice.CodeInvalid, "document %d: %s appears twice in the request", n, doc.ID)
	}
	v.seen[doc.ID] = true
	v.ids = append(v.ids, doc.ID)
	return doc, nil
}

// docError prefixes a validation error with which document of the request
// it is about: its position and, when it has one, its @id.
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

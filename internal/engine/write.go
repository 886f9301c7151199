package engine

import (
	"context"
	"crypto/rand"
	"encoding/base32"
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

// WriteOptions are the optional parameters of a write.
type WriteOptions struct {
	Author  string
	Message string
	// Create makes a replace insert documents that do not exist.
	Create bool
}

// WriteResult is what a write answers: the ids it wrote, in request order,
// and the commit it made.
type WriteResult struct {
	IDs    []string
	Commit *sluice.Commit
}

// Insert validates every document from src and inserts them all in one
// commit. Any invalid document, or one whose id exists, fails the whole
// request and nothing is written.
func (e *Engine) Insert(ctx context.Context, u *sluice.User, org, name string, src DocSource, opt WriteOptions) (*WriteResult, error) {
	return e.writeDocs(ctx, u, org, name, src, opt, true, func(ctx context.Context, w *postgres.Writer, r *postgres.Rows) error {
		return w.InsertRows(ctx, r)
	})
}

// Replace validates every document from src and replaces them all in one
// commit (inserting missing ones when opt.Create is set).
func (e *Engine) Replace(ctx context.Context, u *sluice.User, org, name string, src DocSource, opt WriteOptions) (*WriteResult, error) {
	return e.writeDocs(ctx, u, org, name, src, opt, false, func(ctx context.Context, w *postgres.Writer, r *postgres.Rows) error {
		return w.ReplaceRows(ctx, r, opt.Create)
	})
}

// Delete deletes the documents with the given ids in one commit. An id that
// names no document fails the whole request.
func (e *Engine) Delete(ctx context.Context, u *sluice.User, org, name string, ids []string, opt WriteOptions) (*WriteResult, error) {
	var c *sluice.Commit
	err := e.current(ctx, u, org, name, sluice.RoleWrite, func(d *sluice.Database, s *sluice.Schema) error {
		if err := writable(d); err != nil {
			return err
		}
		if err := checkDeleteIDs(s, ids); err != nil {
			return err
		}
		var err error
		c, err = e.store.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt), Group: true,
			Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Delete(ctx, ids) }})
		if err != nil {
			e.forgetDatabase(d)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &WriteResult{IDs: ids, Commit: c}, nil
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
	v := &validator{schema: s, src: src, newIDs: insert, seen: map[string]bool{}}
	var first []*sluice.Document
	for len(first) <= groupMax {
		doc, err := v.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		first = append(first, doc)
	}
	if len(first) == 0 {
		return nil, sluice.Errorf(sluice.CodeInvalid, "the request holds no documents")
	}
	if len(first) <= groupMax {
		r, err := postgres.EncodeRows(s, first)
		if err != nil {
			return nil, err
		}
		spec := postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt), Group: true,
			Documents: func(ctx context.Context, w *postgres.Writer) error { return write(ctx, w, r) }}
		c, err := e.store.Write(ctx, spec)
		if !insert && errors.Is(err, postgres.ErrExists) {
			// Another request created a document this upsert had found
			// missing: run it again, which now updates that document.
			c, err = e.store.Write(ctx, spec)
		}
		if err != nil {
			e.forgetDatabase(d)
			return nil, upsertError(insert, err)
		}
		return &WriteResult{IDs: v.ids, Commit: c}, nil
	}
	// A large request: a goroutine reads, validates and encodes the rest
	// while this one writes the chunks before it.
	processGC.begin(e.gcPercent)
	defer processGC.end(e.gcPercent)
	var chunks *chunkReader
	c, err := e.store.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: e.meta(u, opt),
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			// The reader starts once the transaction has begun. Started
			// before, it kept a core busy validating, and with two cores
			// the reply to BEGIN waited for this goroutine to be scheduled
			// (figures in docs/benchmarks.md, "Measured choices in the code").
			encode := func(docs []*sluice.Document) (*postgres.Rows, error) { return postgres.EncodeRows(s, docs) }
			if insert {
				encode = w.InsertEncoder() // rows ready for COPY
			}
			chunks = v.readChunks(first, encode)
			for r := range chunks.out {
				if err := write(ctx, w, r); err != nil {
					return err
				}
			}
			return chunks.wait()
		}})
	if chunks != nil {
		chunks.stop()
	}
	if err != nil {
		e.forgetDatabase(d)
		return nil, upsertError(insert, err)
	}
	return &WriteResult{IDs: v.ids, Commit: c}, nil
}

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

// readChunks starts reading after the documents already read (first),
// encoding each chunk with encode.
// The caller ranges over out, then calls wait for the reader's error, and
// in every case calls stop before the request ends: the request body must
// not be read after the handler returns.
func (v *validator) readChunks(first []*sluice.Document, encode func([]*sluice.Document) (*postgres.Rows, error)) *chunkReader {
	cr := &chunkReader{out: make(chan *postgres.Rows, chunksAhead), done: make(chan struct{})}
	go func() {
		defer close(cr.done)
		defer close(cr.out)
		cr.err = v.sendChunks(first, encode, cr)
	}()
	return cr
}

func (v *validator) sendChunks(chunk []*sluice.Document, encode func([]*sluice.Document) (*postgres.Rows, error), cr *chunkReader) error {
	send := func() error {
		r, err := encode(chunk)
		if err != nil {
			return err
		}
		cr.out <- r
		chunk = make([]*sluice.Document, 0, chunkSize)
		return nil
	}
	// The documents read before the request was known to be large go
	// first, as they are, so that Postgres starts writing at once.
	if err := send(); err != nil {
		return err
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

// stop makes the reader stop at its next document and waits for it.
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
	doc, err := raw.Validate(v.schema)
	if err != nil {
		return nil, docError(n, raw.ID(), err)
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

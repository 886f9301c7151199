package engine

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// chunkSize is how many documents a write validates and sends to Postgres at
// a time, so that a stream of any length is written with bounded memory
// (apart from the list of ids the response returns).
const chunkSize = 1000

// DocSource yields the raw documents of a write request, each decoded with
// json.Decoder.UseNumber. Next returns io.EOF after the last one.
type DocSource interface {
	Next() (map[string]any, error)
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
	return e.writeDocs(ctx, u, org, name, src, opt, true, func(ctx context.Context, w *postgres.Writer, docs []*sluice.Document) error {
		return w.Insert(ctx, docs)
	})
}

// Replace validates every document from src and replaces them all in one
// commit (inserting missing ones when opt.Create is set).
func (e *Engine) Replace(ctx context.Context, u *sluice.User, org, name string, src DocSource, opt WriteOptions) (*WriteResult, error) {
	return e.writeDocs(ctx, u, org, name, src, opt, false, func(ctx context.Context, w *postgres.Writer, docs []*sluice.Document) error {
		return w.Replace(ctx, docs, opt.Create)
	})
}

// Delete deletes the documents with the given ids in one commit. An id that
// names no document fails the whole request.
func (e *Engine) Delete(ctx context.Context, u *sluice.User, org, name string, ids []string, opt WriteOptions) (*WriteResult, error) {
	d, s, err := e.Database(ctx, u, org, name, sluice.RoleWrite)
	if err != nil {
		return nil, err
	}
	if err := writable(d); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, sluice.Errorf(sluice.CodeInvalid, "no document ids to delete")
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		class, key, ok := strings.Cut(id, "/")
		if !ok || key == "" || s.Class(class) == nil {
			return nil, sluice.Errorf(sluice.CodeInvalid, "invalid document id %q: want <Class>/<key> with a class of the schema", id)
		}
		if seen[id] {
			return nil, sluice.Errorf(sluice.CodeInvalid, "document %s is listed twice", id)
		}
		seen[id] = true
	}
	c, err := e.groupCommit(ctx, d, s, e.meta(u, opt), func(ctx context.Context, w *postgres.Writer) error {
		return w.Delete(ctx, ids)
	})
	if err != nil {
		e.forgetDatabase(d)
		return nil, err
	}
	return &WriteResult{IDs: ids, Commit: c}, nil
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

type writeFunc func(ctx context.Context, w *postgres.Writer, docs []*sluice.Document) error

// writeDocs runs one document write request. newIDs allows documents without
// an @id (inserts), which get a random key. A request of at most groupMax
// documents joins group commit; a larger one, of any length, is validated
// and written chunk by chunk in a transaction of its own.
func (e *Engine) writeDocs(ctx context.Context, u *sluice.User, org, name string, src DocSource, opt WriteOptions, newIDs bool, write writeFunc) (*WriteResult, error) {
	d, s, err := e.Database(ctx, u, org, name, sluice.RoleWrite)
	if err != nil {
		return nil, err
	}
	if err := writable(d); err != nil {
		return nil, err
	}
	v := &validator{schema: s, src: src, newIDs: newIDs, seen: map[string]bool{}}
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
		c, err := e.groupCommit(ctx, d, s, e.meta(u, opt), func(ctx context.Context, w *postgres.Writer) error {
			return write(ctx, w, first)
		})
		if err != nil {
			e.forgetDatabase(d)
			return nil, err
		}
		return &WriteResult{IDs: v.ids, Commit: c}, nil
	}
	var c *sluice.Commit
	err = e.store.InTx(ctx, func(tx *postgres.Tx) error {
		w, err := tx.NewWriter(ctx, d, s)
		if err != nil {
			return err
		}
		chunk := first
		for {
			if len(chunk) == chunkSize {
				if err := write(ctx, w, chunk); err != nil {
					return err
				}
				chunk = chunk[:0]
			}
			doc, err := v.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			chunk = append(chunk, doc)
		}
		if len(chunk) > 0 {
			if err := write(ctx, w, chunk); err != nil {
				return err
			}
		}
		c, err = w.Finish(ctx, e.meta(u, opt))
		return err
	})
	if err != nil {
		e.forgetDatabase(d)
		return nil, err
	}
	e.onCommit(c)
	return &WriteResult{IDs: v.ids, Commit: c}, nil
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

func (v *validator) next() (*sluice.Document, error) {
	n := len(v.ids)
	raw, err := v.src.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, err
		}
		return nil, docError(n, nil, err)
	}
	doc, err := schema.ValidateDocument(v.schema, raw)
	if err != nil {
		return nil, docError(n, raw, err)
	}
	if doc.ID == "" {
		if !v.newIDs {
			return nil, docError(n, raw, sluice.Errorf(sluice.CodeInvalid, "a replaced %s document needs an @id", doc.Type))
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
func docError(n int, raw map[string]any, err error) error {
	var se *sluice.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("document %d: %w", n, err)
	}
	which := fmt.Sprintf("document %d", n)
	if id, ok := raw["@id"].(string); ok {
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

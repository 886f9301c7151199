package engine

import (
	"bytes"
	"context"
	"errors"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// A request is prepared for the schema version of its database that the
// engine has cached (for up to cacheTTL, unless an access change makes it
// read again): a schema change made on another replica a moment before
// is not in it yet. Storage checks that version wherever a request meets
// the tables (postgres.ErrSchemaChanged: a read's snapshot, a write's
// commit row), and a request refused by an outdated schema (an unknown
// field, a value of the old type) checks it once more. Either way the
// request runs once more with the current schema, when it still can: a
// read always, a write as long as it read at most groupMax+1 documents
// of its body (the ones it keeps, see replay). So a schema change takes
// effect for every request that starts after it, on every replica.

// ErrSchemaChanged matches the error of a request whose database's
// schema changed while it ran, twice: it is a Conflict saying to retry.
var ErrSchemaChanged = postgres.ErrSchemaChanged

// outdated reports whether err, the error of a request prepared with
// database d, may come from d's schema version being out of date: the
// request then runs again with the database read afresh (the cached one
// is forgotten).
func (e *Engine) outdated(ctx context.Context, d *sluice.Database, err error) bool {
	if err == nil || d == nil {
		return false
	}
	if errors.Is(err, ErrSchemaChanged) {
		e.forgetDatabase(d)
		return true
	}
	switch sluice.ErrorCode(err) {
	case sluice.CodeInvalid, sluice.CodeNotFound:
	default:
		return false
	}
	v, verr := e.store.CurrentSchemaVersion(context.WithoutCancel(ctx), d)
	if verr != nil || v == d.SchemaVersion {
		return false
	}
	e.forgetDatabase(d)
	return true
}

// current runs op with database org/name (u needs role on it), and once
// more with the database read afresh when the first run failed as
// outdated says: ops that read, which can always run again.
func (e *Engine) current(ctx context.Context, u *sluice.User, org, name string, role sluice.Role, op func(*sluice.Database, *sluice.Schema) error) error {
	d, s, err := e.Database(ctx, u, org, name, role)
	if err != nil {
		return err
	}
	err = op(d, s)
	if !e.outdated(ctx, d, err) {
		return err
	}
	if d, s, err = e.Database(ctx, u, org, name, role); err != nil {
		return err
	}
	return op(d, s)
}

// CurrentDatabase returns database d (org/name) and its schema as they
// are now, read from Postgres rather than the cache, or NotFound when it
// was deleted or re-created (another epoch). Streams revise what they
// prepared with it (graph's Subscription.Revise).
func (e *Engine) CurrentDatabase(ctx context.Context, d *sluice.Database) (*sluice.Database, *sluice.Schema, error) {
	e.forgetDatabase(d)
	cur, sdl, err := e.database(ctx, d.Org, d.Name)
	if err != nil {
		return nil, nil, err
	}
	if d.Epoch != "" && cur.Epoch != d.Epoch {
		return nil, nil, sluice.Errorf(sluice.CodeNotFound, "database %s was deleted", d.Path())
	}
	s, err := e.parsed(cur, sdl)
	if err != nil {
		return nil, nil, err
	}
	return cur, s, nil
}

// ForgetDatabase makes the next read of database org/name come from
// Postgres rather than the cache: a stream about to be prepared for its
// schema version reads the current one.
func (e *Engine) ForgetDatabase(org, name string) {
	e.forgetDatabase(&sluice.Database{Org: org, Name: name})
}

// replay is a DocSource that keeps the documents it reads, up to max (<0:
// all) and maxBytes of JSON text (<0: any), so that a write can run again
// from them when its schema was out of date, as long as it read no more
// than that.
type replay struct {
	src      DocSource
	max      int
	maxBytes int
	kept     []schema.RawDocument
	bytes    int   // of JSON text in kept
	next     int   // the next kept document Next returns
	over     bool  // it read more than max: it cannot start over
	end      error // src's last answer once it ended (io.EOF or an error)
}

func newReplay(src DocSource, max, maxBytes int) *replay {
	return &replay{src: src, max: max, maxBytes: maxBytes}
}

// Next returns the kept documents after a rewind, then src's.
func (r *replay) Next() (schema.RawDocument, error) {
	if r.next < len(r.kept) {
		r.next++
		return r.kept[r.next-1], nil
	}
	if r.end != nil {
		return schema.RawDocument{}, r.end
	}
	raw, err := r.src.Next()
	if err != nil {
		r.end = err
		return raw, err
	}
	// Past either bound the write is a large one, which is not run
	// again: what was kept is let go (a copy of documents of many MB
	// held for the whole write).
	if r.over || r.max >= 0 && len(r.kept) >= r.max || r.maxBytes >= 0 && r.bytes+len(raw.JSON) > r.maxBytes {
		r.over, r.kept, r.next, r.bytes = true, nil, 0, 0
		return raw, nil
	}
	r.bytes += len(raw.JSON)
	if raw.JSON != nil {
		raw.JSON = bytes.Clone(raw.JSON) // src may reuse its buffer
	}
	r.kept = append(r.kept, raw)
	r.next++
	return raw, nil
}

// ReadAhead reads ahead what src has left, if src can (readAhead).
func (r *replay) ReadAhead() error {
	if ra, ok := r.src.(readAhead); ok && r.end == nil {
		return ra.ReadAhead()
	}
	return nil
}

// rewind starts the documents over, and reports false when it cannot.
func (r *replay) rewind() bool {
	if r.over {
		return false
	}
	r.next = 0
	return true
}

package engine

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// Reader is what a stream subscriber may see of one database: the
// database, its schema and the subscriber's role on it. A stream keeps one
// for its lifetime and refreshes it when a commit shows a newer schema. It
// is not safe for concurrent use.
type Reader struct {
	Database *sluice.Database
	Schema   *sluice.Schema
	Role     sluice.Role

	e    *Engine
	user *sluice.User
	// opened is the role the reader of a user was made with: a refresh
	// may narrow Role (the stream's guard then ends it) but never widen
	// it past opened, so that a user widened and narrowed back while the
	// stream is open never sees more than they subscribed with (the
	// guard compares access changes with the role the stream opened
	// with: a narrowing back to it changes nothing there).
	opened sluice.Role
	// missing holds what the current schema version was found not to
	// declare (class names, and classes with undeclared fields), so that
	// documents written under an older schema refresh at most once each.
	missing map[string]bool
}

// StreamReader authorizes u to subscribe to database org/name (the read
// role) and returns what its events must be shaped by. It fails like
// Database.
func (e *Engine) StreamReader(ctx context.Context, u *sluice.User, org, name string) (*Reader, error) {
	r := &Reader{e: e, user: u, Database: &sluice.Database{Org: org, Name: name}}
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	r.opened = r.Role
	return r, nil
}

// Shared returns a reader of the same database and role that no user is
// bound to: its refreshes re-read the schema only, the role stays (access
// is the business of each stream's guard), so streams with one role can
// share it (and one evaluation).
func (r *Reader) Shared() *Reader {
	c := *r
	c.user, c.missing = nil, map[string]bool{}
	return &c
}

// Refresh re-reads the schema and re-checks the role (of a reader bound to
// a user). It returns Forbidden when the access was revoked and NotFound
// when the database was deleted or re-created.
func (r *Reader) Refresh(ctx context.Context) error {
	var d *sluice.Database
	var s *sluice.Schema
	role := r.Role
	if r.user == nil {
		var sdl string
		var err error
		if d, sdl, err = r.e.database(ctx, r.Database.Org, r.Database.Name); err != nil {
			return err
		}
		if s, err = r.e.parsed(d, sdl); err != nil {
			return err
		}
	} else {
		var err error
		if d, s, err = r.e.Database(ctx, r.user, r.Database.Org, r.Database.Name, sluice.RoleRead); err != nil {
			return err
		}
		if role, err = r.e.Role(ctx, r.user, d); err != nil {
			return err
		}
		if r.opened != sluice.RoleNone {
			role = min(role, r.opened)
		}
	}
	if r.Database.Epoch != "" && d.Epoch != r.Database.Epoch {
		return sluice.Errorf(sluice.CodeNotFound, "database %s was deleted", d.Path())
	}
	if r.Database.SchemaVersion != d.SchemaVersion || r.missing == nil {
		r.missing = map[string]bool{}
	}
	r.Database, r.Schema, r.Role = d, s, role
	return nil
}

// Follow makes the reader read the schema afresh when it is older than
// version, the schema version of a commit it meets: a stream shows each
// commit through the current schema, whatever the engine's cache holds.
func (r *Reader) Follow(ctx context.Context, version int) error {
	if version <= r.Database.SchemaVersion {
		return nil
	}
	r.e.forgetDatabase(r.Database)
	return r.Refresh(ctx)
}

// Class returns the class named name, refreshing the schema first when it
// does not know the class (added since the stream started); nil when it
// still does not.
func (r *Reader) Class(ctx context.Context, name string) (*sluice.Class, error) {
	if c := r.Schema.Class(name); c != nil || r.missing["class "+name] {
		return c, nil
	}
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	c := r.Schema.Class(name)
	if c == nil {
		r.missing["class "+name] = true
	}
	return c, nil
}

// Redact returns doc (a document's API-form JSON) without the fields the
// reader's role may not see; a nil doc stays nil. A field the reader's
// schema does not know (added since the stream started, maybe protected)
// refreshes the schema first, and a field still unknown (removed since the
// document was written) is left out: an outdated schema never lets a
// protected field through.
func (r *Reader) Redact(ctx context.Context, doc []byte) ([]byte, error) {
	if doc == nil || r.Role >= sluice.RoleAdmin {
		return doc, nil
	}
	m, err := schema.DecodeImage(doc)
	if err != nil {
		return nil, fmt.Errorf("redact: %w", err)
	}
	if knownObject(r.Schema, m) {
		return redactFor(r.Role, r.Schema, doc)
	}
	typ, _ := m["@type"].(string)
	if !r.missing["fields "+typ] {
		if err := r.Refresh(ctx); err != nil {
			return nil, err
		}
		if r.Role >= sluice.RoleAdmin {
			return doc, nil
		}
		if knownObject(r.Schema, m) {
			return redactFor(r.Role, r.Schema, doc)
		}
		r.missing["fields "+typ] = true
	}
	c := r.Schema.Class(typ)
	if c == nil {
		return nil, nil
	}
	stripUnknown(r.Schema, c, m)
	redactMap(r.Role, r.Schema, c, m)
	id, _ := m["@id"].(string)
	delete(m, "@id")
	delete(m, "@type")
	return postgres.DocumentJSON(c, &sluice.Document{ID: id, Type: typ, Fields: m})
}

func knownObject(s *sluice.Schema, m map[string]any) bool {
	typ, _ := m["@type"].(string)
	return knownObjectOf(s, s.Class(typ), m)
}

// knownObjectOf reports whether m, an object of class c (nil: one the
// schema lacks), holds only fields the schema declares, at any depth.
func knownObjectOf(s *sluice.Schema, c *sluice.Class, m map[string]any) bool {
	if c == nil {
		return false
	}
	for k, v := range m {
		if k == "@id" || k == "@type" {
			continue
		}
		f := c.Field(k)
		if f == nil {
			return false
		}
		for _, sub := range subdocuments(f, v) {
			if !knownObjectOf(s, subdocumentClass(s, f, sub), sub) {
				return false
			}
		}
	}
	return true
}

// stripUnknown deletes from m (an object of class c) every field, at any
// depth, that the schema does not declare.
func stripUnknown(s *sluice.Schema, c *sluice.Class, m map[string]any) {
	for k, v := range m {
		if k == "@id" || k == "@type" {
			continue
		}
		f := c.Field(k)
		if f == nil {
			delete(m, k)
			continue
		}
		for _, sub := range subdocuments(f, v) {
			if sc := subdocumentClass(s, f, sub); sc != nil {
				stripUnknown(s, sc, sub)
			} else {
				delete(m, k) // a subdocument type the schema no longer has
			}
		}
	}
}

func subdocuments(f *sluice.Field, v any) []map[string]any {
	if f.Type.Kind != sluice.TypeSubdocument {
		return nil
	}
	items := []any{v}
	if f.List {
		items, _ = v.([]any)
	}
	var out []map[string]any
	for _, it := range items {
		if sub, ok := it.(map[string]any); ok {
			out = append(out, sub)
		}
	}
	return out
}

// RedactAt is Redact for an image of commit c: it also hides what the
// schema c was made under did not let the reader's role see, and what a
// schema change since c dropped or protected (see RedactCommit).
func (r *Reader) RedactAt(ctx context.Context, c *sluice.Commit, class string, doc []byte) ([]byte, error) {
	doc, err := r.Redact(ctx, doc)
	if err != nil || doc == nil || r.Role >= sluice.RoleAdmin {
		return doc, err
	}
	old, err := r.e.schemaAt(ctx, r.Database, c.Seq)
	if err != nil {
		return nil, err
	}
	since, err := r.e.lostSince(ctx, r.Database, r.Schema, r.Role, c.Seq)
	if err != nil {
		return nil, err
	}
	return redactSince(r.Role, r.Schema, old, since, hides(r.Role, r.Schema, old, class), class, doc)
}

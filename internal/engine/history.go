package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// History is shown through two schemas: the current one and the one the
// commit was made under. A reader below admin sees a field of a change's
// before or after image only when both let its role read it, so a field
// made public later does not reveal values written while it was
// protected, and a field the current schema no longer knows (dropped by a
// forced schema change) is shown to database admins only. Commits made
// before Sluice kept schema versions (migration 5) are shown through the
// current schema alone.

// historySchemas caches each database's schema versions, parsed on first
// use. Its fields are guarded by mu.
type historySchemas struct {
	mu  sync.Mutex
	dbs map[int64]*dbVersions
}

type dbVersions struct {
	versions []postgres.SchemaVersion // oldest first
	parsed   map[int]*sluice.Schema
}

// maxCachedVersions bounds the parsed schemas kept per database.
const maxCachedVersions = 16

// schemaAt returns the schema commit seq of d was made under, or nil when
// it is not known (the commit predates migration 5).
func (e *Engine) schemaAt(ctx context.Context, d *sluice.Database, seq int64) (*sluice.Schema, error) {
	dv, err := e.schemaVersions(ctx, d)
	if err != nil {
		return nil, err
	}
	var v *postgres.SchemaVersion
	for i := range dv.versions {
		if dv.versions[i].FirstSeq <= seq {
			v = &dv.versions[i]
		}
	}
	if v == nil {
		return nil, nil
	}
	return e.parsedVersion(d, dv, v)
}

// schemaVersions returns the known schema versions of d, up to its
// current one at least.
func (e *Engine) schemaVersions(ctx context.Context, d *sluice.Database) (*dbVersions, error) {
	h := &e.history
	h.mu.Lock()
	dv := h.dbs[d.ID]
	h.mu.Unlock()
	if dv != nil && len(dv.versions) > 0 && dv.versions[len(dv.versions)-1].Version >= d.SchemaVersion {
		return dv, nil
	}
	vs, err := e.store.SchemaVersions(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	dv = &dbVersions{versions: vs, parsed: map[int]*sluice.Schema{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dbs == nil {
		h.dbs = map[int64]*dbVersions{}
	}
	if cur := h.dbs[d.ID]; cur != nil && len(cur.versions) >= len(vs) {
		return cur, nil // another caller loaded as much or more
	}
	h.dbs[d.ID] = dv
	return dv, nil
}

// parsedVersion returns version v of dv, parsed.
func (e *Engine) parsedVersion(d *sluice.Database, dv *dbVersions, v *postgres.SchemaVersion) (*sluice.Schema, error) {
	h := &e.history
	h.mu.Lock()
	s := dv.parsed[v.Version]
	h.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := schema.Parse(v.SDL)
	if err != nil {
		return nil, fmt.Errorf("schema version %d of %s: %w", v.Version, d.Path(), err)
	}
	h.mu.Lock()
	if len(dv.parsed) >= maxCachedVersions {
		clear(dv.parsed)
	}
	dv.parsed[v.Version] = s
	h.mu.Unlock()
	return s, nil
}

// forgetHistory drops the cached schema versions of database id.
func (e *Engine) forgetHistory(id int64) {
	e.history.mu.Lock()
	delete(e.history.dbs, id)
	e.history.mu.Unlock()
}

// RedactCommit returns commit c of database d as a reader with role sees
// it through the current schema cur and the schema c was made under (see
// the comment at the top of this file). It returns c itself when nothing
// is hidden, else a copy; c is never modified.
func (e *Engine) RedactCommit(ctx context.Context, d *sluice.Database, cur *sluice.Schema, role sluice.Role, c *sluice.Commit) (*sluice.Commit, error) {
	if role >= sluice.RoleAdmin || len(c.Changes) == 0 {
		return c, nil
	}
	old, err := e.schemaAt(ctx, d, c.Seq)
	if err != nil {
		return nil, err
	}
	var out []sluice.Change
	for i := range c.Changes {
		ch := c.Changes[i]
		if !hides(role, cur, old, ch.Class) {
			if out != nil {
				out = append(out, ch)
			}
			continue
		}
		if ch.Before, err = redactHistory(role, cur, old, ch.Before); err != nil {
			return nil, err
		}
		if ch.After, err = redactHistory(role, cur, old, ch.After); err != nil {
			return nil, err
		}
		if out == nil {
			out = make([]sluice.Change, i, len(c.Changes))
			copy(out, c.Changes[:i])
		}
		out = append(out, ch)
	}
	if out == nil {
		return c, nil
	}
	cc := *c
	cc.Changes = out
	return &cc, nil
}

// hides reports whether an image of class may hold something a reader with
// role must not see through cur and old (nil: unknown): a protected field,
// at any depth of subdocuments, in either schema, or a field or class cur
// does not know.
func hides(role sluice.Role, cur, old *sluice.Schema, class string) bool {
	cc := cur.Class(class)
	if cc == nil {
		return true
	}
	if old == nil {
		return classHides(role, cur, cc, nil, map[string]bool{})
	}
	oc := old.Class(class)
	if oc == nil {
		return true
	}
	return classHides(role, cur, cc, nil, map[string]bool{}) || classHides(role, old, oc, cur, map[string]bool{})
}

// classHides reports whether class c of s has a field role may not read,
// at any depth, or (when other is set) a field other's class of the same
// name does not declare. seen stops recursion through subdocument cycles.
func classHides(role sluice.Role, s *sluice.Schema, c *sluice.Class, other *sluice.Schema, seen map[string]bool) bool {
	if seen[c.Name] {
		return false
	}
	seen[c.Name] = true
	var oc *sluice.Class
	if other != nil {
		if oc = other.Class(c.Name); oc == nil {
			return true
		}
	}
	for _, f := range c.Fields {
		if f.ReadRole > role || oc != nil && oc.Field(f.Name) == nil {
			return true
		}
		if f.Type.Kind == sluice.TypeSubdocument {
			if sc := s.Class(f.Type.Name); sc != nil && classHides(role, s, sc, other, seen) {
				return true
			}
		}
	}
	return false
}

// redactHistory returns doc (a document's API-form JSON, nil for none)
// without what a reader with role may not see through cur and old (nil:
// unknown): a field is kept only when both declare it, at that place, and
// let role read it. An image of a class cur no longer has keeps only its
// "@id" and "@type".
func redactHistory(role sluice.Role, cur, old *sluice.Schema, doc []byte) ([]byte, error) {
	if doc == nil {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("redact: %w", err)
	}
	typ, _ := m["@type"].(string)
	id, _ := m["@id"].(string)
	cc := cur.Class(typ)
	if cc == nil {
		return json.Marshal(map[string]string{"@id": id, "@type": typ})
	}
	keepReadable(role, cur, old, cc, m)
	delete(m, "@id")
	delete(m, "@type")
	return postgres.DocumentJSON(cc, &sluice.Document{ID: id, Type: typ, Fields: m})
}

// keepReadable deletes from m (an object of class c of cur) every field
// that cur or old (when not nil) does not declare for that class or does
// not let role read, at any depth.
func keepReadable(role sluice.Role, cur, old *sluice.Schema, c *sluice.Class, m map[string]any) {
	var oc *sluice.Class
	if old != nil {
		oc = old.Class(c.Name)
	}
	for k, v := range m {
		if k == "@id" || k == "@type" {
			continue
		}
		f := c.Field(k)
		if f == nil || f.ReadRole > role {
			delete(m, k)
			continue
		}
		if old != nil {
			of := (*sluice.Field)(nil)
			if oc != nil {
				of = oc.Field(k)
			}
			if of == nil || of.ReadRole > role {
				delete(m, k)
				continue
			}
		}
		for _, sub := range subdocuments(f, v) {
			typ, _ := sub["@type"].(string)
			if sc := cur.Class(typ); sc != nil {
				keepReadable(role, cur, old, sc, sub)
			} else {
				delete(m, k)
			}
		}
	}
}

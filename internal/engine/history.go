package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// History is shown through two schemas: the current one and the one the
// commit was made under. A reader below admin sees a field of a change's
// before or after image only when both let its role read it, so a field
// made public later does not reveal values written while it was
// protected, and a field the current schema no longer knows (dropped by a
// forced schema change) is shown to database admins only. So is a field
// both declare whose values a schema change since the commit dropped (a
// changed type, or the field dropped and added again), and one that a
// schema version since protected from the reader: what a read as of the
// commit leaves out (pastSchema), for the same reasons. An image of a
// class whose documents a schema change since the commit dropped (the
// class dropped, or made an interface or a subdocument type, then made a
// document class again) keeps only its "@id" and "@type", as one of a
// class dropped for good does: every value it held went with the
// documents, and the class of that name today, its fields matching or
// not, says nothing of them (a string under what is now an Int). Commits
// made before Sluice kept schema versions (migration 5) are shown through
// the current schema, less what changed since the oldest version known.

// schemaAt returns the schema commit seq of d was made under, or nil when
// it is not known (the commit predates migration 5). The store reads and
// parses a version only when it is asked for, and keeps few of them.
func (e *Engine) schemaAt(ctx context.Context, d *sluice.Database, seq int64) (*sluice.Schema, error) {
	vs, err := e.store.SchemaVersions(ctx, d)
	if err != nil {
		return nil, err
	}
	i := postgres.VersionAt(vs, seq)
	if i < 0 {
		return nil, nil
	}
	return e.store.SchemaAt(ctx, d.ID, vs[i].Version)
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
	since, err := e.lostSince(ctx, d, cur, role, c.Seq)
	if err != nil {
		return nil, err
	}
	var out []sluice.Change
	for i := range c.Changes {
		ch := c.Changes[i]
		hide := hides(role, cur, old, ch.Class)
		if !hide && since == nil {
			if out != nil {
				out = append(out, ch)
			}
			continue
		}
		if ch.Before, err = redactSince(role, cur, old, since, hide, ch.Class, ch.Before); err != nil {
			return nil, err
		}
		if ch.After, err = redactSince(role, cur, old, since, hide, ch.Class, ch.After); err != nil {
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

// HiddenSince returns the fields of the images of commit seq of d that a
// reader with role cannot be shown through cur because of a schema change
// since (see lostSince): by class (a document class, or a subdocument
// class for its fields), each with a message naming the field and why, as
// a read as of the commit names it, and every field of a class whose
// documents then that change dropped (its images show "@id" and "@type"
// alone); nil when there are none. A filter of
// a _ChangeSet or of a subscription, evaluated on those images, is refused
// when it tests one (graph), as a read as of the commit is: the image no
// longer holds the value, and a filter that took it for missing would
// answer wrongly, and tell what its absence hides.
func (e *Engine) HiddenSince(ctx context.Context, d *sluice.Database, cur *sluice.Schema, role sluice.Role, seq int64) (map[string]map[string]string, error) {
	if role >= sluice.RoleAdmin {
		return nil, nil
	}
	since, err := e.lostSince(ctx, d, cur, role, seq)
	if err != nil || since == nil || len(since.Unknown) == 0 && len(since.Lost) == 0 {
		return nil, err
	}
	// The reasons lostSince keeps name the position of the first commit
	// of the version it walked for (its findings are by version): named
	// again for this one.
	commit := fmt.Sprintf("commit %d", seq)
	out := make(map[string]map[string]string, len(since.Unknown)+len(since.Lost))
	hide := func(class, f, why string) {
		_, reason, ok := strings.Cut(why, "cannot be shown: ")
		if !ok {
			reason = why
		}
		if out[class] == nil {
			out[class] = map[string]string{}
		}
		out[class][f] = fmt.Sprintf("%s.%s as of %s cannot be shown: %s", class, f, commit, strings.ReplaceAll(reason, "that position", "that commit"))
	}
	for class, fields := range since.Unknown {
		for f, why := range fields {
			hide(class, f, why)
		}
	}
	// An image of a class whose documents then a schema change dropped
	// shows "@id" and "@type" alone (redactSince): every field of the
	// class today is hidden from it, and a filter testing one would take
	// it for missing, as it would a field hidden alone. (Not one hidden
	// from the reader now: its filter cannot name it.)
	for class, why := range since.Lost {
		if c := cur.Class(class); c != nil {
			for _, f := range c.Fields {
				if !hiddenFrom(role, cur, f) {
					hide(class, f.Name, why)
				}
			}
		}
	}
	return out, nil
}

// lostSince returns what of the images of commit seq of d a reader with
// role cannot be shown through cur because of a schema change since (see
// the comment at the top of this file): what a read as of the commit
// cannot show, from the same walk of the schema versions: the fields
// (Unknown, strays) and the classes whose documents then a schema change
// dropped (Lost). It returns nil when there is nothing, and without a
// walk when the commit was made under the current version, as commits
// streamed as they are made are.
func (e *Engine) lostSince(ctx context.Context, d *sluice.Database, cur *sluice.Schema, role sluice.Role, seq int64) (*Past, error) {
	vs, err := e.store.SchemaVersions(ctx, d)
	if err != nil {
		return nil, err
	}
	i := postgres.VersionAt(vs, seq)
	if len(vs) == 0 || i >= 0 && vs[i].Version >= d.SchemaVersion {
		return nil, nil
	}
	// The walk depends on the commit's version, not on the commit: it is
	// made once for every commit of a version (a resumed stream, a page
	// of history), not once for each (a walk of 200 versions for each of
	// 400 commits took 5 s). Only Unknown, Lost and strays of the Past
	// are read (redactSince), which hold for all of them.
	key := lostKey{db: d.ID, epoch: d.Epoch, cur: d.SchemaVersion, role: role, version: -1}
	if i >= 0 {
		key.version = vs[i].Version
	}
	if past, ok := e.lost.get(key); ok {
		return past, nil
	}
	sc, err := e.scanVersions(ctx, d, cur, role, seq, seq)
	if err != nil {
		return nil, err
	}
	past, _ := pastSchema(sc, 0, cur, role, sluice.Position{Epoch: d.Epoch, Seq: seq, Index: sluice.WholeCommit})
	if len(past.Unknown) == 0 && len(past.Lost) == 0 && !past.strays {
		past = nil
	} else {
		// What redactSince reads, without the schemas a Past holds.
		// Lost is kept: a class dropped and made again passes hides
		// (both schemas declare it, with the same field names), and only
		// the walk knows its documents then were dropped.
		past = &Past{Unknown: past.Unknown, Lost: past.Lost, strays: past.strays}
	}
	e.lost.add(key, past)
	return past, nil
}

// lostKey keys what lostSince found for the commits of one schema version
// of a database (version; -1 before the first known), read through its
// current version cur by a role.
type lostKey struct {
	db           int64
	epoch        string
	version, cur int
	role         sluice.Role
}

// lostSince's cache bounds: in entries, and in the bytes of the class
// and field names and reasons its Pasts hold.
const (
	lostEntries = 1 << 12
	lostBytes   = 8 << 20
)

func newLostCache() *sizedCache[lostKey, *Past] {
	return newSizedCache[lostKey](lostEntries, lostBytes, func(p *Past) int {
		n := 64
		if p != nil {
			for class, fields := range p.Unknown {
				n += len(class) + 64
				for f, why := range fields {
					n += len(f) + len(why) + 64
				}
			}
			for class, why := range p.Lost {
				n += len(class) + len(why) + 64
			}
		}
		return n
	})
}

// redactSince returns image doc (nil for none) of class redacted through
// cur and old when hide (redactHistory), less what since (nil: nothing)
// says a schema change since its commit dropped or protected: its
// "@id" and "@type" alone when the change dropped the class's documents.
func redactSince(role sluice.Role, cur, old *sluice.Schema, since *Past, hide bool, class string, doc []byte) ([]byte, error) {
	if doc != nil && since.lost(class) {
		return idAndType(doc)
	}
	var err error
	if hide {
		if doc, err = redactHistory(role, cur, old, doc); err != nil {
			return nil, err
		}
	}
	if since == nil {
		return doc, nil
	}
	return dropUnknown(cur, since, doc)
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
	m, err := schema.DecodeImage(doc)
	if err != nil {
		return nil, fmt.Errorf("redact: %w", err)
	}
	typ, _ := m["@type"].(string)
	id, _ := m["@id"].(string)
	cc := cur.Class(typ)
	if cc == nil {
		return imageOf(id, typ)
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
		if f == nil || hiddenFrom(role, cur, f) {
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
			if sc := subdocumentClass(cur, f, sub); sc != nil {
				keepReadable(role, cur, old, sc, sub)
			} else {
				delete(m, k)
			}
		}
	}
}

// idAndType returns image doc (a document's API-form JSON) as its "@id"
// and "@type" alone: what a reader below admin sees of a document whose
// class's documents a schema change dropped.
func idAndType(doc []byte) ([]byte, error) {
	m, err := schema.DecodeImage(doc)
	if err != nil {
		return nil, fmt.Errorf("redact: %w", err)
	}
	typ, _ := m["@type"].(string)
	id, _ := m["@id"].(string)
	return imageOf(id, typ)
}

// imageOf returns the image of document id of class typ with no fields.
func imageOf(id, typ string) ([]byte, error) {
	return json.Marshal(map[string]string{"@id": id, "@type": typ})
}

package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// previewIDs is how many ids of the documents a change affects a preview
// names: enough to find them, bounded whatever the class holds.
const previewIDs = 10

// SchemaPreview is what PutSchema would do with a schema, found without
// changing anything.
type SchemaPreview struct {
	// Version is the database's current schema version.
	Version int
	Changes []PreviewChange
	// Force says that some change loses data: PutSchema refuses it
	// without force.
	Force bool
	// Refused says why PutSchema would refuse the schema even with force
	// (stored documents it would leave invalid, values too large for an
	// index it adds, objects of other Postgres roles over what it
	// drops), one reason each.
	Refused []string
}

// PreviewChange is one change of a preview and the stored documents it
// affects: for a change that loses data, those holding what it drops; for
// a field made required, those that lack it; for a dropped enum value,
// those that hold it.
type PreviewChange struct {
	schema.Change
	Documents int64
	// IDs are the first of those documents in id order (at most 10).
	IDs []string
}

// PreviewSchema answers what PutSchema(sdl) would do, without doing it:
// each change, whether it needs force, which stored documents each
// affects, and why it would be refused. It needs the admin role, as
// PutSchema does; SDL errors are the errors PutSchema answers. It reads
// the tables in one read-only snapshot, so a concurrent write may change
// the answer before the schema is put, which checks again. With version
// (not 0), a schema not at that version is previewed no more than it is
// changed (PutSchemaOptions.Version).
func (e *Engine) PreviewSchema(ctx context.Context, u *sluice.User, org, name, sdl string, version int) (*SchemaPreview, error) {
	// The current version, as PutSchema reads it: a preview against a
	// cached one would diff against the schema before another replica's
	// change and report its version.
	e.forgetDatabase(&sluice.Database{Org: org, Name: name})
	d, prev, err := e.Database(ctx, u, org, name, sluice.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if version != 0 && version != d.SchemaVersion {
		return nil, schemaMoved(d, version, d.SchemaVersion)
	}
	if err := e.checkSchemaSize(sdl); err != nil {
		return nil, err
	}
	next, err := schema.ParseChange(sdl, prev)
	if err != nil {
		return nil, err
	}
	// Refused by the change itself, before any table is touched.
	if err := postgres.CheckIndexNames(next); err != nil {
		return nil, err
	}
	p := &SchemaPreview{Version: d.SchemaVersion}
	changes := schema.Diff(prev, next)
	for _, c := range changes {
		p.Changes = append(p.Changes, PreviewChange{Change: c})
		p.Force = p.Force || c.Destructive
	}
	conform := newConformer(prev, next, changes)
	err = e.store.Inspect(ctx, func(tx *postgres.Tx) error {
		for i := range p.Changes {
			if err := droppedWhole(ctx, tx, d, prev, &p.Changes[i]); err != nil {
				return err
			}
		}
		found, err := walkStored(ctx, tx, d, conform, false)
		if err != nil {
			return err
		}
		for x, f := range found {
			// What each change drops, or finds that refuses it, in the
			// values it keeps; a field retyped to a required type
			// affects the documents holding its values, not those that
			// would lack it.
			if x.change < 0 || x.lacks.class != "" && changes[x.change].Kind == schema.AlterField {
				continue
			}
			p.Changes[x.change].add(f.count, f.ids)
		}
		p.Refused = conform.refusals(found)
		// Objects of other Postgres roles (a view, a temporary table)
		// over what the change drops refuse it, as they refuse the
		// change itself, forced or not.
		why, err := tx.DependentsRefusal(ctx, d, prev, next)
		if err != nil {
			return err
		}
		if why != "" {
			p.Refused = append(p.Refused, why)
		}
		for i := range p.Changes {
			why, err := tooLargeForIndex(ctx, tx, d, prev, next, &p.Changes[i])
			if err != nil {
				return err
			}
			if why != "" {
				p.Refused = append(p.Refused, why)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// droppedWhole adds to c, a change that drops a column or a table, the
// documents holding what it drops (what it drops inside the columns it
// keeps is walkStored's).
func droppedWhole(ctx context.Context, tx *postgres.Tx, d *sluice.Database, prev *sluice.Schema, c *PreviewChange) error {
	pc := prev.Class(c.Class)
	if !c.Destructive || pc == nil || pc.Kind != sluice.KindDocument {
		return nil
	}
	switch c.Kind {
	case schema.DropField, schema.AlterField:
		a, err := tx.DocumentsHolding(ctx, d, c.Class, c.Field, previewIDs)
		c.add(a.Count, a.IDs)
		return err
	case schema.DropClass, schema.ChangeClassKind:
		a, err := tx.DocumentsHolding(ctx, d, c.Class, "", previewIDs)
		c.add(a.Count, a.IDs)
		return err
	}
	return nil
}

// tooLargeForIndex adds to c, when it adds an index to a class that has
// documents, those holding values too large for the index, and returns
// why the change would be refused then ("" when none do): Postgres
// refuses to build the index, as PutSchema answers. Only fields whose
// stored values the change keeps are weighed (a retyped field's are
// dropped; a widened reference's are kept).
func tooLargeForIndex(ctx context.Context, tx *postgres.Tx, d *sluice.Database, prev, next *sluice.Schema, c *PreviewChange) (string, error) {
	pc := prev.Class(c.Class)
	if c.Kind != schema.AddIndex || pc == nil || pc.Kind != sluice.KindDocument {
		return "", nil
	}
	var kept []string
	for _, name := range strings.Split(c.Field, ", ") {
		if of, nf := pc.Field(name), next.Class(c.Class).Field(name); of != nil && nf != nil && (of.Type == nf.Type && of.List == nf.List || schema.Widens(prev, next, of, nf)) {
			kept = append(kept, name)
		}
	}
	if len(kept) == 0 {
		return "", nil
	}
	a, err := tx.TooLargeForIndex(ctx, d, c.Class, kept, previewIDs)
	if err != nil || a.Count == 0 {
		return "", err
	}
	c.add(a.Count, a.IDs)
	return fmt.Sprintf("cannot add the index on %s(%s): %d stored documents hold values too large for it; an indexed value may take at most about 2,700 bytes after compression: shorten those values, or leave the field unindexed", c.Class, c.Field, a.Count), nil
}

// add counts n more documents, ids the first of them.
func (c *PreviewChange) add(n int64, ids []string) {
	c.Documents += n
	c.IDs = append(c.IDs, ids[:min(len(ids), previewIDs-len(c.IDs))]...)
}

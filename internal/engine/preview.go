package engine

import (
	"context"
	"fmt"

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
	// (stored documents it would leave invalid), one reason each.
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
// the answer before the schema is put, which checks again.
func (e *Engine) PreviewSchema(ctx context.Context, u *sluice.User, org, name, sdl string) (*SchemaPreview, error) {
	d, prev, err := e.Database(ctx, u, org, name, sluice.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if err := e.checkSchemaSize(sdl); err != nil {
		return nil, err
	}
	next, err := schema.ParseNew(sdl)
	if err != nil {
		return nil, err
	}
	p := &SchemaPreview{Version: d.SchemaVersion}
	for _, c := range schema.Diff(prev, next) {
		p.Changes = append(p.Changes, PreviewChange{Change: c})
		p.Force = p.Force || c.Destructive
	}
	err = e.store.Inspect(ctx, func(tx *postgres.Tx) error {
		for i := range p.Changes {
			refusal, err := affected(ctx, tx, d, prev, &p.Changes[i])
			if err != nil {
				return err
			}
			if refusal != "" {
				p.Refused = append(p.Refused, refusal)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// affected fills in the documents that change c affects, and says why it
// would be refused even with force ("" when it would not).
func affected(ctx context.Context, tx *postgres.Tx, d *sluice.Database, prev *sluice.Schema, c *PreviewChange) (string, error) {
	stored := func(class string) bool {
		pc := prev.Classes[class]
		return pc != nil && pc.Kind == sluice.KindDocument
	}
	add := func(a postgres.Affected, err error) error {
		c.Documents += a.Count
		if len(c.IDs) < previewIDs {
			c.IDs = append(c.IDs, a.IDs[:min(len(a.IDs), previewIDs-len(c.IDs))]...)
		}
		return err
	}
	switch c.Kind {
	case schema.DropField, schema.AlterField:
		if c.Destructive && stored(c.Class) {
			return "", add(tx.DocumentsHolding(ctx, d, c.Class, c.Field, previewIDs))
		}
	case schema.DropClass, schema.ChangeClassKind:
		if c.Destructive && stored(c.Class) {
			return "", add(tx.DocumentsHolding(ctx, d, c.Class, "", previewIDs))
		}
	case schema.RequireField, schema.AddRequiredField:
		if !stored(c.Class) {
			return "", nil
		}
		if err := add(tx.DocumentsLacking(ctx, d, c.Class, c.Field, previewIDs)); err != nil || c.Documents == 0 {
			return "", err
		}
		return fmt.Sprintf("cannot make %s.%s required: %d stored documents lack it", c.Class, c.Field, c.Documents), nil
	case schema.DropEnumValue:
		for _, class := range prev.Order {
			pc := prev.Classes[class]
			if pc.Kind != sluice.KindDocument {
				continue
			}
			for _, f := range pc.Fields {
				if f.Type.Kind != sluice.TypeEnum || f.Type.Name != c.Class {
					continue
				}
				if err := add(tx.DocumentsWithEnumValue(ctx, d, class, f, c.Field, previewIDs)); err != nil {
					return "", err
				}
			}
		}
		if c.Documents > 0 {
			return fmt.Sprintf("cannot drop value %s of enum %s: %d stored documents hold it; change them first", c.Field, c.Class, c.Documents), nil
		}
	}
	return "", nil
}

package postgres

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice"
)

// The capture triggers (capture.go) record the rows a SQL write changed as
// row_to_json images, since Postgres does not know Sluice's document form;
// their commits are marked row_images. Every read of the log turns them
// into document images here, through the schema the commit was made under,
// so that nothing past this package tells them from Sluice's own.

// documentImages turns the row images of the commits of database d that
// hold them (Commit.RowImages) into document images.
func (db *DB) documentImages(ctx context.Context, d *sluice.Database, commits []*sluice.Commit) error {
	var versions []SchemaVersion
	for _, c := range commits {
		if !c.RowImages {
			continue
		}
		if versions == nil {
			// Read, not cached: d may be older than the commits (another
			// replica changed the schema since), and a row image read
			// through the wrong version would lose fields.
			var err error
			if versions, err = db.readVersions(ctx, d.ID); err != nil {
				return err
			}
			if len(versions) == 0 {
				return fmt.Errorf("row images of %s: no schema versions", d.Path())
			}
		}
		// The version the commit was made under (the first, for a
		// commit older than every version known).
		v := versions[max(VersionAt(versions, c.Seq), 0)]
		s, err := db.SchemaAt(ctx, d.ID, v.Version)
		if err != nil {
			return err
		}
		for i := range c.Changes {
			ch := &c.Changes[i]
			cl := s.Class(ch.Class)
			if cl == nil {
				return fmt.Errorf("commit %d of %s: %w: class %s of %s is not in schema version %d", c.Seq, d.Path(), sluice.ErrUnreadableCommit, ch.Class, ch.DocID, v.Version)
			}
			for k, img := range []*[]byte{(*[]byte)(&ch.Before), (*[]byte)(&ch.After)} {
				if *img == nil {
					continue
				}
				out, dropped, err := rowImage(cl, *img)
				if err != nil {
					return fmt.Errorf("commit %d of %s: %w: image of %s: %w", c.Seq, d.Path(), sluice.ErrUnreadableCommit, ch.DocID, err)
				}
				if len(dropped) > 0 {
					db.logger.Warn("a document written through SQL holds values its fields cannot: left out of its image",
						"database", d.Path(), "commit", c.Seq, "document", ch.DocID, "fields", dropped)
					// Left out, the value looks null to whatever judges
					// the change from its images: they are told it is not.
					if k == 0 {
						ch.BeforeUnknown = dropped
					} else {
						ch.AfterUnknown = dropped
					}
				}
				*img = out
			}
		}
		c.RowImages = false
	}
	return nil
}

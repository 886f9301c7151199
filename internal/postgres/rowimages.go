package postgres

import (
	"context"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sluice-dev/sluice"
)

// The capture triggers (capture.go) record the rows a SQL write changed as
// row_to_json images, since Postgres does not know Sluice's document form;
// their commits are marked row_images. Every read of the log turns them
// into document images here, through the schema the commit was made under,
// so that nothing past this package tells them from Sluice's own.

// schemaEntries bounds the parsed schemas kept for reading row images.
const schemaEntries = 64

type schemaKey struct {
	db      int64
	version int
}

// rowSchemas caches parsed schema versions for documentImages.
type rowSchemas struct {
	cache *lru.Cache[schemaKey, *sluice.Schema]
}

func newRowSchemas() rowSchemas {
	c, err := lru.New[schemaKey, *sluice.Schema](schemaEntries)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return rowSchemas{cache: c}
}

// documentImages turns the row images of the commits of database d that
// hold them (Commit.RowImages) into document images.
func (db *DB) documentImages(ctx context.Context, d *sluice.Database, commits []*sluice.Commit) error {
	var versions []SchemaVersion
	for _, c := range commits {
		if !c.RowImages {
			continue
		}
		if versions == nil {
			var err error
			if versions, err = db.SchemaVersions(ctx, d.ID); err != nil {
				return err
			}
			if len(versions) == 0 {
				return fmt.Errorf("row images of %s: no schema versions", d.Path())
			}
		}
		// The version the commit was made under: the last to start at or
		// before it (versions are oldest first).
		v := versions[0]
		for _, w := range versions {
			if w.FirstSeq <= c.Seq {
				v = w
			}
		}
		s, err := db.schemaVersion(d.ID, v)
		if err != nil {
			return err
		}
		for i := range c.Changes {
			ch := &c.Changes[i]
			cl := s.Class(ch.Class)
			if cl == nil {
				return fmt.Errorf("commit %d of %s: class %s of %s is not in schema version %d", c.Seq, d.Path(), ch.Class, ch.DocID, v.Version)
			}
			for _, img := range []*[]byte{(*[]byte)(&ch.Before), (*[]byte)(&ch.After)} {
				if *img == nil {
					continue
				}
				out, dropped, err := rowImage(cl, *img)
				if err != nil {
					return fmt.Errorf("commit %d of %s: image of %s: %w", c.Seq, d.Path(), ch.DocID, err)
				}
				if len(dropped) > 0 {
					db.logger.Warn("a document written through SQL holds values its fields cannot: left out of its image",
						"database", d.Path(), "commit", c.Seq, "document", ch.DocID, "fields", dropped)
				}
				*img = out
			}
		}
		c.RowImages = false
	}
	return nil
}

// schemaVersion returns version v of database dbID's schema, parsed.
func (db *DB) schemaVersion(dbID int64, v SchemaVersion) (*sluice.Schema, error) {
	key := schemaKey{dbID, v.Version}
	if s, ok := db.rowSchemas.cache.Get(key); ok {
		return s, nil
	}
	s, err := parseStored(dbID, v.SDL)
	if err != nil {
		return nil, err
	}
	db.rowSchemas.cache.Add(key, s)
	return s, nil
}

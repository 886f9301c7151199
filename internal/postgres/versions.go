package postgres

import (
	"context"
	"fmt"
	"sort"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schemacache"
)

// Every schema a database had is kept (sluice.schema_versions), because a
// commit's images are in the schema it was made under: reads of the log
// turn SQL writes' row images into documents through it (rowimages.go),
// and the engine shows history and the past through it. A database can
// have many versions, each up to max_schema_bytes of text, so what this
// process holds of them is bounded apart from how many there are: the
// list of versions holds two numbers each, and a version's text is read
// and parsed only when asked for, into a cache bounded in entries and in
// bytes of schema text.

// SchemaVersion is one version of a database's schema and the first
// commit made under it.
type SchemaVersion struct {
	Version  int
	FirstSeq int64
}

// versionLists caches each database's schema versions, oldest first: a
// statement reads the current version alone (once, not per commit: a
// lookup per commit added half again to a read of 256 commits, in
// buffers read), and the list is read again when it is older.
type versionLists struct {
	cache *lru.Cache[int64, []SchemaVersion]
}

// listEntries bounds the databases versionLists keeps, and listMax the
// versions of a list it keeps (16 bytes each): at most 64 MiB however
// many schema changes databases have had. A longer list is read again
// when it is needed (a database changed its schema more than 1,024
// times; each read then holds its versions for that read alone).
const (
	listEntries = 4096
	listMax     = 1024
)

func newVersionLists() versionLists {
	c, err := lru.New[int64, []SchemaVersion](listEntries)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return versionLists{cache: c}
}

// SchemaVersions returns the known schema versions of database d, oldest
// first, up to d.SchemaVersion at least. Versions from before migration 5
// are not known: the oldest listed may start after commit 1.
func (db *DB) SchemaVersions(ctx context.Context, d *sluice.Database) ([]SchemaVersion, error) {
	vs, ok := db.versions.cache.Get(d.ID)
	if ok && len(vs) > 0 && vs[len(vs)-1].Version >= d.SchemaVersion {
		return vs, nil
	}
	vs, err := db.readVersions(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	if len(vs) <= listMax {
		db.versions.cache.Add(d.ID, vs)
	}
	return vs, nil
}

// readVersions reads the known schema versions of database dbID, oldest
// first.
func (db *DB) readVersions(ctx context.Context, dbID int64) ([]SchemaVersion, error) {
	rows, err := db.pool.Query(ctx, "SELECT version, first_seq FROM sluice.schema_versions WHERE db_id = $1 ORDER BY version", dbID)
	if err != nil {
		return nil, mapError(err)
	}
	vs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SchemaVersion, error) {
		var v SchemaVersion
		err := row.Scan(&v.Version, &v.FirstSeq)
		return v, err
	})
	return vs, mapError(err)
}

// VersionAt returns the index in vs (SchemaVersions, oldest first) of the
// version commit seq was made under: the last to start at or before it;
// -1 when seq predates them all.
func VersionAt(vs []SchemaVersion, seq int64) int {
	return sort.Search(len(vs), func(i int) bool { return vs[i].FirstSeq > seq }) - 1
}

// commitVersions sets each commit's SchemaVersion and NewSchema, given
// current, database d's schema version when they were read (0: none
// known).
func (db *DB) commitVersions(ctx context.Context, d *sluice.Database, current int, commits []*sluice.Commit) error {
	if current == 0 || len(commits) == 0 {
		return nil
	}
	at := *d
	at.SchemaVersion = current
	vs, err := db.SchemaVersions(ctx, &at)
	if err != nil {
		return err
	}
	for _, c := range commits {
		if i := VersionAt(vs, c.Seq); i >= 0 {
			// Version 1 is the database's first schema, not a change.
			c.SchemaVersion, c.NewSchema = vs[i].Version, vs[i].FirstSeq == c.Seq && vs[i].Version > 1
		}
	}
	return nil
}

// parsedEntries and parsedBytes bound the parsed versions kept.
const (
	parsedEntries = 64
	parsedBytes   = 16 << 20
)

// SchemaAt returns version v of database dbID's schema, parsed: read from
// sluice.schema_versions when it is not cached.
func (db *DB) SchemaAt(ctx context.Context, dbID int64, v int) (*sluice.Schema, error) {
	key := schemacache.Key{DB: dbID, Version: v}
	if s, ok := db.parsed.Get(key); ok {
		return s, nil
	}
	var sdl string
	err := db.pool.QueryRow(ctx, "SELECT sdl FROM sluice.schema_versions WHERE db_id = $1 AND version = $2", dbID, v).Scan(&sdl)
	if err == pgx.ErrNoRows {
		return nil, fmt.Errorf("schema version %d of database %d is not stored", v, dbID)
	}
	if err != nil {
		return nil, mapError(err)
	}
	s, err := parseStored(dbID, sdl)
	if err != nil {
		return nil, fmt.Errorf("schema version %d: %w", v, err)
	}
	db.parsed.Add(key, s)
	return s, nil
}

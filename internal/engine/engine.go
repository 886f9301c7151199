// Package engine is Sluice's service layer: it authorizes every operation,
// validates and encodes documents against their database's schema, and
// hands every write to the one commit path, postgres.DB.Write (which owns
// transactions and group commit), whatever the entry point: REST, GraphQL
// or the daemon's own writes to _system, users, tokens and roles.
package engine

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
	"github.com/sluice-dev/sluice/internal/schemacache"
	"github.com/sluice-dev/sluice/internal/ttlcache"
)

// Engine runs Sluice's operations. It is safe for concurrent use.
type Engine struct {
	store  *postgres.DB
	auth   *auth.Authenticator
	logger *slog.Logger
	// onAccess is called after every committed access change (to wake the
	// change feed, which ends the streams it affects).
	onAccess func()
	// accessRate bounds each user's access changes (allowAccessChange;
	// nil: no bound).
	accessRate *accessRate
	// gcPercent is the collector's target while large writes run (see
	// bulkGC); 0 leaves it alone.
	gcPercent int
	// idempotency is how idempotency keys are kept (KeepIdempotencyKeys).
	idempotency struct {
		retention time.Duration
		maxKeys   int
	}
	// logRetention is the server's log_retention (UseLogRetention).
	logRetention time.Duration
	// maxSchemaBytes is max_schema_bytes (LimitSchemas).
	maxSchemaBytes int64
	// maxWriteDocuments is max_write_documents (LimitWrites).
	maxWriteDocuments int64
	// maxPastChanges is max_past_changes (LimitPast).
	maxPastChanges int64
	// maxDatabasesPerUser is max_databases_per_user (LimitDatabases).
	maxDatabasesPerUser int
	// writeBytes is what the documents of writes may hold at once
	// (LimitWriteBytes, writebudget.go).
	writeBytes *writeBudget

	// schemas holds parsed current schemas, bounded (a process serves
	// any number of databases, each schema up to max_schema_bytes).
	schemas *schemacache.Cache
	// digests holds what each schema version changed from the one
	// before, for reads of the past (digest.go), bounded.
	digests *sizedCache[schemacache.Key, *versionDigest]
	// drops holds, by database and schema version, the last version
	// whose change dropped stored values of each document class's
	// documents, which the tag of a whole document names (drops.go),
	// bounded.
	drops *sizedCache[schemacache.Key, map[string]int]
	// lost caches lostSince's findings by schema version.
	lost *sizedCache[lostKey, *Past]
	// dropWalks makes concurrent misses of one entry of drops walk once.
	dropWalks singleflight.Group
	// walks holds what walks of the schema versions found, for reads of
	// the past (past.go), bounded; walkRuns makes concurrent misses of
	// one walk walk once.
	walks    *sizedCache[walkKey, *versionScan]
	walkRuns singleflight.Group
	// farEdges holds, by database, the oldest commit a subscription's
	// event was last found to be within max_past_changes of the head
	// from (pastedge.go), bounded.
	farEdges *farEdges
	// walkTimeout bounds a walk of either group (sharedwalk.go).
	walkTimeout time.Duration
	// cursorKey seals the cursors of diff pages that end on documents
	// they leave out (diffcursor.go).
	cursorKey cursorKey

	// databases and roles save a round trip per request. Each entry is
	// tagged with the access log version it was read at: a request whose
	// credential was read at a newer version (an access change happened,
	// on any replica: a role changed, a database was deleted) reads them
	// again. Without a version (no credential in the context), entries
	// count for cacheTTL. Writes stay correct regardless: a commit checks
	// the schema version it validated against (postgres.DB.Write).
	databases *ttlcache.Cache[dbKey, versioned[cachedDatabase]]
	roles     *ttlcache.Cache[roleKey, versioned[sluice.Role]]
}

// versioned is a cached value and the access log version it was read at.
type versioned[T any] struct {
	v       T
	version int64
}

// fresh reports whether a cached value read at version may answer a
// request whose credential was read at want (0: any cached value within
// its TTL).
func fresh(version, want int64) bool { return want == 0 || version >= want }

// accessVersion returns the access log version of the request's
// credential, 0 when ctx carries none.
func accessVersion(ctx context.Context) int64 {
	if c := auth.CredentialFrom(ctx); c != nil {
		return c.AccessVersion
	}
	return 0
}

// cacheTTL is how long database metadata and roles are remembered.
const cacheTTL = time.Second

type dbKey struct{ org, name string }

type cachedDatabase struct {
	d   sluice.Database
	sdl string
}

type roleKey struct{ user, db int64 }

// schemaEntries and schemaBytes bound the parsed schemas an Engine keeps.
const (
	schemaEntries = 4096
	schemaBytes   = 64 << 20
)

// Hooks are called after changes commit, outside any transaction. Nil
// fields are not called. (Commits are announced by the store: see
// postgres.OnCommit.)
type Hooks struct {
	// OnAccess is called after every access change (see
	// sluice.AccessChange).
	OnAccess func()
}

// New returns an Engine.
func New(store *postgres.DB, a *auth.Authenticator, logger *slog.Logger, hooks Hooks) *Engine {
	if hooks.OnAccess == nil {
		hooks.OnAccess = func() {}
	}
	e := &Engine{store: store, auth: a, logger: logger, onAccess: hooks.OnAccess,
		schemas:     schemacache.New(schemaEntries, schemaBytes),
		digests:     newDigestCache(),
		drops:       newDropCache(),
		lost:        newLostCache(),
		walks:       newWalkCache(),
		farEdges:    newFarEdges(),
		walkTimeout: walkTimeout,
		databases:   ttlcache.New[dbKey, versioned[cachedDatabase]](cacheTTL, time.Now),
		roles:       ttlcache.New[roleKey, versioned[sluice.Role]](cacheTTL, time.Now),
	}
	e.KeepIdempotencyKeys(24*time.Hour, 10000)
	e.LimitSchemas(1 << 20)
	e.LimitWrites(1000000)
	e.LimitPast(100000)
	e.LimitWriteBytes(64<<20, 16<<20)
	e.LimitDatabases(100)
	e.LimitAccessChanges(10)
	return e
}

// LimitDatabases sets the most databases one user other than the super
// user may have made (max_databases_per_user; 0: no cap); call it before
// the Engine is used. New sets 100.
func (e *Engine) LimitDatabases(perUser int) { e.maxDatabasesPerUser = perUser }

// LimitWrites sets the most documents one write request may hold
// (max_write_documents); call it before the Engine is used. New sets
// 1,000,000.
func (e *Engine) LimitWrites(maxDocuments int64) { e.maxWriteDocuments = maxDocuments }

// LimitPast sets the most changes a read of the past reads from the log
// (max_past_changes): from a read's position to the head of the log, or
// between the two positions of a diff. Call it before the Engine is
// used. New sets 100,000.
func (e *Engine) LimitPast(maxChanges int64) { e.maxPastChanges = maxChanges }

// LimitWriteBytes sets the bytes of JSON the documents of writes
// in progress may hold at once, in all (write_bytes) and for one user
// (write_bytes_per_user); 0 leaves that bound out. Call it before the
// Engine is used. New sets 64 MiB and 16 MiB.
func (e *Engine) LimitWriteBytes(total, perUser int64) {
	e.writeBytes = newWriteBudget(total, perUser)
}

// WriteBudget returns the bytes of JSON the documents of writes in
// progress hold of write_bytes now, and how many writes wait for some.
func (e *Engine) WriteBudget() (held int64, waiting int) { return e.writeBytes.state() }

// CheckWriteCount returns the error of a write request found to hold n
// documents when that is more than max_write_documents, nil otherwise:
// for a caller that reads a request's documents one at a time and can
// stop at the first one too many.
func (e *Engine) CheckWriteCount(n int64) error {
	if e.maxWriteDocuments > 0 && n > e.maxWriteDocuments {
		return e.tooManyDocuments()
	}
	return nil
}

// tooManyDocuments is the error of a write request holding more than
// max_write_documents documents.
func (e *Engine) tooManyDocuments() error {
	return sluice.Errorf(sluice.CodeTooLarge, "the request holds more than %d documents (max_write_documents); send them in several requests", e.maxWriteDocuments)
}

// LimitSchemas sets the largest schema text, in bytes, that a database
// may be given (max_schema_bytes); call it before the Engine is used. New
// sets 1 MiB.
func (e *Engine) LimitSchemas(maxBytes int64) { e.maxSchemaBytes = maxBytes }

// MaxSchemaBytes returns max_schema_bytes, so that a request's schema can
// be refused before it is read past it.
func (e *Engine) MaxSchemaBytes() int64 { return e.maxSchemaBytes }

// checkSchemaSize refuses a schema text larger than max_schema_bytes,
// before it is parsed: each version of a schema is kept for good, and
// reads of the past parse the versions since their position.
func (e *Engine) checkSchemaSize(sdl string) error {
	if int64(len(sdl)) > e.maxSchemaBytes {
		return sluice.Errorf(sluice.CodeTooLarge, "the schema is %d bytes, more than max_schema_bytes (%d)", len(sdl), e.maxSchemaBytes)
	}
	return nil
}

// KeepIdempotencyKeys sets how long an Idempotency-Key answers again
// (idempotency_retention) and how many keys one user keeps at most
// (idempotency_max_keys, 0: no bound); call it before the Engine is used.
// New sets 24 hours and 10,000.
func (e *Engine) KeepIdempotencyKeys(retention time.Duration, maxKeys int) {
	e.idempotency.retention, e.idempotency.maxKeys = retention, maxKeys
}

// RaiseGCDuringBulkWrites sets the garbage collector's target (as GOGC)
// while writes of more than groupMax documents run (see bulkGC); call it
// before the Engine is used. The daemon does unless GOGC is set.
func (e *Engine) RaiseGCDuringBulkWrites(percent int) { e.gcPercent = percent }

// Auth returns the engine's authenticator.
func (e *Engine) Auth() *auth.Authenticator { return e.auth }

// parsed returns the parsed schema of d, parsing sdl once per schema version.
func (e *Engine) parsed(d *sluice.Database, sdl string) (*sluice.Schema, error) {
	key := schemacache.Key{DB: d.ID, Version: d.SchemaVersion}
	if s, ok := e.schemas.Get(key); ok {
		return s, nil
	}
	s, err := schema.Parse(sdl)
	if err != nil {
		return nil, err
	}
	// Older versions of the database are only needed by requests
	// already holding them: they age out.
	e.schemas.Add(key, s)
	return s, nil
}

// Database returns database org/name and its schema after checking that u
// has at least role on it: a Forbidden error names the role that is
// missing. A database of another organization that u has no role on
// answers exactly as one that does not exist (sluice.ErrNoDatabase), so
// its existence is not revealed; _system keeps its Forbidden.
func (e *Engine) Database(ctx context.Context, u *sluice.User, org, name string, role sluice.Role) (*sluice.Database, *sluice.Schema, error) {
	var d *sluice.Database
	var sdl string
	var have sluice.Role
	var err error
	if hidden(u, org) {
		d, sdl, have, err = e.foreignDatabase(ctx, u, org, name)
	} else {
		d, sdl, err = e.database(ctx, org, name)
		if err == nil {
			have, err = e.Role(ctx, u, d)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if have < role {
		if have == sluice.RoleNone {
			return nil, nil, sluice.Errorf(sluice.CodeForbidden, "user %s has no access to database %s", u.Name, d.Path())
		}
		return nil, nil, sluice.Errorf(sluice.CodeForbidden, "user %s needs the %s role on %s (has %s)", u.Name, role, d.Path(), have)
	}
	s, err := e.parsed(d, sdl)
	if err != nil {
		return nil, nil, err
	}
	return d, s, nil
}

// hidden reports whether the databases of organization org are hidden
// from u unless u holds a role on them: those of other organizations than
// u's own, _system aside (whose existence is no secret).
func hidden(u *sluice.User, org string) bool {
	return !u.Superuser && u.Org != org && org != sluice.SystemOrg
}

// foreignDatabase returns a copy of database org/name of an organization
// hidden from u, its SDL and u's role on it; ErrNoDatabase when it does
// not exist or u has no role on it. Whether such a database exists must
// show neither in the answer nor in the work done for it: were a refused
// database answered from the cache (database and RoleNone) while a name
// that does not exist costs a Postgres query every time, the response
// time would tell them apart. So the cache answers only a database u has
// a role on, and every other lookup is the one query DatabaseForUser,
// whether the database exists or not. (Caching misses instead would hide
// a database created since on another replica.)
func (e *Engine) foreignDatabase(ctx context.Context, u *sluice.User, org, name string) (*sluice.Database, string, sluice.Role, error) {
	key := dbKey{org, name}
	want := accessVersion(ctx)
	if c, ok := e.databases.Get(key); ok && fresh(c.version, want) {
		if r, ok := e.roles.Get(roleKey{u.ID, c.v.d.ID}); ok && fresh(r.version, want) && r.v != sluice.RoleNone {
			d := c.v.d
			return &d, c.v.sdl, r.v, nil
		}
	}
	d, sdl, have, err := e.store.DatabaseForUser(ctx, org, name, u.ID)
	if err != nil {
		return nil, "", sluice.RoleNone, err
	}
	if have == sluice.RoleNone {
		return nil, "", sluice.RoleNone, sluice.ErrNoDatabase(org, name)
	}
	e.databases.Put(key, versioned[cachedDatabase]{v: cachedDatabase{d: *d, sdl: sdl}, version: want})
	e.roles.Put(roleKey{u.ID, d.ID}, versioned[sluice.Role]{v: have, version: want})
	return d, sdl, have, nil
}

// database returns a copy of database org/name (callers may modify it) and
// its SDL, from the cache when fresh.
func (e *Engine) database(ctx context.Context, org, name string) (*sluice.Database, string, error) {
	key := dbKey{org, name}
	want := accessVersion(ctx)
	if c, ok := e.databases.Get(key); ok && fresh(c.version, want) {
		d := c.v.d
		return &d, c.v.sdl, nil
	}
	d, sdl, err := e.store.Database(ctx, org, name)
	if err != nil {
		return nil, "", err
	}
	e.databases.Put(key, versioned[cachedDatabase]{v: cachedDatabase{d: *d, sdl: sdl}, version: want})
	return d, sdl, nil
}

// forgetDatabase drops d from the cache, after this process changed it or a
// write found it changed.
func (e *Engine) forgetDatabase(d *sluice.Database) {
	e.databases.Delete(dbKey{d.Org, d.Name})
}

// Role returns u's role on d: admin for the super user, admin on _system for
// nobody else (only the daemon writes it; only the super user reads it), and
// the granted role otherwise.
func (e *Engine) Role(ctx context.Context, u *sluice.User, d *sluice.Database) (sluice.Role, error) {
	if u.Superuser {
		return sluice.RoleAdmin, nil
	}
	if d.Org == sluice.SystemOrg {
		return sluice.RoleNone, nil
	}
	key := roleKey{u.ID, d.ID}
	want := accessVersion(ctx)
	if r, ok := e.roles.Get(key); ok && fresh(r.version, want) {
		return r.v, nil
	}
	r, err := e.store.Role(ctx, u.ID, d.ID)
	if err == nil {
		e.roles.Put(key, versioned[sluice.Role]{v: r, version: want})
	}
	return r, err
}

// Forget releases what the engine keeps for database id (its parsed
// schemas) after the database was deleted.
func (e *Engine) Forget(id int64) { e.schemas.Forget(id) }

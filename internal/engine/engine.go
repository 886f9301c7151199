// Package engine is Sluice's service layer: it authorizes every operation,
// validates documents against their database's schema, and runs every write
// through the one commit path (internal/postgres Writer), whatever the entry
// point: REST, GraphQL or the daemon's own writes to _system.
package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
	"github.com/sluice-dev/sluice/internal/ttlcache"
)

// Engine runs Sluice's operations. It is safe for concurrent use.
type Engine struct {
	store  *postgres.DB
	auth   *auth.Authenticator
	logger *slog.Logger
	// onCommit is called after every successful commit, outside any
	// transaction (to wake the change feed and the notifier).
	onCommit func(*sluice.Commit)
	// gcPercent is the collector's target while large writes run (see
	// bulkGC); 0 leaves it alone.
	gcPercent int

	mu         sync.Mutex
	schemas    map[schemaKey]*sluice.Schema
	committers map[int64]*committer // by database id; see group.go

	// databases and roles save a round trip per request. Changes made
	// through this process clear them at once; other replicas' changes
	// show within cacheTTL. Writes stay correct regardless: a commit
	// checks the schema version it validated against (postgres.Writer).
	databases *ttlcache.Cache[dbKey, cachedDatabase]
	roles     *ttlcache.Cache[roleKey, sluice.Role]
}

// cacheTTL is how long database metadata and roles are remembered.
const cacheTTL = time.Second

type dbKey struct{ org, name string }

type cachedDatabase struct {
	d   sluice.Database
	sdl string
}

type roleKey struct{ user, db int64 }

type schemaKey struct {
	db      int64
	version int
}

// New returns an Engine. onCommit may be nil.
func New(store *postgres.DB, a *auth.Authenticator, logger *slog.Logger, onCommit func(*sluice.Commit)) *Engine {
	if onCommit == nil {
		onCommit = func(*sluice.Commit) {}
	}
	return &Engine{store: store, auth: a, logger: logger, onCommit: onCommit, schemas: map[schemaKey]*sluice.Schema{}, committers: map[int64]*committer{},
		databases: ttlcache.New[dbKey, cachedDatabase](cacheTTL, time.Now),
		roles:     ttlcache.New[roleKey, sluice.Role](cacheTTL, time.Now),
	}
}

// RaiseGCDuringBulkWrites sets the garbage collector's target (as GOGC)
// while writes of more than groupMax documents run (see bulkGC); call it
// before the Engine is used. The daemon does unless GOGC is set.
func (e *Engine) RaiseGCDuringBulkWrites(percent int) { e.gcPercent = percent }

// Auth returns the engine's authenticator.
func (e *Engine) Auth() *auth.Authenticator { return e.auth }

// parsed returns the parsed schema of d, parsing sdl once per schema version.
func (e *Engine) parsed(d *sluice.Database, sdl string) (*sluice.Schema, error) {
	key := schemaKey{d.ID, d.SchemaVersion}
	e.mu.Lock()
	s, ok := e.schemas[key]
	e.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := schema.Parse(sdl)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	// Only the newest version of a database is kept: older ones are only
	// needed by requests already holding them.
	for k := range e.schemas {
		if k.db == d.ID && k.version < d.SchemaVersion {
			delete(e.schemas, k)
		}
	}
	e.schemas[key] = s
	e.mu.Unlock()
	return s, nil
}

// Database returns database org/name and its schema after checking that u
// has at least role on it: a Forbidden error names the role that is missing.
func (e *Engine) Database(ctx context.Context, u *sluice.User, org, name string, role sluice.Role) (*sluice.Database, *sluice.Schema, error) {
	d, sdl, err := e.database(ctx, org, name)
	if err != nil {
		return nil, nil, err
	}
	have, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, nil, err
	}
	if have < role {
		if have == sluice.RoleNone && u.Org != org {
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

// database returns a copy of database org/name (callers may modify it) and
// its SDL, from the cache when fresh.
func (e *Engine) database(ctx context.Context, org, name string) (*sluice.Database, string, error) {
	key := dbKey{org, name}
	if c, ok := e.databases.Get(key); ok {
		d := c.d
		return &d, c.sdl, nil
	}
	d, sdl, err := e.store.Database(ctx, org, name)
	if err != nil {
		return nil, "", err
	}
	e.databases.Put(key, cachedDatabase{d: *d, sdl: sdl})
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
	if r, ok := e.roles.Get(key); ok {
		return r, nil
	}
	r, err := e.store.Role(ctx, u.ID, d.ID)
	if err == nil {
		e.roles.Put(key, r)
	}
	return r, err
}

// Forget releases what the engine keeps for database id (its parsed
// schemas and its group-commit queue) after the database was deleted.
func (e *Engine) Forget(id int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.schemas {
		if k.db == id {
			delete(e.schemas, k)
		}
	}
	delete(e.committers, id)
}

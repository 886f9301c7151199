package engine

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// validName is the rule for organization, database and user names: they
// appear in URL paths and document ids, so they stay simple.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

func checkName(kind, name string) error {
	if !validName.MatchString(name) {
		return sluice.Errorf(sluice.CodeInvalid, "invalid %s name %s: use 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit", kind, sluice.Echo(name))
	}
	return nil
}

// NewDatabase describes a database to create.
type NewDatabase struct {
	Org, Name, Label, Comment string
	// Schema is the SDL; empty means an empty schema, to be set later.
	Schema string
}

// MaxDatabaseLabelBytes and MaxDatabaseCommentBytes bound a database's
// label and comment: both are in every listing of the databases a user
// can read (GET /api/db, the landing and GraphiQL pages), so unbounded,
// one user's databases made every listing that shows them as large.
const (
	MaxDatabaseLabelBytes   = 256
	MaxDatabaseCommentBytes = 4096
)

// CreateDatabase creates a database. The super user may create one in any
// organization, other users in their own, becoming its admin. The database's
// UserDatabase document is written to _system in the same transaction. A
// label longer than MaxDatabaseLabelBytes or a comment longer than
// MaxDatabaseCommentBytes is Invalid.
func (e *Engine) CreateDatabase(ctx context.Context, u *sluice.User, nd NewDatabase) (*sluice.Database, error) {
	if err := checkName("database", nd.Name); err != nil {
		return nil, err
	}
	if err := e.allowAccessChange(u); err != nil {
		return nil, err
	}
	if nd.Org == sluice.SystemOrg {
		return nil, sluice.Errorf(sluice.CodeForbidden, "the _system organization is reserved")
	}
	if !u.Superuser && u.Org != nd.Org {
		return nil, sluice.Errorf(sluice.CodeForbidden, "user %s may only create databases in organization %s", u.Name, u.Org)
	}
	if len(nd.Label) > MaxDatabaseLabelBytes {
		return nil, sluice.Errorf(sluice.CodeInvalid, "the label is %d bytes, longer than the %d allowed", len(nd.Label), MaxDatabaseLabelBytes)
	}
	if len(nd.Comment) > MaxDatabaseCommentBytes {
		return nil, sluice.Errorf(sluice.CodeInvalid, "the comment is %d bytes, longer than the %d allowed", len(nd.Comment), MaxDatabaseCommentBytes)
	}
	if err := e.checkSchemaSize(nd.Schema); err != nil {
		return nil, err
	}
	s, err := schema.ParseNew(nd.Schema)
	if err != nil {
		return nil, err
	}
	d := &sluice.Database{Org: nd.Org, Name: nd.Name, Label: nd.Label, Comment: nd.Comment}
	_, err = e.systemWrite(ctx, u, "create database "+d.Path(), func(ctx context.Context, tx *postgres.Tx) error {
		creator := postgres.Creator{ID: u.ID, Name: u.Name}
		if !u.Superuser {
			creator.Max = e.maxDatabasesPerUser
		}
		if err := tx.CreateDatabase(ctx, d, s, creator); err != nil {
			return err
		}
		if u.Superuser {
			return nil
		}
		return tx.SetRole(ctx, u, d, sluice.RoleAdmin)
	}, func(ctx context.Context, w *postgres.Writer) error {
		return w.Insert(ctx, []*sluice.Document{userDatabaseDoc(d)})
	})
	if err != nil {
		return nil, err
	}
	e.forgetDatabase(d)
	if !u.Superuser {
		e.accessChanged(ctx)
	}
	return d, nil
}

func userDatabaseDoc(d *sluice.Database) *sluice.Document {
	f := map[string]any{"name": d.Name, "organization": d.Org}
	if d.Label != "" {
		f["label"] = d.Label
	}
	if d.Comment != "" {
		f["comment"] = d.Comment
	}
	return &sluice.Document{ID: "UserDatabase/" + d.Org + "/" + d.Name, Type: "UserDatabase", Fields: f}
}

// DeleteDatabase deletes a database with all its documents and history; it
// needs the admin role. Its UserDatabase document is deleted from _system in
// the same transaction.
func (e *Engine) DeleteDatabase(ctx context.Context, u *sluice.User, org, name string) error {
	d, _, err := e.Database(ctx, u, org, name, sluice.RoleAdmin)
	if err != nil {
		return err
	}
	if err := e.allowAccessChange(u); err != nil {
		return err
	}
	if err := writable(d); err != nil {
		return err
	}
	_, err = e.systemWrite(ctx, u, "delete database "+d.Path(), func(ctx context.Context, tx *postgres.Tx) error {
		return tx.DeleteDatabase(ctx, d)
	}, func(ctx context.Context, w *postgres.Writer) error {
		return w.Delete(ctx, []string{userDatabaseDoc(d).ID}, nil)
	})
	e.forgetDatabase(d)
	if err != nil {
		return err
	}
	e.accessChanged(ctx)
	return nil
}

// Databases returns the databases u can read, _system excluded.
func (e *Engine) Databases(ctx context.Context, u *sluice.User) ([]*sluice.Database, error) {
	ds, _, err := e.DatabasesWithRoles(ctx, u)
	return ds, err
}

// DatabasesWithRoles returns the databases u can read, _system excluded,
// and u's role on each (admin on every one for the super user), without
// their schemas. Only the databases u holds a role on are read.
func (e *Engine) DatabasesWithRoles(ctx context.Context, u *sluice.User) ([]*sluice.Database, []sluice.Role, error) {
	return e.store.ReadableDatabases(ctx, u.ID, u.Superuser)
}

// systemWrite runs before, then write, which writes documents of _system,
// as one commit of u's (message says what it does), in one transaction:
// a change to organizations, users or databases and the _system documents
// that show it commit together.
func (e *Engine) systemWrite(ctx context.Context, u *sluice.User, message string, before func(context.Context, *postgres.Tx) error, write func(context.Context, *postgres.Writer) error) (*sluice.Commit, error) {
	d, sdl, err := e.database(ctx, sluice.SystemOrg, sluice.SystemDB)
	if err != nil {
		return nil, err
	}
	s, err := e.parsed(d, sdl)
	if err != nil {
		return nil, err
	}
	return e.store.Write(ctx, postgres.WriteSpec{Before: before, Database: d, Schema: s,
		Meta: postgres.CommitMeta{Author: "sluice", Message: message, User: u.Name}, Documents: write})
}

// Schema returns the SDL of a database u can read, with its schema
// version and u's role on the database (whose view of the SDL it is).
//
// It is what u's role may see (schema.VisibleSDL): below admin, the
// fields the role may not read are left out, as they are from the
// GraphQL schema the role is served.
func (e *Engine) Schema(ctx context.Context, u *sluice.User, org, name string) (*SchemaText, error) {
	// The current schema, not a cached one: answered from no table, a
	// cached schema would show the one before a change another replica
	// just made (the cache keeps a database up to a second).
	e.forgetDatabase(&sluice.Database{Org: org, Name: name})
	d, s, err := e.Database(ctx, u, org, name, sluice.RoleRead)
	if err != nil {
		return nil, err
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, err
	}
	sdl, err := schema.VisibleSDL(s.SDL, role)
	if err != nil {
		return nil, err
	}
	return &SchemaText{SDL: sdl, Version: d.SchemaVersion, Role: role}, nil
}

// SchemaText is a database's schema as one role reads it (Schema).
type SchemaText struct {
	SDL string
	// Version is the schema version: what PutSchemaOptions.Version
	// expects.
	Version int
	Role    sluice.Role
}

// PutSchemaOptions are how PutSchema applies a schema.
type PutSchemaOptions struct {
	// Force applies a change that loses data.
	Force bool
	// Version, when not 0, is the schema version the change expects to
	// replace (a preview's, or Schema's): a schema that moved since is
	// not changed (PreconditionFailed), so that a change confirmed
	// against one version never drops what another version added.
	Version int
}

// schemaMoved is the error of a schema change or preview of d that
// expected schema version want, where the schema is at version current.
func schemaMoved(d *sluice.Database, want, current int) error {
	return sluice.Errorf(sluice.CodePrecondition, "the schema of %s is at version %d, not version %d as the request expected: it changed since; nothing was changed; read it (or preview the change) again", d.Path(), current, want)
}

// SchemaChange reports what PutSchema did.
type SchemaChange struct {
	Changes []schema.Change
	Version int
	// Commit is the commit that made the change (nil when the schema was
	// already the one given).
	Commit *sluice.Commit
}

// PutSchema replaces a database's schema; it needs the admin role. Additive
// changes apply in place. A destructive change (one that drops stored values)
// is refused with a Conflict naming what would be lost, unless force is set;
// with force, what it drops goes in the change's transaction, values
// inside subdocuments and references that no longer fit included. A change
// that would leave a stored document lacking a required field (at any
// depth), or holding a dropped enum value, is refused with a Conflict,
// force or not: that would leave invalid documents behind (see conformer).
//
// The change is a commit of the database's log, one that changes no
// document (sluice.Commit.NewSchema): every read, write and stream, on
// every replica, works through the new schema from that commit on, and a
// stream that follows the log learns of the change there (see graph's
// Subscription.Revise).
//
// With opts.Version, the change is made only if the schema is at that
// version, checked again under the change's lock, so that it holds
// against a change made meanwhile on any replica.
func (e *Engine) PutSchema(ctx context.Context, u *sluice.User, org, name, sdl string, opts PutSchemaOptions) (*SchemaChange, error) {
	// The current version, not a cached one: a change prepared from an
	// older version would be refused when it locks the counter row.
	e.forgetDatabase(&sluice.Database{Org: org, Name: name})
	d, prev, err := e.Database(ctx, u, org, name, sluice.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if err := writable(d); err != nil {
		return nil, err
	}
	// Before the diff: against a schema that moved, what it would do
	// (refused without force, or nothing) is not what the client saw.
	if opts.Version != 0 && opts.Version != d.SchemaVersion {
		return nil, schemaMoved(d, opts.Version, d.SchemaVersion)
	}
	if err := e.checkSchemaSize(sdl); err != nil {
		return nil, err
	}
	next, err := schema.ParseChange(sdl, prev)
	if err != nil {
		return nil, err
	}
	changes := schema.Diff(prev, next)
	var lost []string
	for _, c := range changes {
		if c.Destructive {
			lost = append(lost, c.Reason)
		}
	}
	if len(lost) > 0 && !opts.Force {
		return nil, sluice.Errorf(sluice.CodeConflict, "the schema change would lose data: %s; repeat with force=true to apply it", strings.Join(lost, "; "))
	}
	if len(changes) == 0 && next.SDL == prev.SDL {
		return &SchemaChange{Version: d.SchemaVersion}, nil
	}
	// The commit's message is read by every role that reads the log: it
	// names only the changes the weakest role sees, and counts the rest.
	message := schema.DescribeChanges(changes, prev, next, sluice.RoleRead)
	if len(changes) == 0 {
		message = "the same classes, written differently"
	}
	conform := newConformer(prev, next, changes)
	commit, err := e.store.Write(ctx, postgres.WriteSpec{Database: d, Schema: next,
		Meta: postgres.CommitMeta{Author: "sluice", Message: "schema change: " + message, User: u.Name},
		// ChangeSchema moves d to the new version, which the commit is
		// then made under.
		Documents: func(context.Context, *postgres.Writer) error { return nil },
		Before: func(ctx context.Context, tx *postgres.Tx) error {
			if err := tx.LockForSchemaChange(ctx, d, prev); err != nil {
				// The schema moved after it was read above (another
				// change, on any replica): a client that expected the
				// version read is answered so, not asked to retry.
				var moved *postgres.SchemaMovedError
				if opts.Version != 0 && errors.As(err, &moved) {
					return schemaMoved(d, opts.Version, moved.Current)
				}
				return err
			}
			// The values the change keeps, checked and rewritten before its
			// DDL: a change refused here costs no index built nor table
			// rewritten.
			found, err := walkStored(ctx, tx, d, conform, true)
			if err != nil {
				return err
			}
			if refused := conform.refusals(found); len(refused) > 0 {
				return sluice.Errorf(sluice.CodeConflict, "%s", strings.Join(refused, "; "))
			}
			return tx.ChangeSchema(ctx, d, prev, next)
		}})
	e.forgetDatabase(d)
	if err != nil {
		return nil, err
	}
	return &SchemaChange{Changes: changes, Version: d.SchemaVersion, Commit: commit}, nil
}

// documentClasses returns the document classes among class and its
// descendants: the tables that hold its documents.
func documentClasses(s *sluice.Schema, class string) []string {
	var out []string
	for _, n := range s.Descendants(class) {
		if s.Classes[n].Kind == sluice.KindDocument {
			out = append(out, n)
		}
	}
	return out
}

// PostgresSchema returns the Postgres schema of database d's tables (one
// table per document class, named as the class).
func PostgresSchema(d *sluice.Database) string { return postgres.SchemaName(d) }

package engine

import (
	"context"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// CheckGrant checks a stream's grant against the current state in
// Postgres, bypassing every cache: the credential still authenticates (the
// token is unrevoked, the password unchanged, the user exists), the
// database is the same incarnation, and the user still has the grant's
// role on it. It returns nil when the grant holds, else the error a
// request would get (Unauthenticated, Forbidden or NotFound).
//
// It reads store alone, not an Engine and its caches, so the change feed's
// hub, which calls it, is built before the engine, whose credential cache
// reads the hub (see internal/daemon).
func CheckGrant(ctx context.Context, store *postgres.DB, g *sluice.Grant) error {
	u := g.User
	c, err := store.PasswordCredential(ctx, u.Name)
	if sluice.ErrorCode(err) == sluice.CodeNotFound || err == nil && c.User.ID != u.ID {
		return sluice.Errorf(sluice.CodeUnauthenticated, "user %s no longer exists", u.Name)
	}
	if err != nil {
		return err
	}
	switch {
	case g.TokenID != 0:
		ok, err := store.TokenValid(ctx, u.ID, g.TokenID)
		if err != nil {
			return err
		}
		if !ok {
			return sluice.Errorf(sluice.CodeUnauthenticated, "invalid or revoked token")
		}
	case g.PasswordHash != "" && c.PasswordHash != g.PasswordHash:
		return sluice.Errorf(sluice.CodeUnauthenticated, "the password of %s changed; authenticate again", u.Name)
	}
	d, _, err := store.Database(ctx, g.Database.Org, g.Database.Name)
	if err != nil {
		return err
	}
	if d.ID != g.Database.ID {
		return sluice.ErrNoDatabase(g.Database.Org, g.Database.Name)
	}
	if c.User.Superuser {
		return nil
	}
	if d.Org == sluice.SystemOrg {
		return sluice.Errorf(sluice.CodeForbidden, "user %s has no access to database %s", u.Name, d.Path())
	}
	role, err := store.Role(ctx, u.ID, d.ID)
	if err != nil {
		return err
	}
	if role < g.Role {
		if role == sluice.RoleNone && u.Org != d.Org {
			return sluice.ErrNoDatabase(d.Org, d.Name)
		}
		return sluice.Errorf(sluice.CodeForbidden, "the role of %s on %s is %s, below the %s this stream was opened with; subscribe again", u.Name, d.Path(), role, g.Role)
	}
	return nil
}

// Grant returns the grant of a stream opened by user u, with the request
// credential carried by ctx (auth.CredentialFrom), on database d with role.
func Grant(ctx context.Context, u *sluice.User, d *sluice.Database, role sluice.Role) *sluice.Grant {
	g := &sluice.Grant{Credential: sluice.Credential{User: u}, Database: d, Role: role}
	if c := auth.CredentialFrom(ctx); c != nil && c.User != nil && c.User.ID == u.ID {
		g.Credential = *c
	}
	return g
}

// accessChanged is called after an access change of this process
// committed: remembered credentials read before it count no more, at once
// (the change's request has not answered yet), and the change feed is
// woken to end the streams it affects.
func (e *Engine) accessChanged(ctx context.Context) {
	if v, err := e.store.AccessVersion(context.WithoutCancel(ctx)); err == nil {
		e.auth.Invalidate(v)
	} else {
		e.auth.Forget()
	}
	e.onAccess()
}

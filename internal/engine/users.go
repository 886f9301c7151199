package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// The default organization and super user, part of the external contract
// (docs/design.md; the README's quick start signs in as admin).
const (
	AdminOrg  = "admin"
	AdminUser = "admin"
)

// Bootstrap makes sure the admin organization, the admin super user and the
// _system database exist. When adminPassword is set, the admin password is
// (re)set to it; when it is empty and the admin user is new, a random password
// is generated and returned so the caller can print it once. Concurrent
// bootstraps (replicas starting together) are serialized by a lock that
// each step takes in its transaction (postgres.Tx.LockBootstrap).
func (e *Engine) Bootstrap(ctx context.Context, adminPassword string) (generated string, err error) {
	if err := e.bootstrapSystem(ctx); err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	generated, err = e.bootstrapAdmin(ctx, adminPassword)
	if err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	return generated, nil
}

// bootstrapSystem creates the _system database unless it exists.
func (e *Engine) bootstrapSystem(ctx context.Context) error {
	_, err := e.store.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.LockBootstrap(ctx); err != nil {
			return err
		}
		sys := &sluice.Database{Org: sluice.SystemOrg, Name: sluice.SystemDB, Label: "System database"}
		_, _, err := tx.Database(ctx, sys.Org, sys.Name)
		if sluice.ErrorCode(err) != sluice.CodeNotFound {
			return err
		}
		if err := tx.CreateOrganization(ctx, sluice.SystemOrg); err != nil {
			return err
		}
		s, err := schema.Parse(sluice.SystemSchemaSDL)
		if err != nil {
			return fmt.Errorf("system schema: %w", err)
		}
		return tx.CreateDatabase(ctx, sys, s, postgres.Creator{}) // made by no user
	}})
	return err
}

// errAdminExists says another process created the admin user first.
var errAdminExists = errors.New("the admin user exists")

// bootstrapAdmin creates the admin organization and super user with their
// _system documents unless the user exists, and otherwise resets its
// password to adminPassword when that is set and differs.
func (e *Engine) bootstrapAdmin(ctx context.Context, adminPassword string) (generated string, err error) {
	_, hash, err := e.store.UserByName(ctx, AdminUser)
	if sluice.ErrorCode(err) == sluice.CodeNotFound {
		password := adminPassword
		if password == "" {
			password = auth.RandomPassword()
		}
		newHash, err := e.auth.HashPassword(password)
		if err != nil {
			return "", err
		}
		u := &sluice.User{Name: AdminUser, Org: AdminOrg, Superuser: true}
		_, err = e.systemWrite(ctx, u, "bootstrap", func(ctx context.Context, tx *postgres.Tx) error {
			if err := tx.LockBootstrap(ctx); err != nil {
				return err
			}
			if _, _, err := tx.UserByName(ctx, AdminUser); err == nil {
				return errAdminExists
			} else if sluice.ErrorCode(err) != sluice.CodeNotFound {
				return err
			}
			if err := tx.CreateOrganization(ctx, AdminOrg); err != nil && sluice.ErrorCode(err) != sluice.CodeConflict {
				return err
			}
			return tx.CreateUser(ctx, u, newHash)
		}, func(ctx context.Context, w *postgres.Writer) error {
			return w.Insert(ctx, []*sluice.Document{organizationDoc(AdminOrg), userDoc(u)})
		})
		if err == nil {
			if adminPassword == "" {
				generated = password
			}
			return generated, nil
		}
		if !errors.Is(err, errAdminExists) {
			return "", err
		}
		// Another replica created it: set the password below, if given.
		if _, hash, err = e.store.UserByName(ctx, AdminUser); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}
	if adminPassword == "" || auth.CheckPassword(hash, adminPassword) {
		return "", nil
	}
	hash, err = e.auth.HashPassword(adminPassword)
	if err != nil {
		return "", err
	}
	_, err = e.store.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		u, _, err := tx.UserByName(ctx, AdminUser)
		if err != nil {
			return err
		}
		return tx.SetPassword(ctx, u, hash)
	}})
	if err != nil {
		return "", err
	}
	e.accessChanged(ctx)
	return "", nil
}

func organizationDoc(name string) *sluice.Document {
	return &sluice.Document{ID: "Organization/" + name, Type: "Organization", Fields: map[string]any{"name": name}}
}

func userDoc(u *sluice.User) *sluice.Document {
	return &sluice.Document{ID: "User/" + u.Name, Type: "User", Fields: map[string]any{"name": u.Name, "organization": u.Org, "superuser": u.Superuser}}
}

func requireSuperuser(u *sluice.User) error {
	if !u.Superuser {
		return sluice.Errorf(sluice.CodeForbidden, "only the super user may do this")
	}
	return nil
}

// CreateOrganization creates an organization; super user only.
func (e *Engine) CreateOrganization(ctx context.Context, u *sluice.User, name string) error {
	if err := requireSuperuser(u); err != nil {
		return err
	}
	if err := checkName("organization", name); err != nil {
		return err
	}
	_, err := e.systemWrite(ctx, u, "create organization "+name, func(ctx context.Context, tx *postgres.Tx) error {
		return tx.CreateOrganization(ctx, name)
	}, func(ctx context.Context, w *postgres.Writer) error {
		return w.Insert(ctx, []*sluice.Document{organizationDoc(name)})
	})
	return err
}

// CreateUser creates a (non-super) user in an organization; super user only.
func (e *Engine) CreateUser(ctx context.Context, u *sluice.User, org, name, password string) (*sluice.User, error) {
	if err := requireSuperuser(u); err != nil {
		return nil, err
	}
	if err := checkName("user", name); err != nil {
		return nil, err
	}
	if len(password) < 8 {
		return nil, sluice.Errorf(sluice.CodeInvalid, "password must be at least 8 characters")
	}
	hash, err := e.auth.HashPassword(password)
	if err != nil {
		return nil, err
	}
	nu := &sluice.User{Org: org, Name: name}
	_, err = e.systemWrite(ctx, u, "create user "+name, func(ctx context.Context, tx *postgres.Tx) error {
		return tx.CreateUser(ctx, nu, hash)
	}, func(ctx context.Context, w *postgres.Writer) error {
		return w.Insert(ctx, []*sluice.Document{userDoc(nu)})
	})
	if err != nil {
		return nil, err
	}
	return nu, nil
}

// Users lists every user; super user only.
func (e *Engine) Users(ctx context.Context, u *sluice.User) ([]*sluice.User, error) {
	if err := requireSuperuser(u); err != nil {
		return nil, err
	}
	return e.store.Users(ctx)
}

// Organizations lists every organization; super user only.
func (e *Engine) Organizations(ctx context.Context, u *sluice.User) ([]string, error) {
	if err := requireSuperuser(u); err != nil {
		return nil, err
	}
	return e.store.Organizations(ctx)
}

// SetRole grants user target a role on a database (RoleNone revokes); it
// needs the admin role on that database. Open streams of target that the
// new role no longer allows end, on every replica (see sluice.AccessChange).
//
// Only the super user grants roles to users of other organizations than
// the database's. For anyone else a user of another organization answers
// as a user that does not exist, unless it already holds a role on the
// database (the admin sees it listed by Roles): then that role may be
// revoked, not changed. Otherwise any user could create a database in
// their own organization, become its admin, and probe or grant the users
// of every organization.
func (e *Engine) SetRole(ctx context.Context, u *sluice.User, org, name, target string, role sluice.Role) error {
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
	tu, err := e.grantTarget(ctx, u, d, target)
	if err != nil {
		return err
	}
	if !u.Superuser && tu.Org != d.Org && role != sluice.RoleNone {
		return sluice.Errorf(sluice.CodeForbidden, "user %s is not of organization %s: only the super user grants it a role on %s; its role may only be revoked", tu.Name, d.Org, d.Path())
	}
	_, err = e.store.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.SetRole(ctx, tu, d, role)
	}})
	if err != nil {
		return err
	}
	e.roles.Clear()
	e.accessChanged(ctx)
	return nil
}

// grantTarget returns the user called target for a grant by u on d: any
// user for the super user, and for others what postgres.DB.GrantTarget
// finds (a user of d's organization, or one already holding a role on d).
func (e *Engine) grantTarget(ctx context.Context, u *sluice.User, d *sluice.Database, target string) (*sluice.User, error) {
	if u.Superuser {
		tu, _, err := e.store.UserByName(ctx, target)
		return tu, err
	}
	return e.store.GrantTarget(ctx, target, d.Org, d.ID)
}

// RoleGrant is a role granted to a user on a database.
type RoleGrant = postgres.Grant

// Roles returns the roles granted on database org/name, by user name; it
// needs the admin role, as SetRole does. The super user, who has every
// role without a grant, is not listed.
func (e *Engine) Roles(ctx context.Context, u *sluice.User, org, name string) ([]RoleGrant, error) {
	d, _, err := e.Database(ctx, u, org, name, sluice.RoleAdmin)
	if err != nil {
		return nil, err
	}
	return e.store.DatabaseRoles(ctx, d.ID)
}

// MaxTokensPerUser bounds the unrevoked API tokens of one user, as
// maxTicketsPerUser bounds stream tickets: every token is a row that the
// user's listing returns, and no client needs more.
const MaxTokensPerUser = 1000

// MaxTokenNameBytes bounds a token's name, a label for its user, shown in
// every listing of the user's tokens.
const MaxTokenNameBytes = 256

// CreateToken creates an API token for u and returns its secret, which is
// never shown again. A name longer than MaxTokenNameBytes is Invalid, and
// a user holding MaxTokensPerUser unrevoked tokens gets TooMany.
func (e *Engine) CreateToken(ctx context.Context, u *sluice.User, name string) (*sluice.Token, string, error) {
	if err := notByToken(ctx, "create tokens"); err != nil {
		return nil, "", err
	}
	if len(name) > MaxTokenNameBytes {
		return nil, "", sluice.Errorf(sluice.CodeInvalid, "the token name is %d bytes, longer than the %d allowed", len(name), MaxTokenNameBytes)
	}
	secret, hash := auth.NewToken()
	var tok *sluice.Token
	_, err := e.store.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		var err error
		tok, err = tx.CreateToken(ctx, u.ID, name, hash, MaxTokensPerUser)
		return err
	}})
	if err != nil {
		return nil, "", err
	}
	return tok, secret, nil
}

// Tokens lists u's tokens.
func (e *Engine) Tokens(ctx context.Context, u *sluice.User) ([]*sluice.Token, error) {
	return e.store.Tokens(ctx, u.ID)
}

// RevokeToken revokes one of u's tokens. Requests with it are refused at
// once on every replica, and streams opened with it end.
func (e *Engine) RevokeToken(ctx context.Context, u *sluice.User, id int64) error {
	if err := e.allowAccessChange(u); err != nil {
		return err
	}
	_, err := e.store.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.RevokeToken(ctx, u.ID, id)
	}})
	if err != nil {
		return err
	}
	e.accessChanged(ctx)
	return nil
}

// ChangePassword sets user target's password; u must be target or the
// super user. Streams opened with the old password end; tokens stay valid.
func (e *Engine) ChangePassword(ctx context.Context, u *sluice.User, target, password string) error {
	if err := e.allowAccessChange(u); err != nil {
		return err
	}
	if u.Name != target {
		if err := requireSuperuser(u); err != nil {
			return err
		}
	} else if err := notByToken(ctx, "change its user's password"); err != nil {
		return err
	}
	if len(password) < 8 {
		return sluice.Errorf(sluice.CodeInvalid, "password must be at least 8 characters")
	}
	hash, err := e.auth.HashPassword(password)
	if err != nil {
		return err
	}
	// The user is read in the transaction that sets the password: read
	// before it, a user deleted and made again under the same name in
	// between kept its new password and the caller was told it changed.
	_, err = e.store.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		tu, _, err := tx.UserByName(ctx, target)
		if err != nil {
			return err
		}
		if !u.Superuser && tu.ID != u.ID {
			// A user changing its own password, deleted and made
			// again under its name while the new one was hashed:
			// that is another user's password.
			return sluice.Errorf(sluice.CodeNotFound, "user %q does not exist", u.Name)
		}
		return tx.SetPassword(ctx, tu, hash)
	}})
	if err != nil {
		return err
	}
	e.accessChanged(ctx)
	return nil
}

// DeleteUser deletes user target with its tokens and roles; super user
// only. The super user itself cannot be deleted. Its User document is
// deleted from _system in the same transaction, and its open streams end.
func (e *Engine) DeleteUser(ctx context.Context, u *sluice.User, target string) error {
	if err := requireSuperuser(u); err != nil {
		return err
	}
	_, err := e.systemWrite(ctx, u, "delete user "+target, func(ctx context.Context, tx *postgres.Tx) error {
		tu, _, err := tx.UserByName(ctx, target)
		if err != nil {
			return err
		}
		if tu.Superuser {
			return sluice.Errorf(sluice.CodeForbidden, "the super user %s cannot be deleted", tu.Name)
		}
		return tx.DeleteUser(ctx, tu)
	}, func(ctx context.Context, w *postgres.Writer) error {
		return w.Delete(ctx, []string{userDoc(&sluice.User{Name: target}).ID}, nil)
	})
	if err != nil {
		return err
	}
	e.roles.Clear()
	e.accessChanged(ctx)
	return nil
}

// DeleteOrganization deletes organization org with all its databases and
// users; super user only. The organizations admin (the super user's) and
// _system cannot be deleted. Their _system documents are deleted in the
// same transaction, and every open stream they allowed ends.
func (e *Engine) DeleteOrganization(ctx context.Context, u *sluice.User, org string) error {
	if err := requireSuperuser(u); err != nil {
		return err
	}
	if org == AdminOrg || org == sluice.SystemOrg {
		return sluice.Errorf(sluice.CodeForbidden, "organization %s cannot be deleted", org)
	}
	var dropped []*sluice.Database
	var docs []string
	_, err := e.systemWrite(ctx, u, "delete organization "+org, func(ctx context.Context, tx *postgres.Tx) error {
		all, err := tx.Databases(ctx)
		if err != nil {
			return err
		}
		for _, d := range all {
			if d.Org != org {
				continue
			}
			dropped = append(dropped, d)
			err := tx.DeleteDatabase(ctx, d)
			if sluice.ErrorCode(err) == sluice.CodeNotFound {
				// Deleted on its own since the databases were read,
				// its UserDatabase document, webhooks and roles with
				// it, by a deletion that committed while this one
				// waited for a lock: what was asked of it is done.
				continue
			}
			if err != nil {
				return err
			}
			docs = append(docs, userDatabaseDoc(d).ID)
		}
		users, err := tx.OrganizationMembers(ctx, org)
		if err != nil {
			return err
		}
		for _, m := range users {
			if m.Superuser {
				return sluice.Errorf(sluice.CodeForbidden, "organization %s holds the super user %s and cannot be deleted", org, m.Name)
			}
			err := tx.DeleteUser(ctx, m)
			if sluice.ErrorCode(err) == sluice.CodeNotFound {
				// Deleted on its own since the users were read, its
				// User document with it, by a deletion that committed
				// while this one waited for a row: what was asked of
				// it is done.
				continue
			}
			if err != nil {
				return err
			}
			docs = append(docs, userDoc(m).ID)
		}
		if err := tx.DeleteOrganization(ctx, org); err != nil {
			return err
		}
		docs = append(docs, organizationDoc(org).ID)
		return nil
	}, func(ctx context.Context, w *postgres.Writer) error {
		return w.Delete(ctx, docs, nil)
	})
	for _, d := range dropped {
		e.forgetDatabase(d)
	}
	if err != nil {
		return err
	}
	e.roles.Clear()
	e.accessChanged(ctx)
	return nil
}

// notByToken refuses, as Forbidden, an account change (what) requested
// with an API token: revoking a leaked token must end what its holder can
// do, and a token it made, or a password it set, would outlive it. The
// password (Basic) or a JWT can.
func notByToken(ctx context.Context, what string) error {
	if c := auth.CredentialFrom(ctx); c != nil && c.TokenID != 0 {
		return sluice.Errorf(sluice.CodeForbidden, "an API token cannot %s (they would outlive its revocation): authenticate with the password or a JWT", what)
	}
	return nil
}

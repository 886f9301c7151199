package engine

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// The default organization and super user (DESIGN.md: "Default organization
// admin, super user admin").
const (
	AdminOrg  = "admin"
	AdminUser = "admin"
)

// Bootstrap makes sure the admin organization, the admin super user and the
// _system database exist. When adminPassword is set, the admin password is
// (re)set to it; when it is empty and the admin user is new, a random password
// is generated and returned so the caller can print it once. Concurrent
// bootstraps (replicas starting together) are serialized by the transaction's
// advisory lock.
func (e *Engine) Bootstrap(ctx context.Context, adminPassword string) (generated string, err error) {
	var commits []*sluice.Commit
	err = e.store.InTx(ctx, func(tx *postgres.Tx) error {
		commits = nil
		if err := tx.AdvisoryLock(ctx, "sluice bootstrap"); err != nil {
			return err
		}
		sys := &sluice.Database{Org: sluice.SystemOrg, Name: sluice.SystemDB, Label: "System database"}
		if _, _, err := tx.Database(ctx, sys.Org, sys.Name); sluice.ErrorCode(err) == sluice.CodeNotFound {
			if err := tx.CreateOrganization(ctx, sluice.SystemOrg); err != nil {
				return err
			}
			s, err := schema.Parse(sluice.SystemSchemaSDL)
			if err != nil {
				return fmt.Errorf("system schema: %w", err)
			}
			if err := tx.CreateDatabase(ctx, sys, s); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		u, hash, err := tx.UserByName(ctx, AdminUser)
		switch {
		case sluice.ErrorCode(err) == sluice.CodeNotFound:
			password := adminPassword
			if password == "" {
				password = auth.RandomPassword()
				generated = password
			}
			if err := tx.CreateOrganization(ctx, AdminOrg); err != nil && sluice.ErrorCode(err) != sluice.CodeConflict {
				return err
			}
			hash, err := e.auth.HashPassword(password)
			if err != nil {
				return err
			}
			u = &sluice.User{Name: AdminUser, Org: AdminOrg, Superuser: true}
			if err := tx.CreateUser(ctx, u, hash); err != nil {
				return err
			}
			c, err := e.systemWrite(ctx, tx, u, "bootstrap", func(ctx context.Context, w *postgres.Writer) error {
				return w.Insert(ctx, []*sluice.Document{organizationDoc(AdminOrg), userDoc(u)})
			})
			commits = append(commits, c)
			return err
		case err != nil:
			return err
		case adminPassword != "" && !auth.CheckPassword(hash, adminPassword):
			hash, err := e.auth.HashPassword(adminPassword)
			if err != nil {
				return err
			}
			return tx.SetPassword(ctx, u.ID, hash)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	for _, c := range commits {
		e.onCommit(c)
	}
	return generated, nil
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
	var c *sluice.Commit
	err := e.store.InTx(ctx, func(tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, name); err != nil {
			return err
		}
		var err error
		c, err = e.systemWrite(ctx, tx, u, "create organization "+name, func(ctx context.Context, w *postgres.Writer) error {
			return w.Insert(ctx, []*sluice.Document{organizationDoc(name)})
		})
		return err
	})
	if err != nil {
		return err
	}
	e.onCommit(c)
	return nil
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
	var c *sluice.Commit
	err = e.store.InTx(ctx, func(tx *postgres.Tx) error {
		if err := tx.CreateUser(ctx, nu, hash); err != nil {
			return err
		}
		var err error
		c, err = e.systemWrite(ctx, tx, u, "create user "+name, func(ctx context.Context, w *postgres.Writer) error {
			return w.Insert(ctx, []*sluice.Document{userDoc(nu)})
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	e.onCommit(c)
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
func (e *Engine) SetRole(ctx context.Context, u *sluice.User, org, name, target string, role sluice.Role) error {
	d, _, err := e.Database(ctx, u, org, name, sluice.RoleAdmin)
	if err != nil {
		return err
	}
	if err := writable(d); err != nil {
		return err
	}
	tu, _, err := e.store.UserByName(ctx, target)
	if err != nil {
		return err
	}
	err = e.store.InTx(ctx, func(tx *postgres.Tx) error { return tx.SetRole(ctx, tu.ID, d.ID, role) })
	if err != nil {
		return err
	}
	e.roles.Clear()
	e.onAccess()
	return nil
}

// CreateToken creates an API token for u and returns its secret, which is
// never shown again.
func (e *Engine) CreateToken(ctx context.Context, u *sluice.User, name string) (*sluice.Token, string, error) {
	secret, hash := auth.NewToken()
	tok, err := e.store.CreateToken(ctx, u.ID, name, hash)
	return tok, secret, err
}

// Tokens lists u's tokens.
func (e *Engine) Tokens(ctx context.Context, u *sluice.User) ([]*sluice.Token, error) {
	return e.store.Tokens(ctx, u.ID)
}

// RevokeToken revokes one of u's tokens. Requests with it are refused at
// once on every replica, and streams opened with it end.
func (e *Engine) RevokeToken(ctx context.Context, u *sluice.User, id int64) error {
	err := e.store.InTx(ctx, func(tx *postgres.Tx) error { return tx.RevokeToken(ctx, u.ID, id) })
	if err != nil {
		return err
	}
	e.onAccess()
	return nil
}

// ChangePassword sets user target's password; u must be target or the
// super user. Streams opened with the old password end; tokens stay valid.
func (e *Engine) ChangePassword(ctx context.Context, u *sluice.User, target, password string) error {
	if u.Name != target {
		if err := requireSuperuser(u); err != nil {
			return err
		}
	}
	if len(password) < 8 {
		return sluice.Errorf(sluice.CodeInvalid, "password must be at least 8 characters")
	}
	hash, err := e.auth.HashPassword(password)
	if err != nil {
		return err
	}
	tu, _, err := e.store.UserByName(ctx, target)
	if err != nil {
		return err
	}
	if err := e.store.InTx(ctx, func(tx *postgres.Tx) error { return tx.SetPassword(ctx, tu.ID, hash) }); err != nil {
		return err
	}
	e.onAccess()
	return nil
}

// DeleteUser deletes user target with its tokens and roles; super user
// only. The super user itself cannot be deleted. Its User document is
// deleted from _system in the same transaction, and its open streams end.
func (e *Engine) DeleteUser(ctx context.Context, u *sluice.User, target string) error {
	if err := requireSuperuser(u); err != nil {
		return err
	}
	var c *sluice.Commit
	err := e.store.InTx(ctx, func(tx *postgres.Tx) error {
		tu, _, err := tx.UserByName(ctx, target)
		if err != nil {
			return err
		}
		if tu.Superuser {
			return sluice.Errorf(sluice.CodeForbidden, "the super user %s cannot be deleted", tu.Name)
		}
		if err := tx.DeleteUser(ctx, tu); err != nil {
			return err
		}
		c, err = e.systemWrite(ctx, tx, u, "delete user "+target, func(ctx context.Context, w *postgres.Writer) error {
			return w.Delete(ctx, []string{userDoc(tu).ID})
		})
		return err
	})
	if err != nil {
		return err
	}
	e.roles.Clear()
	e.onCommit(c)
	e.onAccess()
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
	var c *sluice.Commit
	var dropped []*sluice.Database
	err := e.store.InTx(ctx, func(tx *postgres.Tx) error {
		dropped = nil
		all, err := tx.Databases(ctx)
		if err != nil {
			return err
		}
		var docs []string
		for _, d := range all {
			if d.Org != org {
				continue
			}
			if err := tx.DeleteDatabase(ctx, d); err != nil {
				return err
			}
			dropped = append(dropped, d)
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
			if err := tx.DeleteUser(ctx, m); err != nil {
				return err
			}
			docs = append(docs, userDoc(m).ID)
		}
		if err := tx.DeleteOrganization(ctx, org); err != nil {
			return err
		}
		docs = append(docs, organizationDoc(org).ID)
		c, err = e.systemWrite(ctx, tx, u, "delete organization "+org, func(ctx context.Context, w *postgres.Writer) error {
			return w.Delete(ctx, docs)
		})
		return err
	})
	for _, d := range dropped {
		e.forgetDatabase(d)
	}
	if err != nil {
		return err
	}
	e.roles.Clear()
	e.onCommit(c)
	e.onAccess()
	return nil
}

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
			e.auth.Forget()
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
// needs the admin role on that database.
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
	e.roles.Clear()
	return err
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

// RevokeToken revokes one of u's tokens. It takes effect at once here and
// within auth.CacheTTL on other replicas.
func (e *Engine) RevokeToken(ctx context.Context, u *sluice.User, id int64) error {
	if err := e.store.RevokeToken(ctx, u.ID, id); err != nil {
		return err
	}
	e.auth.Forget()
	return nil
}

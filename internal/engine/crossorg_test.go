package engine_test

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// TestSetRoleStaysInTheOrganization: an admin who is not the super user
// grants roles only to users of the database's organization. Eve, admin
// of a database she made in her own organization, cannot grant Bob of
// acme a role, and her probe of his name answers exactly as one of a name
// nobody has, so she learns nothing of other organizations' user names.
// The super user still grants across organizations, and a grant it made
// may be revoked by the database's admin, who sees it listed.
func TestSetRoleStaysInTheOrganization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	for _, org := range []string{"evil", "acme"} {
		if err := e.CreateOrganization(ctx, admin, org); err != nil {
			t.Fatal(err)
		}
	}
	eve, err := e.CreateUser(ctx, admin, "evil", "eve", "eve-password")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateUser(ctx, admin, "acme", "bob", "bob-password"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateUser(ctx, admin, "evil", "ed", "ed-password"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateDatabase(ctx, eve, engine.NewDatabase{Org: "evil", Name: "probe"}); err != nil {
		t.Fatal(err)
	}

	answer := func(target string, role sluice.Role) sluice.Shown {
		err := e.SetRole(ctx, eve, "evil", "probe", target, role)
		if err == nil {
			return sluice.Shown{}
		}
		return sluice.Show(err)
	}
	for _, role := range []sluice.Role{sluice.RoleNone, sluice.RoleRead} {
		bob, nobody := answer("bob", role), answer("nobody", role)
		if bob.Code != sluice.CodeNotFound || bob.Code != nobody.Code || bob.Message != `user "bob" does not exist` ||
			nobody.Message != `user "nobody" does not exist` {
			t.Fatalf("role %s: bob of acme answers %+v, a name nobody has %+v: want the same NotFound", role, bob, nobody)
		}
	}
	if got := answer(engine.AdminUser, sluice.RoleRead); got.Code != sluice.CodeNotFound {
		t.Fatalf("granting the super user of another organization answers %+v, want NotFound", got)
	}
	if err := e.SetRole(ctx, eve, "evil", "probe", "ed", sluice.RoleRead); err != nil {
		t.Fatalf("granting ed of her own organization: %v", err)
	}
	grants, err := e.Roles(ctx, eve, "evil", "probe")
	if err != nil {
		t.Fatal(err)
	}
	if len(grants) != 2 || grants[0].User != "ed" || grants[1].User != "eve" {
		t.Fatalf("grants on evil/probe: %+v, want ed and eve only", grants)
	}

	// The super user shares the database with bob; eve sees the grant,
	// may not change it, and may revoke it.
	if err := e.SetRole(ctx, admin, "evil", "probe", "bob", sluice.RoleRead); err != nil {
		t.Fatalf("the super user granting bob: %v", err)
	}
	if got := answer("bob", sluice.RoleAdmin); got.Code != sluice.CodeForbidden {
		t.Fatalf("eve raising bob's granted role answers %+v, want Forbidden", got)
	}
	if got := answer("bob", sluice.RoleNone); got.Code != "" {
		t.Fatalf("eve revoking bob's role answers %+v, want success", got)
	}
	if got := answer("bob", sluice.RoleNone); got.Code != sluice.CodeNotFound {
		t.Fatalf("eve revoking bob's role again answers %+v, want NotFound as for any other user of acme", got)
	}
}

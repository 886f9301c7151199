package engine_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newEngine returns an engine on a fresh database, bootstrapped, its store
// and the super user.
func newEngine(t testing.TB) (*engine.Engine, *postgres.DB, *sluice.User) {
	t.Helper()
	return newEngineOn(t, pgtest.NewDatabase(t))
}

// newEngineOn is newEngine on the database at dbURL.
func newEngineOn(t testing.TB, dbURL string, opts ...auth.Option) (*engine.Engine, *postgres.DB, *sluice.User) {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := postgres.Open(ctx, dbURL, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	if _, err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e := engine.New(store, auth.New(store, 4, nil, opts...), logger, engine.Hooks{})
	if _, err := e.Bootstrap(ctx, "admin-password"); err != nil {
		t.Fatal(err)
	}
	c, err := e.Auth().Password(ctx, engine.AdminUser, "admin-password")
	if err != nil {
		t.Fatal(err)
	}
	return e, store, c.User
}

// grantOf authenticates name with password and returns the grant a
// stream it opens on org/db with role holds, as the transports build it.
func grantOf(t *testing.T, e *engine.Engine, name, password, org, db string, role sluice.Role) *sluice.Grant {
	t.Helper()
	ctx := context.Background()
	c, err := e.Auth().Password(ctx, name, password)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := e.Database(ctx, c.User, org, db, role)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Grant(auth.WithCredential(ctx, c), c.User, d, role)
}

// TestCheckGrant: a stream's grant holds while its credential
// authenticates, its database is the same incarnation and its user keeps
// the role it was opened with; every change that breaks one of these gives
// the error a request would get. This decides which streams an access
// change ends, on every replica.
func TestCheckGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, store, admin := newEngine(t)
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: "db", Schema: "type Note { text: String }"}); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateOrganization(ctx, admin, "other"); err != nil {
		t.Fatal(err)
	}
	users := map[string]string{"rita": engine.AdminOrg, "otto": "other", "bea": engine.AdminOrg, "dan": engine.AdminOrg, "gus": engine.AdminOrg}
	for name, org := range users {
		if _, err := e.CreateUser(ctx, admin, org, name, name+"-password"); err != nil {
			t.Fatal(err)
		}
		if err := e.SetRole(ctx, admin, engine.AdminOrg, "db", name, sluice.RoleWrite); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, g *sluice.Grant, want sluice.Code) {
		t.Helper()
		err := engine.CheckGrant(ctx, store, g)
		if want == "" && err != nil || want != "" && sluice.ErrorCode(err) != want {
			t.Errorf("%s: %v, want %q", what, err, want)
		}
	}
	rita := grantOf(t, e, "rita", "rita-password", engine.AdminOrg, "db", sluice.RoleWrite)
	check("a grant unchanged", rita, "")

	// The role is narrowed below the grant's: Forbidden; to one it still
	// covers: it holds.
	ritaRead := grantOf(t, e, "rita", "rita-password", engine.AdminOrg, "db", sluice.RoleRead)
	if err := e.SetRole(ctx, admin, engine.AdminOrg, "db", "rita", sluice.RoleRead); err != nil {
		t.Fatal(err)
	}
	check("a write grant after the role went down to read", rita, sluice.CodeForbidden)
	check("a read grant after the role went down to read", ritaRead, "")

	// The role is revoked: Forbidden in the user's own organization, and
	// NotFound in another one (a database of an organization the user
	// does not belong to answers as one that does not exist).
	otto := grantOf(t, e, "otto", "otto-password", engine.AdminOrg, "db", sluice.RoleWrite)
	for _, name := range []string{"rita", "otto"} {
		if err := e.SetRole(ctx, admin, engine.AdminOrg, "db", name, sluice.RoleNone); err != nil {
			t.Fatal(err)
		}
	}
	check("a revoked role", ritaRead, sluice.CodeForbidden)
	check("a revoked role, another organization", otto, sluice.CodeNotFound)

	// The password changes: a grant of the old one is Unauthenticated.
	bea := grantOf(t, e, "bea", "bea-password", engine.AdminOrg, "db", sluice.RoleRead)
	if err := e.ChangePassword(ctx, admin, "bea", "bea-new-password"); err != nil {
		t.Fatal(err)
	}
	check("a changed password", bea, sluice.CodeUnauthenticated)
	check("the new password", grantOf(t, e, "bea", "bea-new-password", engine.AdminOrg, "db", sluice.RoleRead), "")

	// A token is revoked: Unauthenticated; the user's password grant holds.
	c, err := e.Auth().Password(ctx, "dan", "dan-password")
	if err != nil {
		t.Fatal(err)
	}
	tok, secret, err := e.CreateToken(ctx, c.User, "t")
	if err != nil {
		t.Fatal(err)
	}
	req := func() *sluice.Grant {
		tc, err := e.Auth().Authenticate(bearerRequest(secret))
		if err != nil {
			t.Fatal(err)
		}
		d, _, err := e.Database(ctx, tc.User, engine.AdminOrg, "db", sluice.RoleRead)
		if err != nil {
			t.Fatal(err)
		}
		return engine.Grant(auth.WithCredential(ctx, tc), tc.User, d, sluice.RoleRead)
	}
	dan := req()
	if dan.TokenID != tok.ID {
		t.Fatalf("the token grant holds token %d, want %d", dan.TokenID, tok.ID)
	}
	check("a live token", dan, "")
	if err := e.RevokeToken(ctx, c.User, tok.ID); err != nil {
		t.Fatal(err)
	}
	check("a revoked token", dan, sluice.CodeUnauthenticated)
	check("the password of the token's user", grantOf(t, e, "dan", "dan-password", engine.AdminOrg, "db", sluice.RoleRead), "")

	// The user is deleted: Unauthenticated.
	gus := grantOf(t, e, "gus", "gus-password", engine.AdminOrg, "db", sluice.RoleRead)
	if err := e.DeleteUser(ctx, admin, "gus"); err != nil {
		t.Fatal(err)
	}
	check("a deleted user", gus, sluice.CodeUnauthenticated)

	// The super user holds its grant with no role; on _system too, where
	// no one else may.
	adminGrant := grantOf(t, e, engine.AdminUser, "admin-password", engine.AdminOrg, "db", sluice.RoleAdmin)
	check("the super user", adminGrant, "")
	sys := grantOf(t, e, engine.AdminUser, "admin-password", sluice.SystemOrg, sluice.SystemDB, sluice.RoleRead)
	check("the super user on _system", sys, "")
	sysOther := *sys
	c2, err := e.Auth().Password(ctx, "dan", "dan-password")
	if err != nil {
		t.Fatal(err)
	}
	sysOther.Credential = *c2
	check("another user on _system", &sysOther, sluice.CodeForbidden)

	// The database is deleted and created again: another incarnation,
	// NotFound for a grant of the old one.
	if err := e.DeleteDatabase(ctx, admin, engine.AdminOrg, "db"); err != nil {
		t.Fatal(err)
	}
	check("a deleted database", adminGrant, sluice.CodeNotFound)
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: "db"}); err != nil {
		t.Fatal(err)
	}
	check("a database deleted and created again", adminGrant, sluice.CodeNotFound)
}

// TestJWTGrantEndsWithAPasswordChange: a password change ends the grants
// of the user's JWTs, as it ends those of the password (docs/security.md:
// every credential that is not an API token), whether the change is
// judged from the access log (AccessChange.Affects) or against Postgres
// (CheckGrant, which the change feed uses for a grant older than the
// changes it has applied); a stream ticket a JWT made before the change
// opens nothing after it, and the grant of one redeemed before it ends
// too. A JWT presented after the change holds. Before, a JWT's credential
// carried no password hash, and CheckGrant let its grant through.
func TestJWTGrantEndsWithAPasswordChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secret := []byte("a-secret-of-at-least-32-bytes-to-try-jwts")
	j, err := auth.NewJWT(secret, nil, auth.JWTConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, store, admin := newEngineOn(t, pgtest.NewDatabase(t), auth.WithJWT(j))
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: "db", Schema: "type Note { text: String }"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateUser(ctx, admin, engine.AdminOrg, "rita", "rita-password"); err != nil {
		t.Fatal(err)
	}
	if err := e.SetRole(ctx, admin, engine.AdminOrg, "db", "rita", sluice.RoleRead); err != nil {
		t.Fatal(err)
	}
	grantOf := func(c *sluice.Credential) *sluice.Grant {
		t.Helper()
		d, _, err := e.Database(ctx, c.User, engine.AdminOrg, "db", sluice.RoleRead)
		if err != nil {
			t.Fatal(err)
		}
		return engine.Grant(auth.WithCredential(ctx, c), c.User, d, sluice.RoleRead)
	}
	jwtGrant := func() (*sluice.Grant, *sluice.Credential) {
		t.Helper()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "rita", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		c, err := e.Auth().Authenticate(bearerRequest(tok))
		if err != nil {
			t.Fatal(err)
		}
		return grantOf(c), c
	}
	g, c := jwtGrant()
	redeemed, err := e.Auth().CreateTicket(ctx, c, "admin/db")
	if err != nil {
		t.Fatal(err)
	}
	unused, err := e.Auth().CreateTicket(ctx, c, "admin/db")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := e.Auth().RedeemTicket(ctx, "192.0.2.1:1234", redeemed.Secret, "admin/db")
	if err != nil {
		t.Fatal(err)
	}
	ticketGrant := grantOf(tc)
	for what, g := range map[string]*sluice.Grant{"the JWT's grant": g, "the grant of its ticket": ticketGrant} {
		if err := engine.CheckGrant(ctx, store, g); err != nil {
			t.Fatalf("%s before the password change: %v", what, err)
		}
	}

	if err := e.ChangePassword(ctx, admin, "rita", "rita-new-password"); err != nil {
		t.Fatal(err)
	}
	changes, err := store.AccessChanges(ctx, g.AccessVersion, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Kind != sluice.AccessPassword || changes[0].Affects(g) == nil {
		t.Fatalf("access changes after the JWT's grant: %+v, want the password change, ending it", changes)
	}
	for what, g := range map[string]*sluice.Grant{"the JWT's grant": g, "the grant of its ticket": ticketGrant} {
		err := engine.CheckGrant(ctx, store, g)
		if sluice.ErrorCode(err) != sluice.CodeUnauthenticated || !strings.Contains(sluice.ErrorMessage(err), "password of rita changed") {
			t.Errorf("%s after the password change: %v, want Unauthenticated, the password changed", what, err)
		}
	}
	_, err = e.Auth().RedeemTicket(ctx, "192.0.2.1:1234", unused.Secret, "admin/db")
	if sluice.ErrorCode(err) != sluice.CodeUnauthenticated || !strings.Contains(sluice.ErrorMessage(err), "password of rita changed") {
		t.Errorf("a ticket the JWT made before the password change, redeemed after: %v, want Unauthenticated, the password changed", err)
	}
	if g, _ := jwtGrant(); engine.CheckGrant(ctx, store, g) != nil {
		t.Errorf("a JWT presented after the password change: %v", engine.CheckGrant(ctx, store, g))
	}
}

// TestDatabaseAccess: engine.Database answers a user without access to a
// database of another organization as if it did not exist, one of its own
// organization with 403, and a role too low with 403 naming both roles.
func TestDatabaseAccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	if err := e.CreateOrganization(ctx, admin, "other"); err != nil {
		t.Fatal(err)
	}
	for _, db := range []struct{ org, name string }{{engine.AdminOrg, "own"}, {"other", "theirs"}} {
		if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: db.org, Name: db.name}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := e.CreateUser(ctx, admin, engine.AdminOrg, "rita", "rita-password")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		org, name string
		role      sluice.Role
		want      sluice.Code
	}{
		{"other", "theirs", sluice.RoleRead, sluice.CodeNotFound},
		{"other", "nothing", sluice.RoleRead, sluice.CodeNotFound},
		{engine.AdminOrg, "own", sluice.RoleRead, sluice.CodeForbidden},
		{sluice.SystemOrg, sluice.SystemDB, sluice.RoleRead, sluice.CodeForbidden},
	} {
		if _, _, err := e.Database(ctx, u, c.org, c.name, c.role); sluice.ErrorCode(err) != c.want {
			t.Errorf("%s/%s: %v, want %s", c.org, c.name, err, c.want)
		}
	}
	if err := e.SetRole(ctx, admin, engine.AdminOrg, "own", "rita", sluice.RoleRead); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Database(ctx, u, engine.AdminOrg, "own", sluice.RoleRead); err != nil {
		t.Errorf("read with the read role: %v", err)
	}
	_, _, err = e.Database(ctx, u, engine.AdminOrg, "own", sluice.RoleWrite)
	if sluice.ErrorCode(err) != sluice.CodeForbidden || sluice.ErrorMessage(err) != "user rita needs the write role on admin/own (has read)" {
		t.Errorf("write with the read role: %v", err)
	}
}

// bearerRequest returns a request with the bearer token secret.
func bearerRequest(secret string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api/info", nil)
	r.Header.Set("Authorization", "Bearer "+secret)
	return r
}

// TestChangePasswordOfAUserMadeAgain: a user changing its own password
// changes its own, never that of a user made again under its name after
// it was deleted (its request had authenticated the deleted one).
func TestChangePasswordOfAUserMadeAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	old, err := e.CreateUser(ctx, admin, engine.AdminOrg, "remade", "old-password")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteUser(ctx, admin, "remade"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateUser(ctx, admin, engine.AdminOrg, "remade", "new-user-password"); err != nil {
		t.Fatal(err)
	}
	if err := e.ChangePassword(ctx, old, "remade", "changed-password"); sluice.ErrorCode(err) != sluice.CodeNotFound {
		t.Fatalf("the deleted user changing its password: %v, want NotFound", err)
	}
	if _, err := e.Auth().Password(ctx, "remade", "new-user-password"); err != nil {
		t.Fatalf("the user made again lost its password: %v", err)
	}
}

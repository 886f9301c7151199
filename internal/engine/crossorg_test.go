package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
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

// TestHiddenDatabaseCostsAMiss: a database of another organization that
// the caller has no role on answers as one that does not exist, and costs
// the same: the same Postgres statements, however often it is asked, so
// the response time does not tell that it exists. (Before, an existing
// one was answered from the cache and a missing one queried every time.)
// A database the caller has a role on is still answered from the cache.
func TestHiddenDatabaseCostsAMiss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log, admin := newEngineLogged(t)
	for _, org := range []string{"evil", "acme"} {
		if err := e.CreateOrganization(ctx, admin, org); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.CreateUser(ctx, admin, "evil", "eve", "eve-password"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"secret", "shared"} {
		if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: "acme", Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.SetRole(ctx, admin, "acme", "shared", "eve", sluice.RoleRead); err != nil {
		t.Fatal(err)
	}
	c, err := e.Auth().Password(ctx, "eve", "eve-password")
	if err != nil {
		t.Fatal(err)
	}
	ctx = auth.WithCredential(ctx, c)
	eve := c.User

	// lookup asks for acme/name as eve and returns the answer and the
	// statements it cost, name written as NAME.
	lookup := func(name string) (sluice.Shown, []string) {
		log.take()
		_, _, err := e.Database(ctx, eve, "acme", name, sluice.RoleRead)
		stmts := log.take()
		for i, s := range stmts {
			stmts[i] = strings.ReplaceAll(s, name, "NAME")
		}
		if err == nil {
			return sluice.Shown{}, stmts
		}
		return sluice.Show(err), stmts
	}
	for i := range 3 {
		secret, secretStmts := lookup("secret")
		missing, missingStmts := lookup("nothere")
		if secret.Code != sluice.CodeNotFound || secret.Code != missing.Code ||
			strings.ReplaceAll(secret.Message, "secret", "nothere") != missing.Message {
			t.Fatalf("lookup %d: acme/secret answers %+v, acme/nothere %+v: want the same NotFound", i, secret, missing)
		}
		if len(missingStmts) == 0 || strings.Join(secretStmts, "\n") != strings.Join(missingStmts, "\n") {
			t.Fatalf("lookup %d: acme/secret ran %q, acme/nothere %q: want the same statements", i, secretStmts, missingStmts)
		}
	}
	for i := range 2 {
		shown, stmts := lookup("shared")
		if shown.Code != "" {
			t.Fatalf("acme/shared, where eve reads: %+v", shown)
		}
		if i > 0 && len(stmts) != 0 {
			t.Fatalf("acme/shared looked up again ran %q, want the cache to answer", stmts)
		}
	}
}

// TestDatabaseListingReadsOnlyTheCallersDatabases: listing the databases
// a user can read (GET /api/db, the landing and GraphiQL pages) reads
// only those the user holds a role on. Eve's organization holds four
// databases whose labels were stored at 8 MiB each (before labels were
// bounded, or written in SQL): Rita, who holds a role on one database of
// her own organization, lists that one alone, and Postgres sends her
// listing a few KiB, not the 32 MiB of labels it read and sent when the
// listing read every database and filtered by role. A label or comment
// past its bound is refused.
func TestDatabaseListingReadsOnlyTheCallersDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log, admin := newEngineLogged(t)
	if err := e.CreateOrganization(ctx, admin, "evil"); err != nil {
		t.Fatal(err)
	}
	eve, err := e.CreateUser(ctx, admin, "evil", "eve", "eve-password")
	if err != nil {
		t.Fatal(err)
	}
	rita, err := e.CreateUser(ctx, admin, engine.AdminOrg, "rita", "rita-password")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db", "unshared"} {
		if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: engine.AdminOrg, Name: name, Label: name}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.SetRole(ctx, admin, engine.AdminOrg, "db", "rita", sluice.RoleRead); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := e.CreateDatabase(ctx, eve, engine.NewDatabase{Org: "evil", Name: fmt.Sprintf("big%d", i)}); err != nil {
			t.Fatal(err)
		}
	}

	for _, nd := range []engine.NewDatabase{
		{Org: "evil", Name: "long-label", Label: strings.Repeat("L", engine.MaxDatabaseLabelBytes+1)},
		{Org: "evil", Name: "long-comment", Comment: strings.Repeat("C", engine.MaxDatabaseCommentBytes+1)},
	} {
		_, err := e.CreateDatabase(ctx, eve, nd)
		field := "label"
		if nd.Comment != "" {
			field = "comment"
		}
		if sluice.ErrorCode(err) != sluice.CodeInvalid || !strings.Contains(sluice.ErrorMessage(err), "the "+field+" is") {
			t.Fatalf("creating a database with a %s past its bound: %v, want Invalid naming the %s", field, err, field)
		}
	}
	if _, err := e.CreateDatabase(ctx, eve, engine.NewDatabase{Org: "evil", Name: "at-the-bounds",
		Label: strings.Repeat("L", engine.MaxDatabaseLabelBytes), Comment: strings.Repeat("C", engine.MaxDatabaseCommentBytes)}); err != nil {
		t.Fatalf("a label and comment at their bounds: %v", err)
	}

	pg, err := pgx.Connect(ctx, log.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	if _, err := pg.Exec(ctx, `UPDATE sluice.databases SET label = repeat('L', 8 << 20) WHERE org = 'evil' AND name LIKE 'big%'`); err != nil {
		t.Fatal(err)
	}

	before := log.received.Load()
	ds, roles, err := e.DatabasesWithRoles(ctx, rita)
	received := log.received.Load() - before
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Path() != "admin/db" || roles[0] != sluice.RoleRead {
		t.Fatalf("rita's listing: %v %v, want admin/db with read", ds, roles)
	}
	if received > 64<<10 {
		t.Fatalf("rita's listing received %d bytes from Postgres: it read other organizations' databases", received)
	}

	ds, roles, err = e.DatabasesWithRoles(ctx, eve)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i, d := range ds {
		paths = append(paths, d.Path()+" "+roles[i].String())
	}
	if got, want := strings.Join(paths, ", "), "evil/at-the-bounds admin, evil/big0 admin, evil/big1 admin, evil/big2 admin, evil/big3 admin"; got != want {
		t.Fatalf("eve's listing: %s, want %s", got, want)
	}
	ds, roles, err = e.DatabasesWithRoles(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 7 || ds[0].Path() != "admin/db" || roles[0] != sluice.RoleAdmin || len(ds[3].Label) != 8<<20 {
		t.Fatalf("the super user's listing: %d databases, want the 7 of admin and evil (_system left out), each admin", len(ds))
	}
}

// TestDatabasesPerUserCap: a user other than the super user makes at most
// max_databases_per_user databases (each a Postgres schema with its
// tables), concurrent creations included; deleting one makes room, and
// the super user is not counted.
func TestDatabasesPerUserCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, admin := newEngine(t)
	e.LimitDatabases(2)
	if err := e.CreateOrganization(ctx, admin, "acme"); err != nil {
		t.Fatal(err)
	}
	rita, err := e.CreateUser(ctx, admin, "acme", "rita", "rita-password")
	if err != nil {
		t.Fatal(err)
	}
	create := func(u *sluice.User, name string) error {
		_, err := e.CreateDatabase(ctx, u, engine.NewDatabase{Org: "acme", Name: name, Schema: "type Note { text: String }"})
		return err
	}

	// Six at once: two are made, the others refused by the cap.
	errs := make(chan error, 6)
	for i := range 6 {
		go func() { errs <- create(rita, fmt.Sprintf("db%d", i)) }()
	}
	made := 0
	for range 6 {
		err := <-errs
		switch {
		case err == nil:
			made++
		case sluice.ErrorCode(err) != sluice.CodeConflict || !strings.Contains(err.Error(), "max_databases_per_user"):
			t.Fatalf("a creation past the cap: %v, want a Conflict naming max_databases_per_user", err)
		}
	}
	if made != 2 {
		t.Fatalf("%d databases made at once, want the cap's 2", made)
	}
	dbs, _, err := e.DatabasesWithRoles(ctx, rita)
	if err != nil || len(dbs) != 2 {
		t.Fatalf("rita's databases: %+v, %v", dbs, err)
	}
	if err := e.DeleteDatabase(ctx, rita, "acme", dbs[0].Name); err != nil {
		t.Fatal(err)
	}
	if err := create(rita, "again"); err != nil {
		t.Fatalf("a creation after a deletion made room: %v", err)
	}
	for i := range 3 {
		if err := create(admin, fmt.Sprintf("super%d", i)); err != nil {
			t.Fatalf("the super user's database %d: %v", i, err)
		}
	}
}

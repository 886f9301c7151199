package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice"
)

// TestAccessChangesForPassesWhatMayAffectTheGrant: of a range of the
// access log, AccessChangesFor passes every change that affects a grant
// (as sluice.AccessChange.Affects judges it) and, of the others, only
// those naming the grant's user, token, database or organization, oldest
// first, and stops when asked; a range with a change pruned from it, at
// its start or in its middle, is reported not whole without passing any.
func TestAccessChangesForPassesWhatMayAffectTheGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	from, err := db.AccessVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	grant := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 7, Name: "rita", Org: "acme"}, TokenID: 70},
		Database: &sluice.Database{ID: 9, Org: "acme", Name: "people"}, Role: sluice.RoleAdmin}
	// Each change with whether it is to be passed.
	all := []struct {
		c    sluice.AccessChange
		pass bool
	}{
		{sluice.AccessChange{Kind: sluice.AccessToken, UserID: 8, TokenID: 80}, false},
		{sluice.AccessChange{Kind: sluice.AccessToken, UserID: 7, TokenID: 71}, false}, // rita's other token
		{sluice.AccessChange{Kind: sluice.AccessToken, UserID: 7, TokenID: 70}, true},
		{sluice.AccessChange{Kind: sluice.AccessPassword, UserID: 8}, false},
		{sluice.AccessChange{Kind: sluice.AccessPassword, UserID: 7}, true}, // passed, though a token grant outlives it
		{sluice.AccessChange{Kind: sluice.AccessUser, UserID: 8}, false},
		{sluice.AccessChange{Kind: sluice.AccessUser, UserID: 7}, true},
		{sluice.AccessChange{Kind: sluice.AccessRole, UserID: 8, DatabaseID: 9, Role: sluice.RoleNone}, false},
		{sluice.AccessChange{Kind: sluice.AccessRole, UserID: 7, DatabaseID: 9, Role: sluice.RoleRead}, true},
		{sluice.AccessChange{Kind: sluice.AccessRole, UserID: 7, DatabaseID: 10, Role: sluice.RoleNone}, true}, // passed, judged not to affect it
		{sluice.AccessChange{Kind: sluice.AccessDatabase, DatabaseID: 10, Org: "acme"}, false},
		{sluice.AccessChange{Kind: sluice.AccessDatabase, DatabaseID: 9, Org: "acme"}, true},
		{sluice.AccessChange{Kind: sluice.AccessOrganization, Org: "other"}, false},
		{sluice.AccessChange{Kind: sluice.AccessOrganization, Org: "acme"}, true},
		{sluice.AccessChange{Kind: "grant-expired", UserID: 8}, true}, // a kind of a newer release
	}
	var want []sluice.AccessChange
	for i, a := range all {
		c := a.c
		c.Version = from + int64(i) + 1
		if err := db.ExecDBForTest(ctx, `INSERT INTO sluice.access_changes (version, kind, user_id, token_id, db_id, org, role)
			VALUES ($1, $2, NULLIF($3, 0), NULLIF($4, 0), NULLIF($5, 0), NULLIF($6, ''), $7)`,
			c.Version, string(c.Kind), c.UserID, c.TokenID, c.DatabaseID, c.Org, int16(c.Role)); err != nil {
			t.Fatal(err)
		}
		if c.Affects(grant) != nil && !a.pass {
			t.Fatalf("the test's change %+v affects the grant but is not to be passed", c)
		}
		if a.pass {
			want = append(want, c)
		}
	}
	upTo := from + int64(len(all))
	read := func(after, upTo int64, stopAfter int) (bool, []sluice.AccessChange) {
		t.Helper()
		var got []sluice.AccessChange
		whole, err := db.AccessChangesFor(ctx, after, upTo, grant, func(c sluice.AccessChange) bool {
			got = append(got, c)
			return len(got) < stopAfter
		})
		if err != nil {
			t.Fatal(err)
		}
		return whole, got
	}
	if whole, got := read(from, upTo, len(all)); !whole || !slices.Equal(got, want) {
		t.Errorf("passed %v (whole %v), want %v", got, whole, want)
	}
	if whole, got := read(from, upTo, 1); !whole || len(got) != 1 || got[0] != want[0] {
		t.Errorf("asked to stop at the first: passed %v (whole %v)", got, whole)
	}
	if whole, got := read(from, from+2, len(all)); !whole || len(got) != 0 {
		t.Errorf("a range of unrelated changes: passed %v (whole %v), want none", got, whole)
	}
	// Pruned: the middle of the range, then its start.
	for _, v := range []int64{from + 5, from + 1} {
		if err := db.ExecDBForTest(ctx, "DELETE FROM sluice.access_changes WHERE version = $1", v); err != nil {
			t.Fatal(err)
		}
		if whole, got := read(from, upTo, len(all)); whole || len(got) != 0 {
			t.Errorf("change %d pruned: passed %v (whole %v), want none and not whole", v, got, whole)
		}
	}
}

package gqltransport_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// ritaUpgrades starts a daemon with max_streams_per_user 2 where rita may
// read database wsplace, and returns a function that opens a socket with rita's credentials on the upgrade, sending
// nothing: nil when it is refused, which must be a 429 with Retry-After.
func ritaUpgrades(t *testing.T) func() *wsConn {
	t.Helper()
	d := dt.Start(t, func(c *config.Config) { c.MaxStreamsPerUser = 2 })
	d.CreateDatabase(t, "wsplace", "type Dog { name: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/wsplace", `{"user":"rita","role":"read"}`)
	path := "/api/graphql/admin/wsplace"
	rita := http.Header{"Authorization": {basicAuth("rita", "rita-password")}}
	return func() *wsConn {
		t.Helper()
		c, resp, err := dialWS(t, d, path, rita)
		if err == nil {
			return c
		}
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("an upgrade of rita's: %v %v, want 101, or 429 with Retry-After", err, resp)
		}
		return nil
	}
}

// upgradeOnceFreed retries upgrade until it is accepted: a closed
// socket's place is given back as its goroutines end, which the client
// does not see.
func upgradeOnceFreed(t *testing.T, upgrade func() *wsConn) *wsConn {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c := upgrade(); c != nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal("no upgrade accepted after a place was given back")
		}
	}
}

// TestAuthenticatedUpgradesCountTowardStreams: an upgrade whose own
// credentials are valid takes its place among its user's streams when it
// is accepted, not at connection_ack: past max_streams_per_user it is
// answered 429 with Retry-After (found by review: with
// max_streams_per_user 2, rita's 300 upgrades with a Basic header were
// all accepted in 89 ms, each held 10 s without connection_init, counted
// nowhere).
func TestAuthenticatedUpgradesCountTowardStreams(t *testing.T) {
	t.Parallel()
	upgrade := ritaUpgrades(t)
	if a, b := upgrade(), upgrade(); a == nil || b == nil {
		t.Fatal("rita's first two upgrades were refused")
	}
	if upgrade() != nil {
		t.Fatal("a third upgrade of rita's was accepted while two sockets without connection_init held her places")
	}
}

// TestAuthenticatedUpgradePlaceComesBack: the place an upgrade took is
// given back when its socket closes, and only then.
func TestAuthenticatedUpgradePlaceComesBack(t *testing.T) {
	t.Parallel()
	upgrade := ritaUpgrades(t)
	a, b := upgrade(), upgrade()
	if a == nil || b == nil {
		t.Fatal("rita's first two upgrades were refused")
	}
	_ = a.c.CloseNow()
	upgradeOnceFreed(t, upgrade)
	if upgrade() != nil {
		t.Fatal("a third upgrade of rita's was accepted once the closed socket's place was taken again")
	}
}

// TestAuthenticatedUpgradeCountsOnceAfterInit: a socket whose upgrade
// took a place keeps it through connection_init with the same credentials,
// counted once: it is acknowledged with rita's other place held, and a
// subscription on it is then her third stream, refused.
func TestAuthenticatedUpgradeCountsOnceAfterInit(t *testing.T) {
	t.Parallel()
	upgrade := ritaUpgrades(t)
	a, b := upgrade(), upgrade()
	if a == nil || b == nil {
		t.Fatal("rita's first two upgrades were refused")
	}
	a.send(`{"type":"connection_init"}`)
	a.expect(`{"type":"connection_ack"}`)
	a.send(`{"id":"s","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`)
	// A query after it: an accepted subscription sends nothing, so the
	// query's result comes first then.
	a.send(`{"id":"q","type":"subscribe","payload":{"query":"{ __typename }"}}`)
	if got := a.read(); !strings.HasPrefix(got, `{"id":"s","type":"error","payload":[{"message":"user rita holds its maximum of 2 open streams`) ||
		!strings.Contains(got, `"code":"TOO_MANY_REQUESTS"`) {
		t.Fatalf("a third stream of rita's: %s, want an error naming the cap", got)
	}
}

// TestAuthenticatedUpgradeMovesToInitUser: connection_init's credentials
// win over the upgrade's: a socket upgraded as rita and initialised as
// the admin counts as the admin's, and gives rita's place back.
func TestAuthenticatedUpgradeMovesToInitUser(t *testing.T) {
	t.Parallel()
	upgrade := ritaUpgrades(t)
	a, b := upgrade(), upgrade()
	if a == nil || b == nil {
		t.Fatal("rita's first two upgrades were refused")
	}
	b.send(`{"type":"connection_init","payload":{"Authorization":"` + basicAuth("admin", dt.AdminPassword) + `"}}`)
	b.expect(`{"type":"connection_ack"}`)
	b.barrier("1")
	upgradeOnceFreed(t, upgrade)
	if upgrade() != nil {
		t.Fatal("a third upgrade of rita's was accepted")
	}
}

// TestAuthenticatedUpgradeWithoutAccess: an upgrade with valid
// credentials of a user who may not read the database takes no place: it
// is answered as a request to the database would be, not accepted to be
// refused at connection_init.
func TestAuthenticatedUpgradeWithoutAccess(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "wsnone", "type Dog { name: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"nora","organization":"admin","password":"nora-password"}`)
	path := "/api/graphql/admin/wsnone"
	want := d.Do(t, dt.Basic("nora", "nora-password"), "POST", path, `{"query":"{ __typename }"}`, "Content-Type", "application/json").Status
	if want < 400 {
		t.Fatalf("nora's request: %d, want a refusal", want)
	}
	_, resp, err := dialWS(t, d, path, http.Header{"Authorization": {basicAuth("nora", "nora-password")}})
	if err == nil || resp == nil || resp.StatusCode != want {
		t.Fatalf("nora's upgrade: %v %v, want %d as her request", err, resp, want)
	}
}

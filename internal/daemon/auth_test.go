package daemon_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/organizations", `{"name":"acme"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wade","organization":"admin","password":"wade-password"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"otto","organization":"acme","password":"otto-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/people", `{"user":"rita","role":"read"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/people", `{"user":"wade","role":"write"}`)

	// A token for rita, then one revoked.
	var tok struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Basic("rita", "rita-password"), "POST", "/api/tokens", `{"name":"ci"}`).Body, &tok); err != nil {
		t.Fatal(err)
	}
	var revoked struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Basic("rita", "rita-password"), "POST", "/api/tokens", "").Body, &revoked); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, 200, dt.Basic("rita", "rita-password"), "DELETE", fmt.Sprintf("/api/tokens/%d", revoked.ID), nil)
	// Another user cannot revoke rita's token.
	d.MustDo(t, 404, dt.Basic("wade", "wade-password"), "DELETE", fmt.Sprintf("/api/tokens/%d", tok.ID), nil)

	read := func(a dt.Auth) dt.Response { return d.Do(t, a, "GET", "/api/document/admin/people", nil) }
	write := func(a dt.Auth) dt.Response {
		return d.Do(t, a, "POST", "/api/document/admin/people", `{"@type":"Person","name":"x"}`)
	}
	cases := []struct {
		name   string
		do     func(dt.Auth) dt.Response
		auth   dt.Auth
		status int
		msg    string
	}{
		{"no credentials", read, dt.NoAuth(), 401, "authentication required"},
		{"wrong password", read, dt.Basic("rita", "nope"), 401, "wrong user name or password"},
		{"unknown user", read, dt.Basic("ghost", "nope"), 401, "wrong user name or password"},
		{"token reads", read, dt.Bearer(tok.Token), 200, ""},
		{"bad token", read, dt.Bearer("sluice_nonsense"), 401, "invalid or revoked token"},
		{"revoked token", read, dt.Bearer(revoked.Token), 401, "invalid or revoked token"},
		{"reader reads", read, dt.Basic("rita", "rita-password"), 200, ""},
		{"reader writes", write, dt.Basic("rita", "rita-password"), 403, "needs the write role"},
		{"token of a reader writes", write, dt.Bearer(tok.Token), 403, "needs the write role"},
		{"writer writes", write, dt.Basic("wade", "wade-password"), 200, ""},
		{"other organization reads", read, dt.Basic("otto", "otto-password"), 404, "database admin/people does not exist"},
		{"other organization writes", write, dt.Basic("otto", "otto-password"), 404, "database admin/people does not exist"},
		{"admin writes", write, dt.Admin(), 200, ""},
		// What would outlive the token's revocation.
		{"token makes a token", func(a dt.Auth) dt.Response { return d.Do(t, a, "POST", "/api/tokens", `{"name":"child"}`) }, dt.Bearer(tok.Token), 403, "an API token cannot create tokens"},
		{"token sets the password", func(a dt.Auth) dt.Response {
			return d.Do(t, a, "PUT", "/api/users/rita/password", `{"password":"taken-over"}`)
		}, dt.Bearer(tok.Token), 403, "an API token cannot change its user's password"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.do(c.auth)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			if c.status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic realm=") {
				t.Fatalf("401 without WWW-Authenticate: %v", r.Header)
			}
			if c.msg != "" {
				if _, msg := errBody(t, r); !strings.Contains(msg, c.msg) {
					t.Fatalf("message %q, want %q", msg, c.msg)
				}
			}
		})
	}

	// Only the super user manages users and reads _system; others get 403.
	d.MustDo(t, 403, dt.Basic("wade", "wade-password"), "POST", "/api/users", `{"name":"eve","organization":"admin","password":"eve-password"}`)
	d.MustDo(t, 403, dt.Basic("wade", "wade-password"), "GET", "/api/document/_system/_system", nil)
	// A user creates databases in its own organization only, and becomes
	// their admin.
	d.MustDo(t, 403, dt.Basic("otto", "otto-password"), "POST", "/api/db/admin/ottos", "")
	d.MustDo(t, 201, dt.Basic("otto", "otto-password"), "POST", "/api/db/acme/ottos", `{"schema":"type T { a: Int }"}`)
	d.MustDo(t, 200, dt.Basic("otto", "otto-password"), "PUT", "/api/schema/acme/ottos", "type T { a: Int b: String }")
	// The database list shows only what a user can read.
	var list []struct{ Path string }
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Basic("otto", "otto-password"), "GET", "/api/db", nil).Body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Path != "acme/ottos" {
		t.Fatalf("otto's databases: %+v", list)
	}
	// Passwords never appear in any answer.
	users := d.MustDo(t, 200, dt.Admin(), "GET", "/api/users", nil)
	sys := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/_system/_system?type=User", nil)
	for _, b := range [][]byte{users.Body, sys.Body} {
		if strings.Contains(string(b), "password") || strings.Contains(string(b), "$2a$") {
			t.Fatalf("secret leaked: %s", b)
		}
	}
}

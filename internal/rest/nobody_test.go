package rest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestRoutesThatTakeNoBodyRefuseOne: a DELETE of a database, an
// organization, a user or a token with a body other than none,
// whitespace or {} is a 400 naming what it carries, and deletes nothing;
// with no body or {} it deletes (found by review: they took any body and
// ignored it, so a client that sent options believed they applied, as the
// webhooks' pause and deletion did before).
func TestRoutesThatTakeNoBodyRefuseOne(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", "type Person { name: String }")
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/organizations", `{"name":"acme"}`)
	d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	res := d.MustDo(t, http.StatusCreated, dt.Admin(), http.MethodPost, "/api/tokens", `{"name":"ci"}`)
	var tok struct {
		ID json.Number `json:"id"`
	}
	if err := json.Unmarshal(res.Body, &tok); err != nil || tok.ID == "" {
		t.Fatalf("create token: %s (%v)", res.Body, err)
	}
	for _, c := range []struct {
		path, body, want string
	}{
		{"/api/db/admin/people", `{"force":true}`, `deleting a database takes no options: send no body, or {} (unknown field "force")`},
		{"/api/organizations/acme", `{"cascade":false}`, `deleting an organization takes no options: send no body, or {} (unknown field "cascade")`},
		{"/api/users/rita", `[]`, "deleting a user takes no options"},
		{"/api/tokens/" + tok.ID.String(), `{} {}`, "unexpected data after the JSON body"},
	} {
		res := d.Do(t, dt.Admin(), http.MethodDelete, c.path, c.body)
		var e struct {
			Message string `json:"api:message"`
		}
		_ = json.Unmarshal(res.Body, &e)
		if res.Status != http.StatusBadRequest || !strings.Contains(e.Message, c.want) {
			t.Errorf("DELETE %s %s: %d %s, want 400 naming %q", c.path, c.body, res.Status, res.Body, c.want)
		}
	}
	// Nothing was deleted; no body, or {}, are no options.
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/db/admin/people", nil)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodDelete, "/api/db/admin/people", " {} ")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodDelete, "/api/organizations/acme", nil)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodDelete, "/api/users/rita", "{}")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodDelete, "/api/tokens/"+tok.ID.String(), "\n")
}

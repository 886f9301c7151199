package rest_test

import (
	"net/http"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/rest"
)

// TestEveryRouteRefusesUnknownQueryParameters: every route answers ?x=1
// with a 400 naming x, before it does anything else (docs/rest.md:
// "Unknown query parameters are a 400, never ignored"). GET /api/info,
// /api/users, /api/organizations and /api/tokens, their POSTs, PUT
// /api/roles/… and PUT /api/users/{name}/password ignored it. A route
// that takes no parameters says so, rather than "(allowed: [])". The
// routes come from the router itself, so a new one is checked too; the
// health probes are left out on purpose (a probe that sends a parameter
// must not take the daemon out of service).
func TestEveryRouteRefusesUnknownQueryParameters(t *testing.T) {
	t.Parallel()
	routes, err := rest.RouteTable()
	if err != nil {
		t.Fatal(err)
	}
	d := dt.Start(t)
	d.CreateDatabase(t, "people", "type Person { name: String }")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/people", `{"@type":"Person","@id":"a","name":"A"}`)
	probes := map[string]bool{"/api/ok": true, "/healthz": true, "/readyz": true}
	params := strings.NewReplacer("{org}", "admin", "{db}", "people", "{class}", "Person", "{name}", "nobody", "{id}", "1")
	checked := 0
	for _, rt := range routes {
		method, pattern := rt[0], rt[1]
		switch method {
		case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			continue
		}
		if probes[pattern] {
			continue
		}
		path := params.Replace(pattern) + "?x=1"
		r := d.Do(t, dt.Admin(), method, path, nil)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `unknown query parameter \"x\"`) {
			t.Errorf("%s %s: %d %s, want 400 naming x", method, path, r.Status, r.Body)
		}
		// A query that cannot be read is refused too, never read
		// without the pair it mangles (?id=a%zz left out would list
		// every document, or delete the database).
		path = params.Replace(pattern) + "?id=a%zz"
		r = d.Do(t, dt.Admin(), method, path, nil)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `the URL's query cannot be read: invalid URL escape \"%zz\"`) {
			t.Errorf("%s %s: %d %s, want 400 naming the escape", method, path, r.Status, r.Body)
		}
		checked++
	}
	if checked < 40 {
		t.Errorf("checked %d routes of %v", checked, routes)
	}
	// A route that takes no parameters says so.
	r := d.Do(t, dt.Admin(), http.MethodGet, "/api/info?x=1", nil)
	if want := `unknown query parameter \"x\": this route takes no query parameters`; !strings.Contains(string(r.Body), want) {
		t.Errorf("GET /api/info?x=1: %s, want %s", r.Body, want)
	}
	// One that takes some lists them.
	r = d.Do(t, dt.Admin(), http.MethodGet, "/api/log/admin/people?x=1", nil)
	if want := `unknown query parameter \"x\" (allowed: [count before])`; !strings.Contains(string(r.Body), want) {
		t.Errorf("GET /api/log?x=1: %s, want %s", r.Body, want)
	}
}

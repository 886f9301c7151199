package gqltransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestLiveShareOutlivesItsStarter: a shared live query reads as the role
// of its share, never with the credential of the user whose live query
// started it: once rita's API token, with which she started it, is
// revoked, and then her role taken away, her member ends, and otto's
// goes on, its results read again after commits and after a schema
// change (the live query revised, as prepared for rita's request).
func TestLiveShareOutlivesItsStarter(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "starter", staffSDL)
	w := &writer{t: t, d: d, db: "starter"}
	w.insert(person("a", "Ann", "x", ""))
	for _, u := range []string{"rita", "otto"} {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"`+u+`","organization":"admin","password":"`+u+`-password"}`)
		d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/starter", `{"user":"`+u+`","role":"read"}`)
	}
	var tok struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Basic("rita", "rita-password"), "POST", "/api/tokens", `{"name":"live"}`).Body, &tok); err != nil {
		t.Fatal(err)
	}
	q := `subscription { Person(filter: {team: {eq: "x"}}) { name } }`
	open := func(auth dt.Auth) *stream {
		s := mustOpen(t, d, auth, http.MethodPost, "/api/graphql/admin/starter", body(q), nil, "Accept", sse)
		s.connected()
		return s
	}
	r := open(dt.Bearer(tok.Token)) // starts the share
	r.expect(1, `{"Person":[{"name":"Ann"}]}`)
	o := open(dt.Basic("otto", "otto-password")) // joins it
	o.expect(1, `{"Person":[{"name":"Ann"}]}`)

	d.MustDo(t, 200, dt.Basic("rita", "rita-password"), "DELETE", fmt.Sprintf("/api/tokens/%d", tok.ID), nil)
	if fs := r.Ended(); len(fs) == 0 || !strings.Contains(fs[0].String(), "UNAUTHENTICATED") {
		t.Fatalf("rita's member, her token revoked: %q", fs)
	}
	seq := w.insert(person("b", "Bob", "x", ""))
	o.expect(seq, `{"Person":[{"name":"Ann"},{"name":"Bob"}]}`)

	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/starter", `{"user":"rita","role":"none"}`)
	seq = w.insert(person("c", "Cy", "x", ""))
	o.expect(seq, `{"Person":[{"name":"Ann"},{"name":"Bob"},{"name":"Cy"}]}`)

	// A schema change the live query survives: revised, then read again.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/starter", staffSDL+" type Extra { n: Int }")
	w.seq++ // the schema change is a commit
	seq = w.insert(person("e", "Eve", "x", ""))
	o.expect(seq, `{"Person":[{"name":"Ann"},{"name":"Bob"},{"name":"Cy"},{"name":"Eve"}]}`)
}

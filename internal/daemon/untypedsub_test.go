package daemon_test

import (
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestUntypedSubdocumentsKeepTheirRoles: a subdocument written in SQL
// without "@type" (which the triggers take: a subdocument field's type is
// the only class it can be) is judged as its field's type everywhere a
// role is checked. A reader sees its readable fields and never its
// @private ones, in reads (current, listed, as of a position), the
// change stream, /api/changes, /api/history and a GraphQL subscription
// filtering on it; a writer's replace keeps the stored @private value it
// leaves out. Judged by "@type" alone, a reader's read showed the
// @private pins, its streams and history lost the whole subdocument (and
// the filtered subscription its event), and the writer's replace erased
// the pin.
func TestUntypedSubdocumentsKeepTheirRoles(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "subs", `type Person { name: String home: Home homes: [Home!] }
type Home @subdocument { city: String pin: String @private }`)
	for user, role := range map[string]string{"rita": "read", "wren": "write"} {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"`+user+`","organization":"admin","password":"`+user+`-password"}`)
		d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/subs", `{"user":"`+user+`","role":"`+role+`"}`)
	}
	rita, wren := dt.Basic("rita", "rita-password"), dt.Basic("wren", "wren-password")
	stream := d.MustOpenStream(t, rita, dt.StreamRequest{Path: "/api/subscribe/admin/subs/Person"})
	stream.Next() // : connected
	filtered := d.MustOpenStream(t, rita, dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/subs",
		Body:   `{"query":"subscription { Person_added(filter: {home: {city: {eq: \"x\"}}}) { _id home { city } } }"}`,
		Header: []string{"Accept", "text/event-stream"}})
	filtered.Next() // : connected

	w := newSQLWriter(t, d, "subs")
	sqlExec(t, w.url, "INSERT INTO "+w.table("Person")+` (_id, name, home, homes) VALUES
		('Person/sql', 'S', '{"city": "x", "pin": "SQLPIN1"}', '[{"city": "a", "pin": "SQLPIN2"}]')`)
	pos := dbPosition(t, d, "subs")
	check := func(what, body string) {
		t.Helper()
		if strings.Contains(body, "SQLPIN") || !strings.Contains(body, `"city":"x"`) {
			t.Errorf("rita's %s: %s, want the home's city and no pin", what, body)
		}
		if what != "subscription" && !strings.Contains(body, `"city":"a"`) {
			t.Errorf("rita's %s: %s, want the homes' city", what, body)
		}
	}
	check("read", string(d.MustDo(t, 200, rita, "GET", "/api/document/admin/subs?id=Person/sql", nil).Body))
	check("listing", string(d.MustDo(t, 200, rita, "GET", "/api/document/admin/subs?type=Person", nil).Body))
	check("read as of", string(d.MustDo(t, 200, rita, "GET", "/api/document/admin/subs?id=Person/sql&as_of="+url.QueryEscape(pos), nil).Body))
	check("changes", string(d.MustDo(t, 200, rita, "GET", "/api/changes/admin/subs?after=0", nil).Body))
	check("history", string(d.MustDo(t, 200, rita, "GET", "/api/history/admin/subs?id=Person/sql", nil).Body))
	check("change stream", string(nextEvent(t, stream).Data))
	check("subscription", filtered.Event().Field("data"))

	sqlExec(t, w.url, "INSERT INTO "+w.table("Person")+` (_id, name, home) VALUES ('Person/keep', 'K', '{"city": "x", "pin": "KEEPME"}')`)
	d.MustDo(t, 200, wren, "PUT", "/api/document/admin/subs", `{"@type":"Person","@id":"Person/keep","name":"K2","home":{"city":"y"}}`)
	if got := string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/subs?id=Person/keep", nil).Body); !strings.Contains(got, `"pin":"KEEPME"`) || !strings.Contains(got, `"city":"y"`) {
		t.Errorf("after the writer's replace: %s, want the pin kept and the new city", got)
	}
}

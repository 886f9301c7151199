package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// gqlSubscribe opens a GraphQL subscription of admin/<db> over SSE as
// auth and reads its readiness frame.
func gqlSubscribe(t *testing.T, d *dt.Daemon, auth dt.Auth, db, q string) *dt.Stream {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"query": q})
	s := d.MustOpenStream(t, auth, dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/" + db, Body: string(body),
		Header: []string{"Accept", "text/event-stream"}})
	if f := s.Next(); f.String() != ": connected" {
		t.Fatalf("%s: first frame %s", q, f)
	}
	return s
}

// TestSubdocumentOfHiddenFields: a subdocument whose every field is
// hidden from a role (Secret), or whose fields are all of such types or
// hidden (Vault), is left out of that role's GraphQL schema with every
// field of its type, and the rest of the schema is served. A reader's
// subscription open across the schema change that makes it so goes on,
// as do its queries and new subscriptions; the admin's select those
// fields.
func TestSubdocumentOfHiddenFields(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "vault", "type Person { name: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/vault", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	readerOld := gqlSubscribe(t, d, rita, "vault", `subscription { Person_added { name } }`)
	adminOld := gqlSubscribe(t, d, dt.Admin(), "vault", `subscription { Person_added { name } }`)

	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/vault", `type Secret @subdocument { pin: String @private }
type Vault @subdocument { secret: Secret secrets: [Secret!] code: Int @private }
type Person { name: String secret: Secret vault: Vault }`)
	docs := "/api/document/admin/vault"
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Person","@id":"alice","name":"Alice",
		"secret":{"@type":"Secret","pin":"1234"},"vault":{"@type":"Vault","code":7,"secret":{"@type":"Secret","pin":"5678"}}}`)
	waitFor(t, readerOld, `{"data":{"Person_added":{"name":"Alice"}}}`)
	waitFor(t, adminOld, `{"data":{"Person_added":{"name":"Alice"}}}`)

	readerNew := gqlSubscribe(t, d, rita, "vault", `subscription { Person_added { name } }`)
	adminNew := gqlSubscribe(t, d, dt.Admin(), "vault", `subscription { Person_added { name secret { pin } vault { code secret { pin } } } }`)
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Person","@id":"bob","name":"Bob",
		"secret":{"@type":"Secret","pin":"4321"},"vault":{"@type":"Vault","code":8}}`)
	waitFor(t, readerOld, `{"data":{"Person_added":{"name":"Bob"}}}`)
	waitFor(t, readerNew, `{"data":{"Person_added":{"name":"Bob"}}}`)
	waitFor(t, adminNew, `{"data":{"Person_added":{"name":"Bob","secret":{"pin":"4321"},"vault":{"code":8,"secret":null}}}}`)

	if got := gqlData(t, d, rita, "vault", `{ Person { name } }`); got != `{"Person":[{"name":"Alice"},{"name":"Bob"}]}` {
		t.Errorf("the reader's query: %s", got)
	}
	if got := gqlData(t, d, rita, "vault", `{ s: __type(name: "Secret") { name } v: __type(name: "Vault") { name } f: __type(name: "Secret_Filter") { name } }`); got != `{"s":null,"v":null,"f":null}` {
		t.Errorf("the reader's schema has the types: %s", got)
	}
	for _, q := range []string{`{ Person { secret { pin } } }`, `{ Person { vault { secret { pin } } } }`} {
		if msg, code := gqlError(t, d, rita, "vault", q); code != "GRAPHQL_VALIDATION_FAILED" || !strings.Contains(msg, "Cannot query field") {
			t.Errorf("the reader's %s: %s %s", q, code, msg)
		}
	}
	if got := gqlData(t, d, dt.Admin(), "vault", `{ Person(id: "Person/alice") { secret { pin } vault { code secret { pin } } } }`); got != `{"Person":[{"secret":{"pin":"1234"},"vault":{"code":7,"secret":{"pin":"5678"}}}]}` {
		t.Errorf("the admin's query: %s", got)
	}
	// REST answers, of the present and of the past, leave those fields out
	// too, rather than show {"@type":"Secret"} alone.
	for _, path := range []string{docs + "?id=Person/alice", docs + "?type=Person", "/api/history/admin/vault?id=Person/alice", "/api/changes/admin/vault"} {
		body := string(d.MustDo(t, 200, rita, "GET", path, nil).Body)
		if !strings.Contains(body, "Alice") || strings.Contains(body, `"secret"`) || strings.Contains(body, `"vault"`) || strings.Contains(body, "Secret") || strings.Contains(body, "Vault") {
			t.Errorf("the reader's GET %s: %s", path, body)
		}
		if body := string(d.MustDo(t, 200, dt.Admin(), "GET", path, nil).Body); !strings.Contains(body, `"pin":"1234"`) {
			t.Errorf("the admin's GET %s: %s", path, body)
		}
	}
	// A writer that sees nothing of them either, and replaces a document
	// as it read it, keeps them, as it keeps a field it may not read.
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wren","organization":"admin","password":"wren-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/vault", `{"user":"wren","role":"write"}`)
	wren := dt.Basic("wren", "wren-password")
	read := string(d.MustDo(t, 200, wren, "GET", docs+"?id=Person/alice", nil).Body)
	if strings.Contains(read, "Secret") {
		t.Fatalf("the writer's read: %s", read)
	}
	d.MustDo(t, 200, wren, "PUT", docs, strings.Replace(read, `"Alice"`, `"Alicia"`, 1))
	if got := gqlData(t, d, dt.Admin(), "vault", `{ Person(id: "Person/alice") { name secret { pin } vault { code secret { pin } } } }`); got != `{"Person":[{"name":"Alicia","secret":{"pin":"1234"},"vault":{"code":7,"secret":{"pin":"5678"}}}]}` {
		t.Errorf("after the writer's replace: %s", got)
	}
}

// TestSystemColumnNamesRefused: a field named as a Postgres system column
// (xmin, ctid, …) is refused when a database is made and when its schema
// changes, with a 400 naming the field and why, not a 500 from Postgres;
// the same names in another case, oid, and the fields of a subdocument
// (kept in JSON, not as columns) are stored and read back.
func TestSystemColumnNamesRefused(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const why = "Postgres gives every table a system column of that name"
	for _, name := range []string{"tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"} {
		body, _ := json.Marshal(map[string]string{"schema": "type Person { name: String " + name + ": Int }"})
		r := d.Do(t, dt.Admin(), "POST", "/api/db/admin/sys"+name, body)
		if r.Status != 400 || !strings.Contains(string(r.Body), "invalid field name Person."+name+": "+why) {
			t.Errorf("a database with Person.%s: %d %s", name, r.Status, r.Body)
		}
	}
	d.CreateDatabase(t, "sys", "type Person { name: String }")
	r := d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/sys", "interface Named { name: String xmax: Int }\ntype Person implements Named")
	if r.Status != 400 || !strings.Contains(string(r.Body), "invalid field name Named.xmax: "+why) {
		t.Errorf("a schema change adding Named.xmax: %d %s", r.Status, r.Body)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/sys", "type Person { name: String XMin: Int ctId: Int oid: Int at: Spot }\ntype Spot @subdocument { xmin: Int ctid: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/sys", `{"@type":"Person","@id":"p","XMin":1,"ctId":2,"oid":3,"at":{"@type":"Spot","xmin":4,"ctid":"(0,1)"}}`)
	if got := gqlData(t, d, dt.Admin(), "sys", `{ Person { XMin ctId oid at { xmin ctid } } }`); got != `{"Person":[{"XMin":1,"ctId":2,"oid":3,"at":{"xmin":4,"ctid":"(0,1)"}}]}` {
		t.Errorf("the fields read back as %s", got)
	}
}

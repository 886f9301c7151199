package daemon_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// putSchema puts sdl as admin/db's schema (forced when force), wants
// status and, when it is not 200, an answer holding want.
func putSchema(t *testing.T, d *dt.Daemon, db, sdl string, force bool, status int, want string) {
	t.Helper()
	q := ""
	if force {
		q = "?force=true"
	}
	r := d.Do(t, dt.Admin(), http.MethodPut, "/api/schema/admin/"+db+q, sdl)
	if r.Status != status || !strings.Contains(string(r.Body), want) {
		t.Fatalf("put schema%s %q: %d %s, want %d and %q", q, sdl, r.Status, r.Body, status, want)
	}
}

// schemaRefusals returns what a dry run of sdl on admin/db says would be
// refused even with force.
func schemaRefusals(t *testing.T, d *dt.Daemon, db, sdl string) []string {
	t.Helper()
	r := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/"+db+"?dry_run=true", sdl)
	var p struct{ Refused []string }
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	return p.Refused
}

// storedDoc returns document id of admin/db as REST reads it, without its
// version.
func storedDoc(t *testing.T, d *dt.Daemon, db, id string) string {
	t.Helper()
	return strings.TrimSpace(withoutVersion(string(d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/document/admin/"+db+"?id="+id, nil).Body)))
}

// TestSchemaChangeChecksSubdocuments: a field made required on a
// subdocument type, and a dropped enum value, are checked against the
// subdocuments stored in documents (one, a list of them, one inside
// another), force or not, and dry_run says so.
func TestSchemaChangeChecksSubdocuments(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const (
		people  = "type Person { name: String home: Address homes: [Address!] }\n"
		address = "type Address @subdocument { street: String c: Color inner: Address"
	)
	d.CreateDatabase(t, "subs", "enum Color { RED GREEN }\n"+people+address+" }")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/subs", `[
		{"@type":"Person","@id":"a","home":{"street":"x","c":"RED"}},
		{"@type":"Person","@id":"b","homes":[{"street":"y","inner":{"street":"z","c":"GREEN"}}]},
		{"@type":"Person","@id":"n","name":"none"}]`)

	for _, c := range []struct{ sdl, why string }{
		{"enum Color { RED GREEN }\n" + people + address + " zip: String! }", "cannot make Address.zip required: 2 stored documents lack it"},
		{"enum Color { GREEN }\n" + people + address + " }", "cannot drop value RED of enum Color: 1 stored documents hold it in Person.home.c; change them first"},
		{"enum Color { RED }\n" + people + address + " }", "cannot drop value GREEN of enum Color: 1 stored documents hold it in Person.homes.inner.c; change them first"},
	} {
		putSchema(t, d, "subs", c.sdl, false, http.StatusConflict, "") // a dropped enum value needs force first
		putSchema(t, d, "subs", c.sdl, true, http.StatusConflict, c.why)
		if got := schemaRefusals(t, d, "subs", c.sdl); !reflect.DeepEqual(got, []string{c.why}) {
			t.Errorf("dry run of %q refuses %q, want %q", c.sdl, got, c.why)
		}
	}

	// Only the subdocument inside another lacks zip.
	putSchema(t, d, "subs", "enum Color { RED GREEN }\n"+people+address+" zip: String }", false, http.StatusOK, "")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPatch, "/api/document/admin/subs?id=Person/a", `{"home":{"zip":"1"}}`, "Content-Type", "application/merge-patch+json")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPatch, "/api/document/admin/subs?id=Person/b", `{"homes":[{"street":"y","zip":"2","inner":{"street":"z","c":"GREEN"}}]}`, "Content-Type", "application/merge-patch+json")
	required := "enum Color { RED GREEN }\n" + people + address + " zip: String! }"
	putSchema(t, d, "subs", required, true, http.StatusConflict, "cannot make Address.zip required: 1 stored documents lack it")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPatch, "/api/document/admin/subs?id=Person/b", `{"homes":[{"street":"y","zip":"2","inner":{"street":"z","zip":"3","c":"GREEN"}}]}`, "Content-Type", "application/merge-patch+json")
	putSchema(t, d, "subs", required, false, http.StatusOK, "")

	// Once no subdocument holds RED, it can be dropped (with force).
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPatch, "/api/document/admin/subs?id=Person/a", `{"home":{"c":null}}`, "Content-Type", "application/merge-patch+json")
	putSchema(t, d, "subs", "enum Color { GREEN }\n"+people+address+" zip: String! }", true, http.StatusOK, "")
}

// TestForcedTypeChangeToARequiredType: a forced change of a field's type
// drops its values, so making it required too is refused, force or not,
// while stored documents (or subdocuments) of its class would be left
// without it; on a class without documents it applies.
func TestForcedTypeChangeToARequiredType(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "retype", "type Person { age: Int home: Address }\ntype Address @subdocument { n: Int }\ntype Empty { x: Int }")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/retype", `[{"@type":"Person","@id":"a","age":3,"home":{"n":1}},{"@type":"Person","@id":"b"}]`)
	for _, c := range []struct{ sdl, why string }{
		{"type Person { age: String! home: Address }\ntype Address @subdocument { n: Int }\ntype Empty { x: Int }",
			"cannot make Person.age required: 2 stored documents would lack it once its stored values are dropped"},
		{"type Person { age: Int home: Address }\ntype Address @subdocument { n: String! }\ntype Empty { x: Int }",
			"cannot make Address.n required: 1 stored documents would lack it once its stored values are dropped"},
	} {
		putSchema(t, d, "retype", c.sdl, true, http.StatusConflict, c.why)
		if got := schemaRefusals(t, d, "retype", c.sdl); !reflect.DeepEqual(got, []string{c.why}) {
			t.Errorf("dry run of %q refuses %q, want %q", c.sdl, got, c.why)
		}
	}
	putSchema(t, d, "retype", "type Person { age: Int home: Address }\ntype Address @subdocument { n: Int }\ntype Empty { x: String! }", true, http.StatusOK, "")
	if got := storedDoc(t, d, "retype", "Person/a"); got != `{"@id":"Person/a","@type":"Person","age":3,"home":{"@type":"Address","n":1}}` {
		t.Errorf("after the refused changes: %s", got)
	}
}

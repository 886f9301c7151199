package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
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

// TestForcedChangeDropsSubdocumentValues: a forced change that drops a
// field of a subdocument type, or changes its type, drops its values
// from every stored subdocument (in a list, inside another), in the
// change's transaction: reads no longer show them and the documents can
// be written again.
func TestForcedChangeDropsSubdocumentValues(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "nested", "type Person { name: String home: Address homes: [Address!] }\ntype Address @subdocument { street: String n: Int inner: Address }")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/nested", `[
		{"@type":"Person","@id":"a","name":"A","home":{"street":"x","n":1,"inner":{"street":"i","n":2}},"homes":[{"street":"y","n":3},{"n":4}]},
		{"@type":"Person","@id":"b","name":"B"}]`)
	const next = "type Person { name: String home: Address homes: [Address!] }\ntype Address @subdocument { street: Int inner: Address }"
	r := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/nested?dry_run=true", next)
	for _, want := range []string{
		`{"change":"changes field Address.street from String to Int; its stored values are dropped","destructive":true,"documents":1,"ids":["Person/a"]}`,
		`{"change":"drops field Address.n and its values","destructive":true,"documents":1,"ids":["Person/a"]}`,
	} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("dry run: %s lacks %s", r.Body, want)
		}
	}
	putSchema(t, d, "nested", next, true, http.StatusOK, "its stored values are dropped")
	if got := storedDoc(t, d, "nested", "Person/a"); got != `{"@id":"Person/a","@type":"Person","name":"A","home":{"@type":"Address","inner":{"@type":"Address"}},"homes":[{"@type":"Address"},{"@type":"Address"}]}` {
		t.Errorf("after the forced change: %s", got)
	}
	if got := gqlData(t, d, dt.Admin(), "nested", `{ Person(id: "Person/a") { home { street inner { street } } homes { street } } }`); got != `{"Person":[{"home":{"street":null,"inner":{"street":null}},"homes":[{"street":null},{"street":null}]}]}` {
		t.Errorf("GraphQL after the forced change: %s", got)
	}
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPatch, "/api/document/admin/nested?id=Person/a", `{"name":"A2"}`, "Content-Type", "application/merge-patch+json")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPatch, "/api/document/admin/nested?id=Person/a", `{"home":{"street":7}}`, "Content-Type", "application/merge-patch+json")
	if got := storedDoc(t, d, "nested", "Person/a"); got != `{"@id":"Person/a","@type":"Person","name":"A2","home":{"@type":"Address","inner":{"@type":"Address"},"street":7},"homes":[{"@type":"Address"},{"@type":"Address"}]}` {
		t.Errorf("after writes of the new type: %s", got)
	}
	if got := storedDoc(t, d, "nested", "Person/b"); got != `{"@id":"Person/b","@type":"Person","name":"B"}` {
		t.Errorf("a document without subdocuments: %s", got)
	}
}

// TestForcedChangeDropsReferencesThatNoLongerFit: a forced change that
// makes a class stop implementing an interface, or drops it, drops the
// references to its documents from fields typed as what it no longer
// is (single, in lists, in subdocuments); a required reference that
// would be dropped refuses the change, force or not.
func TestForcedChangeDropsReferencesThatNoLongerFit(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const (
		animal = "interface Animal { name: String! }\n"
		dog    = "type Dog implements Animal { breed: String }\n"
		cat    = "type Cat implements Animal { indoor: Boolean }\n"
		people = "type Person { name: String pet: Animal pets: [Animal!] home: Home dog: Dog }\ntype Home @subdocument { pet: Animal }\ntype Owner { pet: Animal! }"
	)
	d.CreateDatabase(t, "refs", animal+dog+cat+people)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/refs", `[
		{"@type":"Dog","@id":"rex","name":"Rex"},{"@type":"Cat","@id":"tom","name":"Tom"},
		{"@type":"Person","@id":"a","name":"A","pet":"Dog/rex","pets":["Dog/rex","Cat/tom"],"home":{"pet":"Dog/rex"},"dog":"Dog/rex"},
		{"@type":"Person","@id":"b","name":"B","pet":"Cat/tom"},
		{"@type":"Owner","@id":"o","pet":"Cat/tom"}]`)

	// Dog stops being an Animal: references to Dog/rex typed Animal go,
	// the one typed Dog stays.
	const notAnimal = "type Dog { name: String! breed: String }\n"
	r := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/refs?dry_run=true", animal+notAnimal+cat+people)
	if want := `"destructive":true,"documents":1,"ids":["Person/a"]}`; !strings.Contains(string(r.Body), want) {
		t.Errorf("dry run: %s lacks %s", r.Body, want)
	}
	putSchema(t, d, "refs", animal+notAnimal+cat+people, true, http.StatusOK, "makes Dog no longer inherit from Animal")
	if got := storedDoc(t, d, "refs", "Person/a"); got != `{"@id":"Person/a","@type":"Person","name":"A","pets":["Cat/tom"],"home":{"@type":"Home"},"dog":"Dog/rex"}` {
		t.Errorf("after Dog left Animal: %s", got)
	}
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPatch, "/api/document/admin/refs?id=Person/a", `{"name":"A2"}`, "Content-Type", "application/merge-patch+json")

	// Dropping Cat would leave Owner/o without its required pet.
	const why = "cannot drop the references of required field Owner.pet that no longer fit its type Animal: 1 stored documents would lack it"
	putSchema(t, d, "refs", animal+notAnimal+people, true, http.StatusConflict, why)
	if got := schemaRefusals(t, d, "refs", animal+notAnimal+people); !reflect.DeepEqual(got, []string{why}) {
		t.Errorf("dry run refuses %q, want %q", got, why)
	}
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodDelete, "/api/document/admin/refs?id=Owner/o", nil)
	putSchema(t, d, "refs", animal+notAnimal+people, true, http.StatusOK, "drops class Cat")
	for id, want := range map[string]string{
		"Person/a": `{"@id":"Person/a","@type":"Person","name":"A2","pets":[],"home":{"@type":"Home"},"dog":"Dog/rex"}`,
		"Person/b": `{"@id":"Person/b","@type":"Person","name":"B"}`,
	} {
		if got := storedDoc(t, d, "refs", id); got != want {
			t.Errorf("after Cat was dropped: %s, want %s", got, want)
		}
	}
	if got := gqlData(t, d, dt.Admin(), "refs", `{ Person { pet { name } pets { name } } }`); got != `{"Person":[{"pet":null,"pets":[]},{"pet":null,"pets":null}]}` {
		t.Errorf("GraphQL after Cat was dropped: %s", got)
	}
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPatch, "/api/document/admin/refs?id=Person/b", `{"name":"B2"}`, "Content-Type", "application/merge-patch+json")
}

// TestSchemaChangeWalksEveryPage: the stored values a change checks and
// rewrites are read a page at a time; those past the first page count,
// and are rewritten, too.
func TestSchemaChangeWalksEveryPage(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "pages", "type P { s: S }\ntype S @subdocument { n: Int }")
	var docs []string
	for i := range 1001 {
		docs = append(docs, fmt.Sprintf(`{"@type":"P","@id":"p%04d","s":{"n":%d}}`, i, i))
	}
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/pages", "["+strings.Join(docs, ",")+"]")
	putSchema(t, d, "pages", "type P { s: S }\ntype S @subdocument { n: Int z: Int! }", true, http.StatusConflict, "cannot make S.z required: 1001 stored documents lack it")
	putSchema(t, d, "pages", "type P { s: S }\ntype S @subdocument { m: Int }", true, http.StatusOK, "drops field S.n")
	for _, id := range []string{"P/p0000", "P/p0999", "P/p1000"} {
		if got, want := storedDoc(t, d, "pages", id), `{"@id":"`+id+`","@type":"P","s":{"@type":"S"}}`; got != want {
			t.Errorf("after the forced change: %s, want %s", got, want)
		}
	}
}

// TestWidenedReferenceKeepsItsValues: a reference field whose type
// becomes an interface that every class it may point to implements
// (owner: Person to owner: Named), single, in a list or in a
// subdocument, keeps its stored references: the change needs no force,
// drops nothing even when forced, and reads, GraphQL and reads as of
// before it show the references. Before, it was a change of type like any other, refused
// without force, and with force dropped every stored reference, though
// each still pointed to a document of a class implementing Named.
func TestWidenedReferenceKeepsItsValues(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const (
		named = "interface Named { name: String }\ntype Person implements Named { name: String }\ntype Pet implements Named { name: String }\n"
		home  = "type Home @subdocument { owner: Person }\n"
	)
	d.CreateDatabase(t, "widen", named+home+"type Note { text: String owner: Person owners: [Person!] home: Home }")
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/widen", `[
		{"@type":"Person","@id":"alice","name":"Alice"},{"@type":"Pet","@id":"rex","name":"Rex"},
		{"@type":"Note","@id":"n1","text":"t","owner":"Person/alice","owners":["Person/alice"],"home":{"owner":"Person/alice"}}]`)
	before := dbPosition(t, d, "widen")
	const stored = `{"@id":"Note/n1","@type":"Note","text":"t","owner":"Person/alice","owners":["Person/alice"],"home":{"@type":"Home","owner":"Person/alice"}}`

	widened := named + "type Home @subdocument { owner: Named }\ntype Note { text: String owner: Named owners: [Named!] home: Home }"
	r := d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/widen?dry_run=true", widened)
	if strings.Contains(string(r.Body), `"destructive":true`) || !strings.Contains(string(r.Body), `"force_needed":false`) {
		t.Errorf("dry run of the widening: %s, want nothing destructive", r.Body)
	}
	// Forced, as a client told to force it would: still nothing dropped.
	r = d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/widen?force=true", widened)
	if got := storedDoc(t, d, "widen", "Note/n1"); got != stored {
		t.Errorf("after the widening: %s, want %s", got, stored)
	}
	if want := "changes field Note.owner from Person to Named; its stored references are kept (each class they may point to is a Named)"; !strings.Contains(string(r.Body), want) {
		t.Errorf("the widening answered %s, want %q", r.Body, want)
	}
	if got := gqlData(t, d, dt.Admin(), "widen", `{ Note { owner { name } owners { name } home { owner { name } } } }`); got != `{"Note":[{"owner":{"name":"Alice"},"owners":[{"name":"Alice"}],"home":{"owner":{"name":"Alice"}}}]}` {
		t.Errorf("GraphQL after the widening: %s", got)
	}
	r = d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/document/admin/widen?id=Note/n1&as_of="+url.QueryEscape(before), nil)
	if got := strings.TrimSpace(withoutVersion(string(r.Body))); got != stored || r.Header.Get("Sluice-Hidden-Fields") != "" {
		t.Errorf("as of before the widening: %s (hidden %q), want %s", got, r.Header.Get("Sluice-Hidden-Fields"), stored)
	}
	// The new type takes what the old one did not.
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPatch, "/api/document/admin/widen?id=Note/n1", `{"owner":"Pet/rex"}`, "Content-Type", "application/merge-patch+json")

	// Narrowing back is a change of type that drops what no longer fits:
	// refused without force, as before.
	putSchema(t, d, "widen", named+home+"type Note { text: String owner: Person owners: [Person!] home: Home }", false, http.StatusConflict, "changes field Note.owner from Named to Person")
}

package daemon_test

import (
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestIDsOfNoDocumentClass: an id whose class has no documents of its own
// (an interface, a subdocument type, a class the schema lacks) is answered
// 400 by every method, naming what its class is instead: a read (and its
// HEAD, and a read as of a position), a patch, a delete, and a write of a
// document of that "@type". Before, a read and a delete of an interface's
// id answered 404 ("does not exist") and a patch 400, and a read of an
// unknown class's 404 while a delete of it answered 400.
func TestIDsOfNoDocumentClass(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", `interface Animal { name: String } type Dog implements Animal { name: String } type Addr @subdocument { name: String }`)
	pos := d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Dog","@id":"Dog/rex","name":"Rex"}`).Header.Get("Sluice-Position")
	for _, c := range []struct{ class, why string }{
		{"Animal", "class Animal is abstract and has no documents of its own"},
		{"Addr", "class Addr is a subdocument and exists only inside documents"},
		{"Nope", `unknown class \"Nope\"`}, // as JSON escapes it
	} {
		id := c.class + "/rex"
		doc := `{"@type":"` + c.class + `","@id":"` + id + `","name":"x"}`
		for _, m := range []struct{ method, query, body string }{
			{"GET", "?id=" + id, ""},
			{"HEAD", "?id=" + id, ""},
			{"GET", "?id=" + id + "&as_of=" + url.QueryEscape(pos), ""},
			{"PATCH", "?id=" + id, `{"name":"y"}`},
			{"DELETE", "?id=" + id, ""},
			{"PUT", "", doc},
			{"PUT", "?create=true", doc},
			{"POST", "", doc},
		} {
			var body any
			if m.body != "" {
				body = m.body
			}
			r := d.Do(t, dt.Admin(), m.method, "/api/document/admin/zoo"+m.query, body, "Content-Type", "application/json")
			if r.Status != 400 || m.method != "HEAD" && !strings.Contains(string(r.Body), c.why) {
				t.Errorf("%s %s%s: %d %s, want 400 saying %q", m.method, id, m.query, r.Status, r.Body, c.why)
			}
		}
	}
	// A document class's id of no document is not found.
	for _, method := range []string{"GET", "PATCH", "DELETE"} {
		var body any
		if method == "PATCH" {
			body = `{"name":"y"}`
		}
		if r := d.Do(t, dt.Admin(), method, "/api/document/admin/zoo?id=Dog/none", body, "Content-Type", "application/json"); r.Status != 404 {
			t.Errorf("%s Dog/none: %d %s, want 404", method, r.Status, r.Body)
		}
	}
}

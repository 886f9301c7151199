package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestRepeatedMembersRefused: a JSON body that gives a member twice
// (encoding/json would keep the last) is a 400 naming the member, its
// path and the byte of its second name, on every route that decodes
// JSON, and nothing is written.
func TestRepeatedMembersRefused(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "dups", "type Note { text: String tags: [String] home: Place }\ntype Person { name: String }\ntype Place @subdocument { street: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/dups", `{"@type":"Note","@id":"keep","text":"a"}`)
	cases := []struct {
		method, path, body, ctype, want string
	}{
		{"POST", "/api/document/admin/dups", `{"@type":"Note","@type":"Person","@id":"d3","name":"x"}`, "", `document 0 (d3): invalid JSON: the member "@type" is given twice (the second time at byte 16, counting from 0)`},
		{"POST", "/api/document/admin/dups", `{"@type":"Note","@id":"d1","@id":"d2"}`, "", `the member "@id" is given twice (the second time at byte 27, counting from 0)`},
		{"POST", "/api/document/admin/dups", `[{"@type":"Note","@id":"d1"},{"@type":"Note","@id":"d2","home":{"street":"a","street":"b"}}]`, "", `document 1 (d2): invalid JSON: the member "home.street" is given twice (the second time at byte 48, counting from 0)`},
		{"POST", "/api/document/admin/dups", "{\"@type\":\"Note\",\"@id\":\"d1\"}\n{\"@type\":\"Note\",\"@id\":\"d2\",\"text\":\"a\",\"t\\u0065xt\":\"b\"}\n", "application/x-ndjson", `document 1 (d2, line 2): invalid JSON: the member "text" is given twice`},
		{"PUT", "/api/document/admin/dups", `{"@type":"Note","@id":"keep","text":"b","text":"c"}`, "", `the member "text" is given twice`},
		{"PATCH", "/api/document/admin/dups?id=Note/keep", `{"text":"b","text":"c"}`, "application/merge-patch+json", `invalid JSON: the member "text" is given twice (the second time at byte 12, counting from 0)`},
		{"DELETE", "/api/document/admin/dups", `[{"@id":"Note/keep","@id":"Note/other"}]`, "", `element 0 (counting from 0): the member "@id" is given twice`},
		{"POST", "/api/db/admin/two", `{"schema":"type A { a: String }","schema":"type B { b: String }"}`, "", `invalid JSON: the member "schema" is given twice (the second time at byte 33, counting from 0)`},
		{"POST", "/api/db/admin/two", `{"schema":"type A { a: String }","Schema":"type B { b: String }"}`, "", `the member "Schema" is given twice`},
		{"POST", "/api/graphql/admin/dups", `{"query":"query($t: String) { Note(filter: {text: {eq: $t}}) { _id } }","variables":{"t":"a","t":"b"}}`, "", `the request body: invalid JSON: the member "variables.t" is given twice`},
		{"POST", "/api/graphql/admin/dups", `{"query":"mutation { _insertDocuments(json: \"{\\\"@type\\\":\\\"Note\\\",\\\"text\\\":\\\"a\\\",\\\"text\\\":\\\"b\\\"}\") }"}`, "", `the member "text" is given twice`},
	}
	for _, c := range cases {
		ctype := c.ctype
		if ctype == "" {
			ctype = "application/json"
		}
		r := d.Do(t, dt.Admin(), c.method, c.path, c.body, "Content-Type", ctype)
		var e struct {
			Message string `json:"api:message"`
			Errors  []struct{ Message string }
		}
		_ = json.Unmarshal(r.Body, &e)
		msg := e.Message
		if len(e.Errors) > 0 {
			msg = e.Errors[0].Message
		}
		if (r.Status != 400 && !strings.Contains(c.path, "graphql")) || !strings.Contains(msg, c.want) {
			t.Errorf("%s %s %s: %d %s, want 400 %q", c.method, c.path, c.body, r.Status, r.Body, c.want)
		}
	}
	// Nothing was written: the one document is as it was, the database
	// with two schemas was not created.
	got := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/dups?type=Note&as_list=true", nil)
	if s := string(got.Body); !strings.Contains(s, `"text":"a"`) || strings.Contains(s, "d1") || strings.Contains(s, "d2") || strings.Contains(s, "d3") {
		t.Errorf("documents after the refused writes: %s", s)
	}
	if r := d.Do(t, dt.Admin(), "GET", "/api/db/admin/two", nil); r.Status != 404 {
		t.Errorf("the database of two schemas: %d %s, want 404", r.Status, r.Body)
	}
}

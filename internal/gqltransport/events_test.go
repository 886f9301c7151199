package gqltransport_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestPerDocumentEvents covers X_added/_updated/_deleted: subclass
// matching, filters on the document after (added, updated) and before
// (deleted) the commit, _CommitMetadata, references, deleted documents
// from the before image and field protection.
func TestPerDocumentEvents(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/zoo", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")

	animals := subscribe(t, d, "zoo", `subscription { Animal_added { _id _type name _CommitMetadata { _id _change_type } } }`)
	labs := subscribe(t, d, "zoo", `subscription { Dog_updated { _id breed owner { name } } }`)
	labsVars := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/zoo", body(`subscription S($b: String) { lab: Dog_updated(filter: {breed: {eq: $b}}) { breed } }`, "variables", map[string]any{"b": "lab"}), nil, "Accept", sse)
	gone := subscribe(t, d, "zoo", `subscription { Dog_deleted(filter: {breed: {eq: "lab"}}) { _id name breed _CommitMetadata { _change_type } } }`)
	people := subscribe(t, d, "zoo", `subscription { Person_added { name ssn } }`)
	readers := mustOpen(t, d, rita, http.MethodPost, "/api/graphql/admin/zoo", body(`subscription { Person_added { name age } }`), nil, "Accept", sse)
	for _, s := range []*stream{animals, labs, labsVars, gone, people, readers} {
		s.connected()
	}
	// A reader cannot select a protected field: it is not in its schema.
	r := d.Do(t, rita, http.MethodPost, "/api/graphql/admin/zoo", body(`subscription { Person_added { name ssn } }`), "Content-Type", "application/json", "Accept", sse)
	if r.Status != 200 || !strings.Contains(string(r.Body), `Cannot query field \"ssn\" on type \"Person\"`) {
		t.Fatalf("reader selecting ssn: %d %s", r.Status, r.Body)
	}

	insert(t, d, "zoo", `[{"@type":"Person","@id":"Person/alice","name":"Alice","age":30,"ssn":"123"},
		{"@type":"Dog","@id":"Dog/rex","name":"Rex","breed":"poodle","owner":"Person/alice"},
		{"@type":"Cat","@id":"Cat/tom","name":"Tom"}]`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/zoo", `{"@type":"Dog","@id":"Dog/rex","name":"Rex","breed":"lab","owner":"Person/alice"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/zoo", `{"@type":"Dog","@id":"Dog/rex","name":"Rex","breed":"poodle"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/zoo", `{"@type":"Dog","@id":"Dog/rex","name":"Rex II","breed":"lab"}`)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/zoo?id=Dog/rex", nil)

	check := func(name string, s *stream, want ...string) {
		t.Helper()
		ids, data := s.nexts(len(want))
		for i := range want {
			if w, _, _ := strings.Cut(want[i], " "); !strings.HasSuffix(ids[i], w) || data[i] != want[i][len(w)+1:] {
				t.Fatalf("%s event %d: id %s data %s, want %s", name, i, ids[i], data[i], want[i])
			}
		}
	}
	check("Animal_added", animals,
		`-1-1 {"data":{"Animal_added":{"_id":"Dog/rex","_type":"Dog","name":"Rex","_CommitMetadata":{"_id":"1","_change_type":"added"}}}}`,
		`-1-2 {"data":{"Animal_added":{"_id":"Cat/tom","_type":"Cat","name":"Tom","_CommitMetadata":{"_id":"1","_change_type":"added"}}}}`)
	check("Dog_updated", labsVars,
		`-2-0 {"data":{"lab":{"breed":"lab"}}}`,
		`-4-0 {"data":{"lab":{"breed":"lab"}}}`)
	check("Dog_updated unfiltered", labs,
		`-2-0 {"data":{"Dog_updated":{"_id":"Dog/rex","breed":"lab","owner":{"name":"Alice"}}}}`,
		`-3-0 {"data":{"Dog_updated":{"_id":"Dog/rex","breed":"poodle","owner":null}}}`,
		`-4-0 {"data":{"Dog_updated":{"_id":"Dog/rex","breed":"lab","owner":null}}}`)
	check("Dog_deleted", gone,
		`-5-0 {"data":{"Dog_deleted":{"_id":"Dog/rex","name":"Rex II","breed":"lab","_CommitMetadata":{"_change_type":"deleted"}}}}`)
	check("Person_added admin", people, `-1-0 {"data":{"Person_added":{"name":"Alice","ssn":"123"}}}`)
	check("Person_added reader", readers, `-1-0 {"data":{"Person_added":{"name":"Alice","age":30}}}`)

	// A deletion the filter rejects (on the before image) sends nothing:
	// the next Dog_deleted event is the lab deleted after it.
	insert(t, d, "zoo", `[{"@type":"Dog","@id":"Dog/a","name":"A","breed":"poodle"},{"@type":"Dog","@id":"Dog/b","name":"B","breed":"lab"}]`)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/zoo", `["Dog/a","Dog/b"]`)
	check("Dog_deleted filtered", gone,
		`-7-1 {"data":{"Dog_deleted":{"_id":"Dog/b","name":"B","breed":"lab","_CommitMetadata":{"_change_type":"deleted"}}}}`)

	var res struct{ Data map[string]json.RawMessage }
	if err := json.Unmarshal([]byte(gql(t, d, "zoo", `{ Dog { _id } }`)), &res); err != nil || string(res.Data["Dog"]) != "[]" {
		t.Fatalf("dogs left: %v %s", err, res.Data["Dog"])
	}
}

package gqltransport_test

import (
	"net/http"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestChangeSetEvents: one event per commit, deleted documents with their
// fields from before the commit, nothing for a commit that touches none of
// the selected classes.
func TestChangeSetEvents(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	insert(t, d, "zoo", `{"@type":"Person","@id":"Person/old","name":"Old","age":70}`)
	cs := subscribe(t, d, "zoo", `subscription { _ChangeSet { Person_added { _id name } Person_changed { _id } Person_deleted { _id name age } _CommitMetadata { _id _change_type } } }`)
	per := subscribe(t, d, "zoo", `subscription { Person_added { _id } }`)
	nd := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/zoo", body(`subscription { _ChangeSet { Person_deleted { name } } }`), nil, "Accept", ndjson)
	cs.connected()
	per.connected()
	nd.connected()
	gql(t, d, "zoo", `mutation {
		_insertDocuments(json: "[{\"@type\":\"Person\",\"@id\":\"Person/a\",\"name\":\"A\"},{\"@type\":\"Person\",\"@id\":\"Person/b\",\"name\":\"B\"}]")
		_deleteDocuments(ids: ["Person/old"])
	}`)
	insert(t, d, "zoo", dogs("rex")) // no Person: no change-set event
	insert(t, d, "zoo", `{"@type":"Person","@id":"Person/c","name":"C"}`)

	ids, data := cs.nexts(2)
	want := []string{
		`-2-2 {"data":{"_ChangeSet":{"Person_added":[{"_id":"Person/a","name":"A"},{"_id":"Person/b","name":"B"}],"Person_changed":[],"Person_deleted":[{"_id":"Person/old","name":"Old","age":70}],"_CommitMetadata":{"_id":"2","_change_type":"commit"}}}}`,
		`-4-0 {"data":{"_ChangeSet":{"Person_added":[{"_id":"Person/c","name":"C"}],"Person_changed":[],"Person_deleted":[],"_CommitMetadata":{"_id":"4","_change_type":"commit"}}}}`,
	}
	for i, w := range want {
		suffix, payload, _ := strings.Cut(w, " ")
		if !strings.HasSuffix(ids[i], suffix) || data[i] != payload {
			t.Fatalf("change set %d: %s %s\nwant %s", i, ids[i], data[i], w)
		}
	}
	// Per-document subscriptions coexist: one event per document.
	if pids, _ := per.nexts(3); !strings.HasSuffix(pids[0], "-2-0") || !strings.HasSuffix(pids[1], "-2-1") || !strings.HasSuffix(pids[2], "-4-0") {
		t.Fatalf("per-document ids %v", pids)
	}
	// The NDJSON change set of deletions only: the one commit that has one.
	var lines []string
	for len(lines) < 1 {
		if f := nd.Next(); f[0] != "null" {
			lines = append(lines, withoutEventPosition(t, f[0]))
		}
	}
	insert(t, d, "zoo", `{"@type":"Person","@id":"Person/d","name":"D"}`)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/zoo?id=Person/d", nil)
	for len(lines) < 2 {
		if f := nd.Next(); f[0] != "null" {
			lines = append(lines, withoutEventPosition(t, f[0]))
		}
	}
	if lines[0] != `{"data":{"_ChangeSet":{"Person_deleted":[{"name":"Old"}]}}}` || lines[1] != `{"data":{"_ChangeSet":{"Person_deleted":[{"name":"D"}]}}}` {
		t.Fatalf("NDJSON change sets: %q", lines)
	}
}

// TestChangeSetIncludeChildren runs the include_children matrix, top level
// and per field, over a concrete parent (Pet, with Cat) and an abstract one
// (Animal, with Dog and Cat).
func TestChangeSetIncludeChildren(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	cases := []struct{ query, want string }{
		{`_ChangeSet { Pet_added { _id } }`,
			`{"Pet_added":[{"_id":"Pet/p"},{"_id":"Cat/c"}]}`},
		{`_ChangeSet(include_children: true) { Pet_added(include_children: false) { _id } Animal_added { _id } }`,
			`{"Pet_added":[{"_id":"Pet/p"}],"Animal_added":[{"_id":"Cat/c"},{"_id":"Dog/d"}]}`},
		{`_ChangeSet(include_children: false) { Pet_added { _id } }`,
			`{"Pet_added":[{"_id":"Pet/p"}]}`},
		{`_ChangeSet(include_children: false) { Pet_added(include_children: true) { _id } Animal_added { _id } Dog_added { _id } }`,
			`{"Pet_added":[{"_id":"Pet/p"},{"_id":"Cat/c"}],"Animal_added":[],"Dog_added":[{"_id":"Dog/d"}]}`},
		{`_ChangeSet(include_children: false) { Animal_added(include_children: true, filter: {name: {eq: "D"}}) { _id } }`,
			`{"Animal_added":[{"_id":"Dog/d"}]}`},
	}
	var ss []*stream
	for _, c := range cases {
		s := subscribe(t, d, "zoo", "subscription { "+c.query+" }")
		s.connected()
		ss = append(ss, s)
	}
	insert(t, d, "zoo", `[{"@type":"Pet","@id":"Pet/p","name":"P"},{"@type":"Cat","@id":"Cat/c","name":"C"},{"@type":"Dog","@id":"Dog/d","name":"D"}]`)
	for i, c := range cases {
		ids, data := ss[i].nexts(1)
		if want := `{"data":{"_ChangeSet":` + c.want + `}}`; data[0] != want || !strings.HasSuffix(ids[0], "-1-2") {
			t.Errorf("%s:\n got %s %s\nwant %s", c.query, ids[0], data[0], want)
		}
	}
}

// TestSystemSubscriptions: the super user follows database creation on
// _system; nobody else may subscribe there.
func TestSystemSubscriptions(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	q := body(`subscription { UserDatabase_added { _id name organization _CommitMetadata { _change_type } } }`)
	s := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/_system", q, nil, "Accept", sse)
	s.connected()
	r := d.Do(t, dt.Basic("rita", "rita-password"), http.MethodPost, "/api/graphql/_system", q, "Content-Type", "application/json", "Accept", sse)
	if r.Status != 403 {
		t.Fatalf("non-super user on _system: %d %s", r.Status, r.Body)
	}
	d.CreateDatabase(t, "zoo", zooSDL)
	if _, data := s.nexts(1); data[0] != `{"data":{"UserDatabase_added":{"_id":"UserDatabase/admin/zoo","name":"zoo","organization":"admin","_CommitMetadata":{"_change_type":"added"}}}}` {
		t.Fatalf("UserDatabase_added: %s", data[0])
	}
}

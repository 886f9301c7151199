package graph_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestConditionalDelete: _deleteDocuments(documents:) deletes each
// document only at the version given, as REST's DELETE of {"@id",
// "@version"} does: a stale one fails the request, deleting nothing, and
// is named with its current version. ids and documents are one or the
// other.
func TestConditionalDelete(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, `[{"@type":"Person","@id":"a","name":"A"},{"@type":"Person","@id":"b","name":"B"}]`)
	version := func(id string) string {
		var data struct {
			Person []struct {
				Version string `json:"_version"`
			}
		}
		res := st.query(t, `{ Person(id: "`+id+`") { _version } }`, nil).mustOK(t)
		if err := json.Unmarshal(res.Data, &data); err != nil || len(data.Person) != 1 {
			t.Fatalf("%s: %s", id, res.raw)
		}
		return data.Person[0].Version
	}
	va, vb := version("Person/a"), version("Person/b")
	const del = `mutation($d: [_DocumentVersion!]) { _deleteDocuments(documents: $d) }`
	stale := st.query(t, del, map[string]any{"d": []any{
		map[string]any{"_id": "Person/a", "_version": va}, map[string]any{"_id": "Person/b", "_version": "nope"}}})
	if len(stale.Errors) != 1 || stale.Errors[0].Extensions["code"] != "PRECONDITION_FAILED" ||
		!strings.Contains(fmt.Sprint(stale.Errors[0].Extensions["documents"]), vb) {
		t.Fatalf("a stale version: %s", stale.raw)
	}
	if version("Person/a") != va {
		t.Fatal("the request that failed deleted Person/a")
	}
	ok := st.query(t, del, map[string]any{"d": []any{
		map[string]any{"_id": "Person/a", "_version": va}, map[string]any{"_id": "Person/b", "_version": vb}}}).mustOK(t)
	if string(ok.Data) != `{"_deleteDocuments":["Person/a","Person/b"]}` {
		t.Fatalf("the current versions: %s", ok.raw)
	}
	for _, q := range []string{
		`mutation { _deleteDocuments(ids: ["Person/a"], documents: [{_id: "Person/a", _version: "x"}]) }`,
		`mutation { _deleteDocuments }`,
	} {
		if res := st.query(t, q, nil); len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != "BAD_USER_INPUT" ||
			!strings.Contains(res.Errors[0].Message, "one of the two") {
			t.Errorf("%s: %s", q, res.raw)
		}
	}
}

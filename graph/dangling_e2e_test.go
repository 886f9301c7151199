package graph_test

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/daemontest"
)

// TestRequiredReferenceIsNullableAsRead: a write checks a reference's id
// and class, not that its document exists, so a required single
// reference may name a document that does not (it was never written, or
// was deleted since) and reads as null: its GraphQL type is nullable
// (Person, not Person!), so that the answer keeps what the schema
// promises clients typed from it; a required list of references stays
// [Person!]!, leaving such ids out. The input types keep the field
// required. Before, the type was Person! and the answer null.
func TestRequiredReferenceIsNullableAsRead(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "refs", `type Person { name: String friend: Person! pals: [Person!]! }`)
	insertDocs(t, d, "refs", `{"@type":"Person","@id":"c","name":"C","friend":"Person/zzz","pals":["Person/zzz","Person/c"]}`)
	path := "/api/graphql/admin/refs"
	res := gql(t, d, path, `{ Person { name friend { name } pals { name } } }`, nil).mustOK(t)
	if got, want := string(res.Data), `{"Person":[{"name":"C","friend":null,"pals":[{"name":"C"}]}]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	res = gql(t, d, path, `{ __type(name: "Person") { fields { name type { kind ofType { kind ofType { kind } } } } }
		input: __type(name: "Person_Input") { inputFields { name type { kind } } } }`, nil).mustOK(t)
	for _, want := range []string{
		`{"name":"friend","type":{"kind":"OBJECT","ofType":null}}`,
		`{"name":"pals","type":{"kind":"NON_NULL","ofType":{"kind":"LIST","ofType":{"kind":"NON_NULL"}}}}`,
		`{"name":"friend","type":{"kind":"NON_NULL"}}`,
	} {
		if !strings.Contains(string(res.Data), want) {
			t.Errorf("introspection %s lacks %s", res.Data, want)
		}
	}
}

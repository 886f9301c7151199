package graph_test

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/internal/engine"
)

// TestUpdateSetsJSONWhole: X_update sets a JSON field as given (null
// members and fewer keys included), at the top and inside a subdocument,
// which is merged; REST's merge patch (an untyped engine.Patch) merges a
// JSON field's object as RFC 7396 says. X_update merged it too and
// dropped its null members: {"a":1} patched with {"c":3,"nul":null}
// became {"a":1,"c":3}.
func TestUpdateSetsJSONWhole(t *testing.T) {
	t.Parallel()
	st := newStack(t, `type Item { name: String! meta: JSON home: Address }
type Address @subdocument { city: String! zip: String extra: JSON }`)
	st.insert(t, `[{"@type":"Item","@id":"i1","name":"n","meta":{"a":1,"keep":{"x":1}},
		"home":{"@type":"Address","city":"Oslo","zip":"0150","extra":{"p":1,"q":2}}}]`)
	st.query(t, `mutation($m: JSON, $e: JSON) { Item_update(documents: [{_id: "i1", meta: $m, home: {city: "Bergen", extra: $e}}]) }`,
		map[string]any{"m": map[string]any{"c": 3, "nul": nil}, "e": map[string]any{"p": 9}}).mustOK(t)
	got := st.query(t, `{ Item { meta home { city zip extra } } }`, nil).mustOK(t)
	if want := `{"Item":[{"meta":{"c":3,"nul":null},"home":{"city":"Bergen","zip":"0150","extra":{"p":9}}}]}`; string(got.Data) != want {
		t.Errorf("after X_update: %s, want %s", got.Data, want)
	}

	// REST's PATCH: RFC 7396 over the whole document, JSON values too.
	if _, err := st.eng.Patch(context.Background(), st.admin, "admin", "db", []engine.Patch{{ID: "Item/i1",
		Fields: map[string]any{"meta": map[string]any{"d": 4, "c": nil}}}}, engine.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	got = st.query(t, `{ Item { meta } }`, nil).mustOK(t)
	if want := `{"Item":[{"meta":{"d":4,"nul":null}}]}`; string(got.Data) != want {
		t.Errorf("after a merge patch: %s, want %s", got.Data, want)
	}
}

package graph_test

import (
	"encoding/json"
	"testing"

	"github.com/sluice-dev/sluice/internal/daemontest"
)

// TestIntrospectionDirectiveLocations: every directive location in the
// introspection is one graphql-js 16 and graphql-core 3.2 know (the
// October 2021 specification's). graphql-core refuses the whole schema for
// one it does not know, as it did for @deprecated on DIRECTIVE_DEFINITION.
func TestIntrospectionDirectiveLocations(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "intro", testSDL)
	known := map[string]bool{}
	for _, l := range []string{"QUERY", "MUTATION", "SUBSCRIPTION", "FIELD", "FRAGMENT_DEFINITION", "FRAGMENT_SPREAD",
		"INLINE_FRAGMENT", "VARIABLE_DEFINITION", "SCHEMA", "SCALAR", "OBJECT", "FIELD_DEFINITION", "ARGUMENT_DEFINITION",
		"INTERFACE", "UNION", "ENUM", "ENUM_VALUE", "INPUT_OBJECT", "INPUT_FIELD_DEFINITION"} {
		known[l] = true
	}
	for _, path := range []string{"/api/graphql/admin/intro", "/api/graphql/_system"} {
		res := gql(t, d, path, `{ __schema { directives { name locations } } }`, nil).mustOK(t)
		var data struct {
			Schema struct {
				Directives []struct {
					Name      string
					Locations []string
				}
			} `json:"__schema"`
		}
		if err := json.Unmarshal(res.Data, &data); err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, dir := range data.Schema.Directives {
			got[dir.Name] = dir.Locations
			for _, l := range dir.Locations {
				if !known[l] {
					t.Errorf("%s: @%s on %s, which graphql-js 16 does not know", path, dir.Name, l)
				}
			}
		}
		want := `["FIELD_DEFINITION","ARGUMENT_DEFINITION","INPUT_FIELD_DEFINITION","ENUM_VALUE"]`
		if b, _ := json.Marshal(got["deprecated"]); string(b) != want {
			t.Errorf("%s: @deprecated on %s, want %s", path, b, want)
		}
	}
}

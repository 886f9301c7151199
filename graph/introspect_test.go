package graph_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/graph"
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

// TestIntrospectionFieldsOfEachKind: the __Type fields a kind does not
// have are null, as the spec has them (not empty lists), and an
// interface's possibleTypes are object types only, never an interface
// that implements it.
func TestIntrospectionFieldsOfEachKind(t *testing.T) {
	t.Parallel()
	st := newStack(t, `interface Named { name: String } interface Pet implements Named { name: String } type Dog implements Pet & Named { name: String }`)
	const sel = `{ kind fields { name } interfaces { name } possibleTypes { name } enumValues { name } inputFields { name } }`
	for _, c := range []struct{ typ, want string }{
		{"String", `{"kind":"SCALAR","fields":null,"interfaces":null,"possibleTypes":null,"enumValues":null,"inputFields":null}`},
		{"_Order", `{"kind":"ENUM","fields":null,"interfaces":null,"possibleTypes":null,"enumValues":[{"name":"ASC"},{"name":"DESC"}],"inputFields":null}`},
		{"Named", `{"kind":"INTERFACE","fields":[{"name":"_id"},{"name":"_type"},{"name":"_version"},{"name":"_CommitMetadata"},{"name":"name"}],"interfaces":[],"possibleTypes":[{"name":"Dog"}],"enumValues":null,"inputFields":null}`},
		{"Dog", `{"kind":"OBJECT","fields":[{"name":"_id"},{"name":"_type"},{"name":"_version"},{"name":"_CommitMetadata"},{"name":"name"}],"interfaces":[{"name":"Named"},{"name":"Pet"}],"possibleTypes":null,"enumValues":null,"inputFields":null}`},
	} {
		res := st.query(t, `{ __type(name: "`+c.typ+`") `+sel+` }`, nil)
		if want := `{"data":{"__type":` + c.want + `}}`; res.raw != want {
			t.Errorf("%s:\n got %s\nwant %s", c.typ, res.raw, want)
		}
	}
}

// TestIntrospectionStopsAtResponseBound: introspection stops resolving
// once its answer is past graphql_max_response_bytes, as document fields
// do, visiting at most one object per byte of the bound. It went on to
// the end, writing nothing more: with aliases an answer grows as the
// number of types times the square of the fields a type has, so a query
// within every document limit on a schema of a few dozen classes took
// seconds of CPU to refuse.
func TestIntrospectionStopsAtResponseBound(t *testing.T) {
	t.Parallel()
	var sdl strings.Builder
	for i := range 20 {
		fmt.Fprintf(&sdl, "type T%d {", i)
		for j := range 20 {
			fmt.Fprintf(&sdl, " r%d: T%d", j, j)
		}
		sdl.WriteString(" }\n")
	}
	const maxBytes = 256
	for _, q := range []string{
		`{ __schema { types { fields { type { fields { name } } } } } }`,
		`{ __schema { types { inputFields { type { inputFields { type { name } } } } } } }`,
		`{ __type(name: "T0") { fields { type { fields { type { name } } } } } }`,
	} {
		data, errs, steps, err := graph.IntrospectionSteps(sdl.String(), q, maxBytes)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if data != nil || len(errs) != 1 || errs[0].Extensions["limit"] != "graphql_max_response_bytes" {
			t.Errorf("%s: data %.100s, errors %v; want the error of graphql_max_response_bytes alone", q, data, errs)
		}
		if steps > maxBytes {
			t.Errorf("%s: %d objects visited, more than the %d bytes the answer may hold", q, steps, maxBytes)
		}
	}
}

package graph

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// FuzzVariableErrors checks that the message of a variable that does not
// coerce (by gqlparser, or by strictVariables after it) never panics,
// names the variable and holds no Go kind, whatever JSON a client sends
// as variables.
func FuzzVariableErrors(f *testing.F) {
	s, err := schema.Parse(`type P { name: String! tags: [String!] home: A c: C } type A @subdocument { city: String n: Int } enum C { X Y }`)
	if err != nil {
		f.Fatal(err)
	}
	gql, err := BuildSchema(s, sluice.RoleAdmin)
	if err != nil {
		f.Fatal(err)
	}
	doc, perr := parser.ParseQuery(&ast.Source{Input: `mutation($d: [P_Input!]!, $s: String, $i: Int!, $f: Float, $b: Boolean, $c: C, $l: [[Int!]]) { P_insert(documents: $d) }`})
	if perr != nil {
		f.Fatal(perr)
	}
	// Validation resolves the variables' types; the ones left unused
	// are an error of no matter here.
	validator.ValidateWithRules(gql, doc, nil)
	op := doc.Operations[0]
	for _, seed := range []string{
		`{"d":[{"name":"a"}],"i":1}`,
		`{"d":[{"name":{}}],"i":1}`,
		`{"d":[{"home":{"city":[1],"n":"x"}}],"i":1}`,
		`{"d":{"name":"a","nope":1},"i":1}`,
		`{"d":[],"i":1e400,"f":1e400}`,
		`{"d":[],"i":1,"l":[[1,null],2,"x"]}`,
		`{"d":[],"i":1,"c":"Z","s":[]}`,
		`{"d":[{"name":"a","home":{"n":"3"}}],"i":"1","f":"2.5","c":"x"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		var vars map[string]any
		if dec.Decode(&vars) != nil {
			return
		}
		_, err := validator.VariableValues(gql, op, vars)
		var msg string
		switch e, ok := err.(*gqlerror.Error); {
		case err == nil:
			// What gqlparser takes, the strict check judges again, on
			// the values as gqlparser left them.
			se := strictVariables(gql, op, vars)
			if se == nil {
				return
			}
			msg = se.Message
		case !ok || len(e.Path) < 2 || e.Path[0] != ast.PathName("variable"):
			return
		default:
			msg = variableError(gql, op, vars, e).Message
		}
		if !strings.HasPrefix(msg, "variable $") {
			t.Fatalf("%s: %q", raw, msg)
		}
		for _, kind := range []string{" map", " slice", " float64", " int64", "json.Number"} {
			if strings.Contains(msg, kind) {
				t.Fatalf("%s: %q names a Go kind", raw, msg)
			}
		}
	})
}

package graph_test

import (
	"strings"
	"testing"
)

// TestVariableErrors: a variable whose value does not coerce to its type
// is refused naming the variable, the place in its value, the type it
// wants and what it got, in words (no Go kinds such as "map"), before
// anything runs.
func TestVariableErrors(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	for _, c := range []struct {
		query string
		vars  map[string]any
		want  string
	}{
		{`query($n: String) { Person(filter: {name: {eq: $n}}) { name } }`, map[string]any{"n": map[string]any{"a": 1}},
			`variable $n: expected String, got an object`},
		{`query($n: String!) { Person(filter: {name: {eq: $n}}) { name } }`, map[string]any{"n": nil},
			`variable $n: expected String!, got null`},
		{`query($n: String!) { Person(filter: {name: {eq: $n}}) { name } }`, nil,
			`variable $n: a value of type String! is required, and none was given`},
		{`query($l: Int) { Person(limit: $l) { name } }`, map[string]any{"l": 1.5},
			`variable $l: expected Int, got number 1.5`},
		{`query($l: Int) { Person(limit: $l) { name } }`, map[string]any{"l": []any{1}},
			`variable $l: expected Int, got a list`},
		{`query($ok: Boolean) { Person(filter: {active: {eq: $ok}}) { name } }`, map[string]any{"ok": "yes"},
			`variable $ok: expected Boolean, got string "yes"`},
		{`query($c: Color) { Person(filter: {favorite: {eq: $c}}) { name } }`, map[string]any{"c": "PURPLE"},
			`variable $c: expected Color (one of RED, GREEN, BLUE), got string "PURPLE"`},
		{`mutation($d: [Person_Input!]!) { Person_insert(documents: $d) }`, map[string]any{"d": []any{map[string]any{"name": "A", "home": map[string]any{"city": map[string]any{}}}}},
			`variable $d[0].home.city: expected String, got an object`},
		{`mutation($d: [Person_Input!]!) { Person_insert(documents: $d) }`, map[string]any{"d": []any{map[string]any{"name": "A", "nope": 1}}},
			`variable $d[0].nope: Person_Input has no field nope`},
		{`mutation($d: [Person_Input!]!) { Person_insert(documents: $d) }`, map[string]any{"d": []any{map[string]any{"age": 3}}},
			`variable $d[0].name: a value of type String! is required, and none was given`},
		{`mutation($d: [Person_Input!]!) { Person_insert(documents: $d) }`, map[string]any{"d": []any{map[string]any{"name": strings.Repeat("é", 30), "tags": true}}},
			`variable $d[0].tags[0]: expected String!, got boolean true`}, // one value is a list of one
		{`query($l: Int) { Person(limit: $l) { name } }`, map[string]any{"l": "x" + strings.Repeat("é", 30)},
			`variable $l: expected Int, got string "x` + strings.Repeat("é", 19) + `"…`},
		{`query($n: String) { Person(filter: {name: {eq: $n}}) { name } }`, map[string]any{"n": []any{"a"}},
			`variable $n: expected String, got a list`},
	} {
		res := st.query(t, c.query, c.vars)
		if len(res.Errors) != 1 || res.Errors[0].Message != c.want || res.Errors[0].Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("%s with %v:\n got %s\nwant %q", c.query, c.vars, res.raw, c.want)
		}
	}
}

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
		// What gqlparser let through: strings for numbers, enum values in
		// another case, custom scalars.
		{`query($a: Int) { Person(filter: {age: {ge: $a}}) { name } }`, map[string]any{"a": "30"},
			`variable $a: expected Int, got string "30"`},
		{`query($s: Float) { Person(filter: {score: {ge: $s}}) { name } }`, map[string]any{"s": "1.5"},
			`variable $s: expected Float, got string "1.5"`},
		{`query($o: _Order) { Person(orderBy: {name: $o}) { name } }`, map[string]any{"o": "asc"},
			`variable $o: expected _Order (one of ASC, DESC), got string "asc"`},
		{`query($f: Person_Filter) { Person(filter: $f) { name } }`, map[string]any{"f": map[string]any{"_or": []any{map[string]any{"favorite": map[string]any{"eq": "red"}}}}},
			`variable $f._or[0].favorite.eq: expected Color (one of RED, GREEN, BLUE), got string "red"`},
		{`query($t: DateTime) { Person(filter: {born: {lt: $t}}) { name } }`, map[string]any{"t": "yesterday"},
			`variable $t: expected DateTime (RFC 3339, such as 2024-08-01T16:00:00Z), got string "yesterday"`},
		{`query($t: DateTime) { Person(filter: {born: {lt: $t}}) { name } }`, map[string]any{"t": "2024-01-01T00:00:00.123456789Z"},
			`variable $t: string "2024-01-01T00:00:00.123456789Z" is more precise than a microsecond, the most a DateTime holds`},
		{`query($w: BigInt) { Person(filter: {wealth: {ge: $w}}) { name } }`, map[string]any{"w": map[string]any{}},
			`variable $w: expected BigInt (a whole number or a string of decimal digits), got an object`},
		{`query($w: BigInt) { Person(filter: {wealth: {ge: $w}}) { name } }`, map[string]any{"w": "12x"},
			`variable $w: expected BigInt (a whole number or a string of decimal digits), got string "12x"`},
		{`query($i: ID) { Person(id: $i) { name } }`, map[string]any{"i": 1.5},
			`variable $i: expected ID (a string or a whole number), got number 1.5`},
		// A number for a String: gqlparser takes it (a JSON number is a
		// string to it), and what read the argument as a string took it for
		// absent: asOf read the present, author and message were empty.
		{`query($n: String) { Person(filter: {name: {eq: $n}}) { name } }`, map[string]any{"n": 3},
			`variable $n: expected String, got number 3`},
		{`query($at: String) { Person(asOf: $at) { name } }`, map[string]any{"at": 3},
			`variable $at: expected String, got number 3`},
		{`query($at: String!) { Person_aggregate(asOf: $at) { count } }`, map[string]any{"at": 1e3},
			`variable $at: expected String!, got number 1000`},
		{`mutation($a: String) { Person_insert(documents: [{name: "A"}], author: $a) }`, map[string]any{"a": 42},
			`variable $a: expected String, got number 42`},
		{`mutation($d: [Person_Input!]!) { Person_insert(documents: $d) }`, map[string]any{"d": []any{map[string]any{"name": "A", "tags": []any{"x", 2}}}},
			`variable $d[0].tags[1]: expected String!, got number 2`},
	} {
		res := st.query(t, c.query, c.vars)
		if len(res.Errors) != 1 || res.Errors[0].Message != c.want || res.Errors[0].Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("%s with %v:\n got %s\nwant %q", c.query, c.vars, res.raw, c.want)
		}
	}
	// What fits runs: numbers for numbers, a BigInt as digits or a number,
	// an ID as a whole number, an enum value as written.
	for _, c := range []struct {
		query string
		vars  map[string]any
	}{
		{`query($a: Int, $s: Float) { Person(filter: {age: {ge: $a}, score: {ge: $s}}) { name } }`, map[string]any{"a": 30, "s": 1}},
		{`query($w: BigInt, $v: BigInt) { Person(filter: {wealth: {ge: $w, le: $v}}) { name } }`, map[string]any{"w": "-12345678901234567890", "v": 7}},
		{`query($i: ID, $o: _Order, $t: DateTime) { Person(id: $i, orderBy: {name: $o}, filter: {born: {lt: $t}}) { name } }`, map[string]any{"i": 4, "o": "DESC", "t": "2024-01-01T00:00:00.123456+02:00"}},
	} {
		if res := st.query(t, c.query, c.vars); len(res.Errors) != 0 {
			t.Errorf("%s with %v: %s", c.query, c.vars, res.raw)
		}
	}
}

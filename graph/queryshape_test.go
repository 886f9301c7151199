package graph_test

import (
	"testing"
)

// TestQueriesOfOneShapeRun: queries that differ only in their strings
// (the second and later of a shape skip the validation rules) still run
// as themselves: literal ids, a variable's default, an enum filter, and a
// fragment, each answered for its own values.
func TestQueriesOfOneShapeRun(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, `[{"@type":"Person","@id":"a","name":"Ann","age":30,"favorite":"RED"},
		{"@type":"Person","@id":"b","name":"Bob","age":40,"favorite":"BLUE"}]`)
	for _, tc := range []struct{ query, want string }{
		{`{ Person(id: "Person/a") { _id name } }`, `{"Person":[{"_id":"Person/a","name":"Ann"}]}`},
		{`{ Person(id: "Person/b") { _id name } }`, `{"Person":[{"_id":"Person/b","name":"Bob"}]}`},
		{`query($n: String = "Ann") { Person(filter: {name: {eq: $n}}) { age } }`, `{"Person":[{"age":30}]}`},
		{`query($n: String = "Bob") { Person(filter: {name: {eq: $n}}) { age } }`, `{"Person":[{"age":40}]}`},
		{`{ Person(id: "Person/a") { ...F } } fragment F on Person { favorite }`, `{"Person":[{"favorite":"RED"}]}`},
		{`{ Person(id: "Person/b") { ...F } } fragment F on Person { favorite }`, `{"Person":[{"favorite":"BLUE"}]}`},
		{`{ x: Person(id: "Person/a") { name } y: Person(id: "Person/b") { name } }`, `{"x":[{"name":"Ann"}],"y":[{"name":"Bob"}]}`},
		{`{ x: Person(id: "Person/b") { name } y: Person(id: "Person/a") { name } }`, `{"x":[{"name":"Bob"}],"y":[{"name":"Ann"}]}`},
	} {
		got := st.query(t, tc.query, nil).mustOK(t)
		if string(got.Data) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.query, got.Data, tc.want)
		}
	}
}

package graph_test

import (
	"strings"
	"testing"
)

// TestReadIDsAreKeysOfTheClass: a read takes an id as a typed write does.
// A key alone is a key of the class read (Person(id: "carol") reads
// Person/carol, as Person_insert took "carol" for it), in id, ids, a
// filter's _id and _ids, through a reference's filter and in a backlink's
// filter; an id of a subclass reads that document through its parent.
// An id that names no document the read could answer (another class's,
// a class without documents of its own, a key of an interface) is
// refused, BAD_USER_INPUT naming the argument and the id: all of them
// answered [] as if the document did not exist.
func TestReadIDsAreKeysOfTheClass(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, people)
	st.insert(t, `[{"@type":"Dog","@id":"rex","name":"Rex","owner":"Person/alice"},
{"@type":"Cat","@id":"tom","name":"Tom"},{"@type":"Pet","@id":"gen","name":"Gen"}]`)
	for _, c := range []struct{ query, want string }{
		{`{ Person(id: "carol") { _id } }`, `{"Person":[{"_id":"Person/carol"}]}`},
		{`query($i: ID) { Person(id: $i) { _id } }`, `{"Person":[{"_id":"Person/carol"}]}`},
		{`{ Person(ids: ["carol", "Person/bob"]) { _id } }`, `{"Person":[{"_id":"Person/bob"},{"_id":"Person/carol"}]}`},
		{`{ Person(filter: {_id: "carol"}) { _id } }`, `{"Person":[{"_id":"Person/carol"}]}`},
		{`{ Person(filter: {_not: {_ids: ["alice", "bob", "carol"]}}) { _id } }`, `{"Person":[{"_id":"Person/dave"},{"_id":"Person/eve"}]}`},
		{`{ Person_aggregate(filter: {_ids: ["carol", "eve"]}) { count } }`, `{"Person_aggregate":{"count":2}}`},
		{`{ Dog(filter: {owner: {_id: "alice"}}) { _id } }`, `{"Dog":[{"_id":"Dog/rex"}]}`},
		{`{ Person(id: "alice") { _owner_of_Dog(filter: {_ids: ["rex"]}) { _id } } }`, `{"Person":[{"_owner_of_Dog":[{"_id":"Dog/rex"}]}]}`},
		// A subclass's id, through an interface and a concrete parent.
		{`{ Animal(id: "Dog/rex") { _id } }`, `{"Animal":[{"_id":"Dog/rex"}]}`},
		{`{ Animal(filter: {_ids: ["Dog/rex", "Cat/tom"]}) { _id } }`, `{"Animal":[{"_id":"Cat/tom"},{"_id":"Dog/rex"}]}`},
		{`{ Pet(ids: ["gen", "Cat/tom"]) { _id } }`, `{"Pet":[{"_id":"Cat/tom"},{"_id":"Pet/gen"}]}`},
		// The key of a concrete parent is the parent's own document's.
		{`{ Pet(id: "tom") { _id } }`, `{"Pet":[]}`},
	} {
		var vars map[string]any
		if strings.Contains(c.query, "$i") {
			vars = map[string]any{"i": "carol"}
		}
		res := st.query(t, c.query, vars)
		if len(res.Errors) > 0 || string(res.Data) != c.want {
			t.Errorf("%s: %s, want %s", c.query, res.raw, c.want)
		}
	}
	for _, c := range []struct{ query, want string }{
		{`{ Person(id: "Dog/rex") { _id } }`, `Person: id: "Dog/rex" is not an id of Person or of a class inheriting from it`},
		{`{ Person(ids: ["bob", "Dog/rex"]) { _id } }`, `Person: ids[1]: "Dog/rex" is not an id of Person`},
		{`{ Person(ids: ["Nope/a"]) { _id } }`, `Person: ids[0]: "Nope/a" is not an id of Person`},
		{`{ Person(id: "") { _id } }`, `Person: id: "" is no id: want <Class>/<key>, or the key of a Person`},
		{`{ Person(id: "Person/") { _id } }`, `Person: id: "Person/" is no id`},
		{`{ Person(filter: {_id: "Dog/rex"}) { _id } }`, `filter._id: "Dog/rex" is not an id of Person`},
		{`{ Person(filter: {_or: [{_ids: ["bob", "Cat/tom"]}]}) { _id } }`, `filter._or[0]._ids[1]: "Cat/tom" is not an id of Person`},
		{`{ Person_aggregate(filter: {_id: "Dog/rex"}) { count } }`, `filter._id: "Dog/rex" is not an id of Person`},
		{`{ Dog(filter: {owner: {_id: "Dog/rex"}}) { _id } }`, `filter.owner._id: "Dog/rex" is not an id of Person`},
		{`{ Person(id: "alice") { _owner_of_Dog(filter: {_id: "Person/bob"}) { _id } } }`, `"Person/bob" is not an id of Dog`},
		{`{ Animal(id: "rex") { _id } }`, `Animal: id: "rex" is a key, but Animal has no documents of its own: give the id as <Class>/<key>`},
		{`{ Animal(id: "Animal/rex") { _id } }`, `Animal: id: "Animal/rex" is an id of Animal, which has no documents of its own`},
		// Text no id holds is refused before it reaches Postgres, whose
		// error (SQLSTATE 22021) named neither the argument nor the id.
		{`{ Person(id: "Person/\u0000") { _id } }`, `Person: id: "Person/\x00" holds a NUL character (\u0000), which no id can`},
		{`{ Person(ids: ["bob", "\u0000"]) { _id } }`, `Person: ids[1]: "\x00" holds a NUL character (\u0000), which no id can`},
	} {
		res := st.query(t, c.query, nil)
		if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, c.want) || res.Errors[0].Extensions["code"] != "BAD_USER_INPUT" {
			t.Errorf("%s: %s, want BAD_USER_INPUT %q", c.query, res.raw, c.want)
		}
	}
}

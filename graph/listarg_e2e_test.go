package graph_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/internal/daemontest"
)

// TestSingleValueIsAListOfOneInQueries: GraphQL lets a single value stand
// for a list of one, and gqlgen validates it so; written literally it
// arrives as the value itself, given as a variable as a typed slice
// ([]string, []map[string]any). Either way ids and the filter's _ids,
// _and and _or read it as that list: ids: "Person/bob" answered every
// Person, and the filter lists were refused as "expected a list". An
// empty ids list still matches nothing, and no ids restricts nothing.
func TestSingleValueIsAListOfOneInQueries(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, people)
	const byFilter = `query($f: Person_Filter) { Person(filter: $f) { _id } }`
	bob := map[string]any{"name": map[string]any{"eq": "Bob"}}
	for _, c := range []struct {
		name, query string
		vars        map[string]any
		want        []string
	}{
		{"ids literal", `{ Person(ids: "Person/bob") { _id } }`, nil, []string{"Person/bob"}},
		{"ids variable", `query($i: [ID!]) { Person(ids: $i) { _id } }`, map[string]any{"i": "Person/bob"}, []string{"Person/bob"}},
		{"ids variable of [ID!]!", `query($i: [ID!]!) { Person(ids: $i) { _id } }`, map[string]any{"i": "Person/carol"}, []string{"Person/carol"}},
		{"ids empty literal", `{ Person(ids: []) { _id } }`, nil, []string{}},
		{"ids empty variable", `query($i: [ID!]) { Person(ids: $i) { _id } }`, map[string]any{"i": []any{}}, []string{}},
		{"ids null", `{ Person(ids: null) { _id } }`, nil, []string{"Person/alice", "Person/bob", "Person/carol", "Person/dave", "Person/eve"}},
		{"_ids literal", `{ Person(filter: {_ids: "Person/bob"}) { _id } }`, nil, []string{"Person/bob"}},
		{"_ids variable", byFilter, map[string]any{"f": map[string]any{"_ids": "Person/bob"}}, []string{"Person/bob"}},
		{"_and literal", `{ Person(filter: {_and: {name: {eq: "Bob"}}}) { _id } }`, nil, []string{"Person/bob"}},
		{"_and variable", byFilter, map[string]any{"f": map[string]any{"_and": bob}}, []string{"Person/bob"}},
		{"_or literal", `{ Person(filter: {_or: {name: {eq: "Bob"}}}) { _id } }`, nil, []string{"Person/bob"}},
		{"_or variable", byFilter, map[string]any{"f": map[string]any{"_or": bob}}, []string{"Person/bob"}},
		{"aggregate filter", `{ Person_aggregate(filter: {_ids: "Person/bob"}) { count } }`, nil, nil},
	} {
		res := st.query(t, c.query, c.vars)
		if len(res.Errors) > 0 {
			t.Errorf("%s: %s", c.name, res.raw)
			continue
		}
		if c.want == nil {
			if got, want := string(res.Data), `{"Person_aggregate":{"count":1}}`; got != want {
				t.Errorf("%s: got %s, want %s", c.name, got, want)
			}
			continue
		}
		if got := res.ids(t, "Person"); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLiveQueryWithASingleID: a live query's ids given a single id is
// that id's result; it was every document's.
func TestLiveQueryWithASingleID(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "people", testSDL)
	insertDocs(t, d, "people", people)
	path := "/api/graphql/admin/people"
	for _, c := range []struct{ name, body string }{
		{"literal", `{"query":"subscription { Person(ids: \"Person/bob\") { _id } }"}`},
		{"variable", `{"query":"subscription($i: [ID!]) { Person(ids: $i) { _id } }","variables":{"i":"Person/bob"}}`},
	} {
		s := d.MustOpenStream(t, daemontest.Admin(), daemontest.StreamRequest{
			Method: http.MethodPost, Path: path, Header: []string{"Accept", "text/event-stream"}, Body: c.body,
		})
		if f := s.Next(); f.String() != ": connected" {
			t.Fatalf("%s: first frame %q", c.name, f)
		}
		var res gqlResult
		if err := json.Unmarshal([]byte(s.Event().Field("data")), &res); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, want := string(res.Data), `{"Person":[{"_id":"Person/bob"}]}`; got != want {
			t.Errorf("%s: got %s, want %s", c.name, got, want)
		}
		s.Close()
	}
}

// TestIntegerIDs: an ID given as an integer stands for its digits, as
// GraphQL's ID takes it ("4" and 4 alike), in id, ids, a filter's _id
// and _ids (literals and variables) and a mutation's _id. Person(id: 4)
// answered every person (the id was not a string, and was dropped); 4,
// as "4", is a key of the class read (a read takes an id as a typed
// write does), so it names Person/4.
func TestIntegerIDs(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, `[{"@type":"Person","@id":"4","name":"Four"},{"@type":"Person","@id":"5","name":"Five"}]`)
	for _, c := range []struct {
		name, query string
		vars        map[string]any
	}{
		{"id literal", `{ Person(id: 4) { _id } }`, nil},
		{"id variable", `query($i: ID) { Person(id: $i) { _id } }`, map[string]any{"i": 4}},
		{"ids literal", `{ Person(ids: [4]) { _id } }`, nil},
		{"ids variable", `query($i: [ID!]) { Person(ids: $i) { _id } }`, map[string]any{"i": []any{4}}},
		{"_id literal", `{ Person(filter: {_id: 4}) { _id } }`, nil},
		{"_ids variable", `query($f: Person_Filter) { Person(filter: $f) { _id } }`, map[string]any{"f": map[string]any{"_ids": []any{4}}}},
	} {
		res := st.query(t, c.query, c.vars)
		if got := string(res.Data); len(res.Errors) > 0 || got != `{"Person":[{"_id":"Person/4"}]}` {
			t.Errorf("%s: %s, want Person/4 (as for \"4\")", c.name, res.raw)
		}
	}
	if res := st.query(t, `{ Person(ids: ["Person/4", 5]) { _id } }`, nil).mustOK(t); string(res.Data) != `{"Person":[{"_id":"Person/4"},{"_id":"Person/5"}]}` {
		t.Errorf("ids of a string and an integer: %s", res.Data)
	}
	if res := st.query(t, `{ Person(id: 4.5) { _id } }`, nil); len(res.Errors) == 0 {
		t.Errorf("a float for an ID: %s, want an error", res.raw)
	}
	st.query(t, `mutation { Person_update(documents: [{_id: 5, name: "Cinq"}]) }`, nil).mustOK(t)
	if res := st.query(t, `{ Person(id: "Person/5") { name } }`, nil).mustOK(t); string(res.Data) != `{"Person":[{"name":"Cinq"}]}` {
		t.Errorf("after the update of 5: %s", res.Data)
	}
}

// TestIntegerIDsInFieldsAndFilters: an integer given for an ID field or a
// reference, in an input document, a patch or a filter, stands for its
// digits as an ID argument's does (they were refused: "expected an ID").
func TestIntegerIDsInFieldsAndFilters(t *testing.T) {
	t.Parallel()
	st := newStack(t, `type Tag { code: ID label: String }
type Item { name: String tag: Tag tags: [Tag!] code: ID }`)
	st.insert(t, `[{"@type":"Tag","@id":"7","code":"7","label":"seven"}]`)
	st.query(t, `mutation { Item_insert(documents: [{_id: "i", name: "I", tag: "Tag/7", tags: ["Tag/7"], code: 12}]) }`, nil).mustOK(t)
	st.query(t, `mutation($c: ID) { Item_update(documents: [{_id: "i", code: $c}]) }`, map[string]any{"c": 13}).mustOK(t)
	for _, q := range []string{
		`{ Item(filter: {code: {eq: 13}}) { _id code } }`,
		`{ Item(filter: {tag: {code: {eq: 7}}}) { _id code } }`,
	} {
		if res := st.query(t, q, nil).mustOK(t); string(res.Data) != `{"Item":[{"_id":"Item/i","code":"13"}]}` {
			t.Errorf("%s: %s", q, res.Data)
		}
	}
}

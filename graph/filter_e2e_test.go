package graph_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/filter"
)

const people = `[
 {"@type":"Person","@id":"alice","name":"Alice","age":31,"score":1.5,"born":"1990-01-01T00:00:00Z","wealth":"100000000000000000000","active":true,
  "friends":["Person/bob"],"home":{"city":"Oslo","street":"Main"},"favorite":"RED","tags":["a","b"],"addresses":[{"city":"Oslo"},{"city":"Bergen"}]},
 {"@type":"Person","@id":"bob","name":"Bob","age":42,"score":2.25,"born":"1980-06-15T12:00:00Z","wealth":"5","active":false,
  "friends":["Person/alice","Person/carol"],"favorite":"GREEN","tags":["b"]},
 {"@type":"Person","@id":"carol","name":"Carol","age":30,"active":true,"tags":[],"home":{"city":"Bergen"}},
 {"@type":"Person","@id":"dave","name":"dave","friends":[]},
 {"@type":"Person","@id":"eve","name":"Éve","age":40,"favorite":"BLUE","friends":["Person/dave"]}
]`

// TestFilters runs every operator alone and combined through SQL (a
// query) and through filter.Match (as subscriptions will), and checks both
// give the expected documents.
func TestFilters(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, people)
	cases := []struct {
		name, filter string
		want         []string
	}{
		{"eq", `{"name":{"eq":"Alice"}}`, []string{"alice"}},
		{"ne", `{"name":{"ne":"Alice"}}`, []string{"bob", "carol", "dave", "eve"}},
		{"lt", `{"age":{"lt":31}}`, []string{"carol"}},
		{"le", `{"age":{"le":31}}`, []string{"alice", "carol"}},
		{"gt", `{"age":{"gt":40}}`, []string{"bob"}},
		{"ge", `{"age":{"ge":40}}`, []string{"bob", "eve"}},
		{"range", `{"age":{"ge":30,"le":40}}`, []string{"alice", "carol", "eve"}},
		{"ne absent", `{"favorite":{"ne":"RED"}}`, []string{"bob", "eve"}},
		{"regex", `{"name":{"regex":"^[A-C]"}}`, []string{"alice", "bob", "carol"}},
		{"startsWith", `{"name":{"startsWith":"Ca"}}`, []string{"carol"}},
		{"startsWith several bytes", `{"name":{"startsWith":"\u00c9"}}`, []string{"eve"}},
		{"startsWith the last character", `{"name":{"startsWith":"\udbff\udfff"}}`, nil},
		{"startsWith nothing", `{"name":{"startsWith":""}}`, []string{"alice", "bob", "carol", "dave", "eve"}},
		{"not startsWith", `{"_not":{"name":{"startsWith":"Ca"}}}`, []string{"alice", "bob", "dave", "eve"}},
		{"not ne absent", `{"_not":{"favorite":{"ne":"RED"}}}`, []string{"alice", "carol", "dave"}},
		{"absent or not", `{"_or":[{"favorite":{"eq":"RED"}},{"_not":{"favorite":{"eq":"RED"}}}]}`, []string{"alice", "bob", "carol", "dave", "eve"}},
		{"not of or", `{"_not":{"_or":[{"age":{"lt":31}},{"favorite":{"eq":"GREEN"}}]}}`, []string{"alice", "dave", "eve"}},
		{"bytewise", `{"name":{"lt":"a"}}`, []string{"alice", "bob", "carol"}},
		{"float", `{"score":{"gt":2}}`, []string{"bob"}},
		{"float eq", `{"score":{"eq":1.5}}`, []string{"alice"}},
		{"datetime", `{"born":{"lt":"1985-01-01T02:00:00+02:00"}}`, []string{"bob"}},
		{"bigint", `{"wealth":{"gt":"1000"}}`, []string{"alice"}},
		{"boolean", `{"active":{"eq":true}}`, []string{"alice", "carol"}},
		{"boolean ne", `{"active":{"ne":true}}`, []string{"bob"}},
		{"enum", `{"favorite":{"eq":"RED"}}`, []string{"alice"}},
		{"enum order", `{"favorite":{"gt":"GREEN"}}`, []string{"alice"}},
		{"someHave scalar", `{"tags":{"someHave":{"eq":"b"}}}`, []string{"alice", "bob"}},
		{"allHave scalar", `{"tags":{"allHave":{"eq":"b"}}}`, []string{"bob", "carol", "dave", "eve"}},
		{"someHave ref", `{"friends":{"someHave":{"name":{"eq":"Carol"}}}}`, []string{"bob"}},
		{"allHave ref", `{"friends":{"allHave":{"age":{"gt":35}}}}`, []string{"alice", "carol", "dave"}},
		{"some and all", `{"friends":{"someHave":{"age":{"gt":35}},"allHave":{"age":{"gt":35}}}}`, []string{"alice"}},
		{"nested refs", `{"friends":{"someHave":{"friends":{"someHave":{"name":{"eq":"Carol"}}}}}}`, []string{"alice"}},
		{"subdocument", `{"home":{"city":{"eq":"Oslo"}}}`, []string{"alice"}},
		{"subdocument list", `{"addresses":{"someHave":{"city":{"eq":"Bergen"}}}}`, []string{"alice"}},
		{"not", `{"_not":{"age":{"gt":35}}}`, []string{"alice", "carol", "dave"}},
		{"or", `{"_or":[{"name":{"eq":"Alice"}},{"age":{"ge":42}}]}`, []string{"alice", "bob"}},
		{"and", `{"_and":[{"age":{"gt":30}},{"age":{"lt":41}}]}`, []string{"alice", "eve"}},
		{"id", `{"_id":"Person/bob"}`, []string{"bob"}},
		{"ids", `{"_ids":["Person/bob","Person/eve"]}`, []string{"bob", "eve"}},
		{"keys and", `{"age":{"gt":30},"active":{"eq":true}}`, []string{"alice"}},
		{"empty", `{}`, []string{"alice", "bob", "carol", "dave", "eve"}},
	}
	all, err := st.eng.QueryDocuments(context.Background(), mustDB(t, st), mustSchema(t, st), engine.DocQuery{Class: "Person", Classes: []string{"Person"}, Limit: -1})
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(id string) *sluice.Document {
		for _, d := range all {
			if d.Doc.ID == id {
				return d.Doc
			}
		}
		return nil
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := make([]string, len(c.want))
			for i, k := range c.want {
				want[i] = "Person/" + k
			}
			f := decodeJSON(t, c.filter)
			res := st.query(t, `query($f: Person_Filter) { Person(filter: $f) { _id } }`, map[string]any{"f": f}).mustOK(t)
			if got := res.ids(t, "Person"); !slices.Equal(got, want) {
				t.Errorf("SQL: got %v, want %v", got, want)
			}
			e, err := filter.Parse(mustSchema(t, st), "Person", f.(map[string]any))
			if err != nil {
				t.Fatal(err)
			}
			var matched []string
			for _, d := range all {
				if filter.Match(e, d.Doc, lookup) {
					matched = append(matched, d.Doc.ID)
				}
			}
			if matched == nil {
				matched = []string{}
			}
			if !slices.Equal(matched, want) {
				t.Errorf("Match: got %v, want %v", matched, want)
			}
		})
	}
}

func decodeJSON(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func mustDB(t testing.TB, st *stack) *sluice.Database {
	d, _, _, err := st.eng.GraphQLDatabase(context.Background(), st.admin, "admin", "db")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustSchema(t testing.TB, st *stack) *sluice.Schema {
	_, s, _, err := st.eng.GraphQLDatabase(context.Background(), st.admin, "admin", "db")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestQueryErrors(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, people)
	for _, c := range []struct{ name, query, code string }{
		{"bad regex", `{ Person(filter: {name: {regex: "("}}) { _id } }`, "BAD_USER_INPUT"},
		{"id and ids", `{ Person(id: "Person/bob", ids: ["Person/eve"]) { _id } }`, "BAD_USER_INPUT"},
		{"negative limit", `{ Person(limit: -1) { _id } }`, "BAD_USER_INPUT"},
		{"bad commit", `{ _ChangeSet(commit: "x") { _CommitMetadata { _id } } }`, "BAD_USER_INPUT"},
		{"unknown field", `{ Person { nope } }`, "GRAPHQL_VALIDATION_FAILED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := st.query(t, c.query, nil)
			if len(res.Errors) != 1 || res.Errors[0].Extensions["code"] != c.code {
				t.Fatalf("got %s, want one error with code %s", res.raw, c.code)
			}
			if strings.Contains(res.raw, "SELECT") {
				t.Fatalf("error leaks SQL: %s", res.raw)
			}
		})
	}
}

func TestOrderingAndPaging(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, people)
	for _, c := range []struct {
		order string
		want  []string
	}{
		{``, []string{"alice", "bob", "carol", "dave", "eve"}},
		{`orderBy: {_id: DESC}`, []string{"eve", "dave", "carol", "bob", "alice"}},
		{`orderBy: {age: ASC}`, []string{"carol", "alice", "eve", "bob", "dave"}},  // nulls last
		{`orderBy: {age: DESC}`, []string{"dave", "bob", "eve", "alice", "carol"}}, // nulls first
		{`orderBy: {active: ASC, name: DESC}`, []string{"bob", "carol", "alice", "eve", "dave"}},
		{`orderBy: {name: DESC, active: ASC}`, []string{"eve", "dave", "carol", "bob", "alice"}},
	} {
		var want []string
		for _, k := range c.want {
			want = append(want, "Person/"+k)
		}
		args := ""
		if c.order != "" {
			args = "(" + c.order + ")"
		}
		got := st.query(t, `{ Person`+args+` { _id } }`, nil).mustOK(t).ids(t, "Person")
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", c.order, got, want)
		}
		// Pages of 2 concatenate to the whole list.
		var paged []string
		for off := 0; off < len(want)+2; off += 2 {
			sep := ""
			if c.order != "" {
				sep = ", "
			}
			q := `{ Person(` + c.order + sep + `limit: 2, offset: ` + itoa(off) + `) { _id } }`
			paged = append(paged, st.query(t, q, nil).mustOK(t).ids(t, "Person")...)
		}
		if !slices.Equal(paged, want) {
			t.Errorf("%s paged: got %v, want %v", c.order, paged, want)
		}
	}
	// orderBy as a variable applies in field order.
	got := st.query(t, `query($o: Person_Ordering) { Person(orderBy: $o) { _id } }`, map[string]any{"o": map[string]any{"active": "DESC", "age": "ASC"}}).mustOK(t).ids(t, "Person")
	if want := []string{"Person/carol", "Person/alice", "Person/eve", "Person/bob", "Person/dave"}; !slices.Equal(got, want) {
		t.Errorf("orderBy variable: got %v, want %v", got, want)
	}
	// The id a variable names is its last key, as the literal's would be
	// written last (first, it decided alone).
	for _, o := range []map[string]any{{"age": "DESC", "_id": "ASC"}, {"_id": "DESC", "active": "ASC"}} {
		got := st.query(t, `query($o: Person_Ordering) { Person(orderBy: $o) { _id } }`, map[string]any{"o": o}).mustOK(t).ids(t, "Person")
		literal := "{"
		for _, f := range []string{"age", "active"} {
			if d, ok := o[f]; ok {
				literal += f + ": " + d.(string) + ", "
			}
		}
		literal += "_id: " + o["_id"].(string) + "}"
		want := st.query(t, `{ Person(orderBy: `+literal+`) { _id } }`, nil).mustOK(t).ids(t, "Person")
		if !slices.Equal(got, want) || slices.Equal(want, st.query(t, `{ Person(orderBy: {_id: `+o["_id"].(string)+`}) { _id } }`, nil).mustOK(t).ids(t, "Person")) {
			t.Errorf("orderBy variable %v: got %v, want %v (as %s)", o, got, want, literal)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/daemontest"
)

// changeSetRefDocs are two commits: Bob, then Alice, whose friend he is.
// The newest commit's change set adds Alice.
var changeSetRefDocs = []string{
	`[{"@type":"Person","@id":"bob","name":"Bob","age":42}]`,
	`[{"@type":"Person","@id":"alice","name":"Alice","friends":["Person/bob"]}]`,
}

// changeSetRefCases are _ChangeSet selections whose filter follows a
// reference, each with and without an earlier field that lists the
// referenced class (which reads Bob with its selection's fields only),
// and after it, with the _id of the documents Person_added answers.
var changeSetRefCases = []struct {
	name, query string
	want        []string
}{
	{"someHave", `_ChangeSet { Person_added(filter: {friends: {someHave: {name: {eq: "Bob"}}}}) { _id } }`, []string{"Person/alice"}},
	{"_not", `_ChangeSet { Person_added(filter: {_not: {friends: {someHave: {name: {eq: "Bob"}}}}}) { _id } }`, []string{}},
}

// changeSetIDs returns the _id of the documents of data's
// _ChangeSet.Person_added.
func changeSetIDs(t *testing.T, data []byte) []string {
	t.Helper()
	var d struct {
		ChangeSet struct {
			Added []struct {
				ID string `json:"_id"`
			} `json:"Person_added"`
		} `json:"_ChangeSet"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	out := []string{}
	for _, o := range d.ChangeSet.Added {
		out = append(out, o.ID)
	}
	return out
}

// TestChangeSetFilterThroughAReferenceAfterAQuery: a _ChangeSet filter
// through a reference tests the referenced document whole, whatever an
// earlier field of the request read of it. The filter took the document
// an earlier Person field had cached with only _id: Bob's name looked
// absent, so Alice was left out (someHave) or let through (_not).
func TestChangeSetFilterThroughAReferenceAfterAQuery(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	for _, docs := range changeSetRefDocs {
		st.insert(t, docs)
	}
	for _, c := range changeSetRefCases {
		for _, order := range []struct{ name, query string }{
			{"alone", `{ ` + c.query + ` }`},
			{"after a query", `{ Person { _id } ` + c.query + ` }`},
			{"before a query", `{ ` + c.query + ` Person { _id } }`},
		} {
			res := st.query(t, order.query, nil).mustOK(t)
			if got := changeSetIDs(t, res.Data); !slices.Equal(got, c.want) {
				t.Errorf("%s, %s: Person_added %v, want %v (%s)", c.name, order.name, got, c.want, res.raw)
			}
		}
	}
}

// TestChangeSetFilterThroughAReferenceInALiveQuery: the same in a live
// query's results, whose runs read their fields as a query does.
func TestChangeSetFilterThroughAReferenceInALiveQuery(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "people", testSDL)
	for _, docs := range changeSetRefDocs {
		insertDocs(t, d, "people", docs)
	}
	for _, c := range changeSetRefCases {
		body, _ := json.Marshal(map[string]any{"query": `query @live { Person { _id } ` + c.query + ` }`})
		s := d.MustOpenStream(t, daemontest.Admin(), daemontest.StreamRequest{
			Method: http.MethodPost, Path: "/api/graphql/admin/people", Header: []string{"Accept", "text/event-stream"}, Body: string(body)})
		if f := s.Next(); f.String() != ": connected" {
			t.Fatalf("%s: first frame %q", c.name, f)
		}
		var ev struct {
			Data   json.RawMessage
			Errors []any
		}
		f := s.Event().Field("data")
		if err := json.Unmarshal([]byte(f), &ev); err != nil || len(ev.Errors) > 0 {
			t.Fatalf("%s: event %q: %v", c.name, f, err)
		}
		if got := changeSetIDs(t, ev.Data); !slices.Equal(got, c.want) {
			t.Errorf("%s: Person_added %v, want %v (%s)", c.name, got, c.want, f)
		}
		s.Close()
	}
}

// TestChangeSetDecodesEachChangeOnce: the per-class fields of a
// _ChangeSet share the commit's changes, each decoded once when a field
// first selects it, however many fields select it, in a query and in a
// subscription's event. Each field decoded the commit again: 100 aliases
// of a filter matching nothing made a request of 5 KB cost 100 decodes
// of the whole commit, counted by no limit (and a subscription's, 100 on
// every commit). The fields still answer apart: filters, subclasses and
// an operation no change has.
func TestChangeSetDecodesEachChangeOnce(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	const people, aliases = 60, 20
	docs := []string{`{"@type":"Cat","@id":"tom","name":"Tom"}`, `{"@type":"Dog","@id":"rex","name":"Rex"}`}
	var all, old []string
	for i := range people {
		docs = append(docs, fmt.Sprintf(`{"@type":"Person","@id":"p%d","name":"P%d","age":%d,"tags":["a","b"]}`, i, i, i))
		all = append(all, fmt.Sprintf("Person/p%d", i))
		if i >= 30 {
			old = append(old, fmt.Sprintf("Person/p%d", i))
		}
	}
	st.insert(t, "["+strings.Join(docs, ",")+"]")
	var sel strings.Builder
	sel.WriteString(`_ChangeSet { `)
	for i := range aliases {
		fmt.Fprintf(&sel, `a%d: Person_added(filter: {_id: "none"}) { _id } `, i)
	}
	sel.WriteString(`all: Person_added { _id } old: Person_added(filter: {age: {ge: 30}}) { _id } ` +
		`pets: Pet_added { _id name } cats: Cat_added { _id name } animals: Animal_added { _id } gone: Person_deleted { _id } }`)
	slices.Sort(all)
	slices.Sort(old)
	// check checks the _ChangeSet of data, and that the fields decoded
	// each change once.
	check := func(name string, data []byte, decodes int) {
		t.Helper()
		var got struct {
			ChangeSet map[string][]struct {
				ID   string `json:"_id"`
				Name string `json:"name"`
			} `json:"_ChangeSet"`
		}
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("%s: decode %s: %v", name, data, err)
		}
		ids := func(alias string) []string {
			out := []string{}
			for _, o := range got.ChangeSet[alias] {
				out = append(out, o.ID)
			}
			slices.Sort(out)
			return out
		}
		for alias, want := range map[string][]string{
			"a0": {}, "a19": {}, "all": all, "old": old, "pets": {"Cat/tom"}, "cats": {"Cat/tom"},
			"animals": {"Cat/tom", "Dog/rex"}, "gone": {},
		} {
			if g := ids(alias); !slices.Equal(g, want) {
				t.Errorf("%s: %s: %v, want %v", name, alias, g, want)
			}
		}
		if p, c := got.ChangeSet["pets"], got.ChangeSet["cats"]; len(p) != 1 || p[0].Name != "Tom" || len(c) != 1 || c[0].Name != "Tom" {
			t.Errorf("%s: pets %v, cats %v: want Tom in each", name, p, c)
		}
		if want := people + 2; decodes != want {
			t.Errorf("%s: %d changes decoded for %d fields, want %d (each change once)", name, decodes, aliases+6, want)
		}
	}
	ctx := context.Background()
	data, errs, decodes, err := graph.ChangeSetDecodes(ctx, st.eng, st.admin, "admin", "db", `{ `+sel.String()+` }`)
	if err != nil || len(errs) > 0 {
		t.Fatalf("query: %v %v", err, errs)
	}
	check("query", data, decodes)
	events, decodes, err := graph.ChangeSetEventDecodes(ctx, st.eng, st.admin, "admin", "db", `subscription { `+sel.String()+` }`)
	if err != nil || len(events) != 1 {
		t.Fatalf("subscription: %v, %d events, want 1", err, len(events))
	}
	var ev struct {
		Data   json.RawMessage
		Errors []any
	}
	if err := json.Unmarshal(events[0].Data, &ev); err != nil || len(ev.Errors) > 0 {
		t.Fatalf("subscription: event %s: %v", events[0].Data, err)
	}
	check("subscription", ev.Data, decodes)
}

// TestChangeSetReadsReferencesAsOfItsCommit: what a _ChangeSet reads
// beyond the commit's images (the documents its references point to, its
// backlinks, a filter through a reference) is the state as of the
// commit, not the present, whatever else the request reads of the present
// before or after it. Commit 1 adds User/a ("A") and Note/n1, commit 2
// Note/n2 for the same owner, commit 3 renames the user: commit 1's
// change set gave the user's notes as [n1, n2] and n1's owner as
// "Renamed".
func TestChangeSetReadsReferencesAsOfItsCommit(t *testing.T) {
	t.Parallel()
	st := newStack(t, `type User { name: String } type Note { owner: User title: String }`)
	st.insert(t, `[{"@type":"User","@id":"a","name":"A"},{"@type":"Note","@id":"n1","owner":"User/a","title":"x"}]`)
	st.insert(t, `[{"@type":"Note","@id":"n2","owner":"User/a","title":"y"}]`)
	st.query(t, `mutation { User_replace(documents: [{_id: "User/a", name: "Renamed"}]) }`, nil).mustOK(t)
	cs := `_ChangeSet(commit: "1") { User_added { _id _owner_of_Note { _id } } Note_added { _id owner { name } } A: Note_added(filter: {owner: {name: {eq: "A"}}}) { _id } }`
	want := `"_ChangeSet":{"User_added":[{"_id":"User/a","_owner_of_Note":[{"_id":"Note/n1"}]}],"Note_added":[{"_id":"Note/n1","owner":{"name":"A"}}],"A":[{"_id":"Note/n1"}]}`
	present := `"Note":[{"owner":{"name":"Renamed","_owner_of_Note":[{"_id":"Note/n1"},{"_id":"Note/n2"}]}},{"owner":{"name":"Renamed","_owner_of_Note":[{"_id":"Note/n1"},{"_id":"Note/n2"}]}}]`
	note := `Note { owner { name _owner_of_Note { _id } } }`
	for _, c := range []struct{ name, query, want string }{
		{"alone", `{ ` + cs + ` }`, `{` + want + `}`},
		{"after a query", `{ ` + note + ` ` + cs + ` }`, `{` + present + `,` + want + `}`},
		{"before a query", `{ ` + cs + ` ` + note + ` }`, `{` + want + `,` + present + `}`},
	} {
		if res := st.query(t, c.query, nil).mustOK(t); string(res.Data) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, res.Data, c.want)
		}
	}
}

// TestChangeSetOfACommitAnswersAPosition: a query of _ChangeSet(commit:)
// answers the position it was judged at, as every read does, and a commit
// made after that position is one not made yet. A query of that field
// alone read the commit outside the query's snapshot: it answered no
// position.
func TestChangeSetOfACommitAnswersAPosition(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "people", testSDL)
	insertDocs(t, d, "people", `{"@type":"Person","@id":"bob","name":"Bob"}`)
	head := d.MustDo(t, http.StatusOK, daemontest.Admin(), http.MethodGet, "/api/document/admin/people?id=Person/bob", nil).Header.Get("Sluice-Position")
	path := "/api/graphql/admin/people"
	for _, q := range []string{
		`{ _ChangeSet(commit: "1") { Person_added { _id } } }`,
		`{ _ChangeSet(commit: "1") { _CommitMetadata { _id } } }`,
		`{ _ChangeSet { Person_added { _id } } }`,
	} {
		var res struct {
			Extensions struct {
				Position string `json:"position"`
			} `json:"extensions"`
		}
		r := gql(t, d, path, q, nil).mustOK(t)
		if err := json.Unmarshal([]byte(r.raw), &res); err != nil {
			t.Fatal(err)
		}
		if res.Extensions.Position != head {
			t.Errorf("%s: position %q, want %q (%s)", q, res.Extensions.Position, head, r.raw)
		}
	}
	r := gql(t, d, path, `{ _ChangeSet(commit: "2") { _CommitMetadata { _id } } }`, nil)
	if len(r.Errors) != 1 || r.Errors[0].Extensions["code"] != "NOT_FOUND" {
		t.Errorf("commit 2, not made yet: %s, want NOT_FOUND", r.raw)
	}
}

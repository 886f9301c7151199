package graph_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

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

package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestResumedEventsReadThePastWithinItsBound: what an event reads beyond
// its commit's images (references, backlinks, a filter through a
// reference) is read as of its commit, which reads the log from the
// commit to its head; past max_past_changes changes the commit is not
// read: its events are errors naming the bound, at their positions, and
// the stream goes on. Events nearer the head read as of their commits,
// and events that read nothing beyond their images are whole. Before,
// every event of a stream resumed from far back read every change from
// its commit to the head, whatever their number: the stream's work grew
// with the square of its backlog.
func TestResumedEventsReadThePastWithinItsBound(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxPastChanges = 3 })
	d.CreateDatabase(t, "evbound", "type User { name: String } type Note { owner: User title: String }")
	docs := "/api/document/admin/evbound"
	p0 := headPositionOf(t, d, "evbound", "Note")
	// Commit 1 (two changes) adds a and n1; commits 2 to 5 rename a;
	// commit 6 adds n2; commit 7 renames a again. Five changes follow
	// commit 1, one commit 6.
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"User","@id":"a","name":"A"},{"@type":"Note","@id":"n1","owner":"User/a","title":"x"}]`)
	for _, name := range []string{"B", "C", "D", "E"} {
		d.MustDo(t, 200, dt.Admin(), "PUT", docs, `{"@type":"User","@id":"User/a","name":"`+name+`"}`)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Note","@id":"n2","owner":"User/a","title":"y"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", docs, `{"@type":"User","@id":"User/a","name":"F"}`)

	open := func(query string) *dt.Stream {
		body, _ := json.Marshal(map[string]string{"query": query})
		st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/evbound", Body: string(body),
			Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
		t.Cleanup(st.Close)
		st.Next() // : connected
		return st
	}
	bound := func(what string, data string) {
		t.Helper()
		var ev struct {
			Data   json.RawMessage
			Errors []struct {
				Message    string
				Path       []any
				Extensions map[string]any
			}
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%s: decode %q: %v", what, data, err)
		}
		if ev.Data != nil || len(ev.Errors) != 1 || ev.Errors[0].Extensions["limit"] != "max_past_changes" || ev.Errors[0].Extensions["code"] != "RESULT_TOO_LARGE" ||
			!strings.HasPrefix(ev.Errors[0].Message, "the event is not sent: its references, backlinks and filters through references are read as of its commit, and the log from there to its head ") ||
			!strings.Contains(ev.Errors[0].Message, " holds more than 3 changes, the most a read of the past reads; resume from a later position") {
			t.Errorf("%s: %s, want the error of max_past_changes alone", what, data)
		}
	}
	expect := func(st *dt.Stream, what string, wants ...string) {
		t.Helper()
		for _, want := range wants {
			f := st.Event().Field("data")
			if want == "" {
				bound(what, f)
			} else if f != want {
				t.Errorf("%s: %s, want %s", what, f, want)
			}
		}
	}
	expect(open(`subscription { Note_added { _id owner { name } } }`), "notes with their owner",
		"", `{"data":{"Note_added":{"_id":"Note/n2","owner":{"name":"E"}}}}`)
	expect(open(`subscription { Note_added { _id title } }`), "notes alone",
		`{"data":{"Note_added":{"_id":"Note/n1","title":"x"}}}`, `{"data":{"Note_added":{"_id":"Note/n2","title":"y"}}}`)
	expect(open(`subscription { _ChangeSet { Note_added { _id owner { name } } } }`), "change sets",
		"", `{"data":{"_ChangeSet":{"Note_added":[{"_id":"Note/n2","owner":{"name":"E"}}]}}}`)
	expect(open(`subscription { Note_added(filter: {owner: {name: {eq: "E"}}}) { _id } }`), "notes filtered through their owner",
		"", `{"data":{"Note_added":{"_id":"Note/n2"}}}`)
	// A change set far back whose lists are all empty, judged from its
	// images (n1's title is not y, and no note is updated), sends
	// nothing, as it would nearer the head; one whose filter tests
	// through a reference cannot be judged so, and is the error.
	expect(open(`subscription { _ChangeSet { Note_updated { _id owner { name } } Note_added(filter: {title: {eq: "y"}}) { _id owner { name } } } }`), "change sets filtered on their images",
		`{"data":{"_ChangeSet":{"Note_updated":[],"Note_added":[{"_id":"Note/n2","owner":{"name":"E"}}]}}}`)
	expect(open(`subscription { _ChangeSet { Note_added(filter: {owner: {name: {eq: "E"}}}) { _id } } }`), "change sets filtered through their owner",
		"", `{"data":{"_ChangeSet":{"Note_added":[{"_id":"Note/n2"}]}}}`)
}

// TestFarChangeSetPastRowsNamesMaxPastChanges: a _ChangeSet of a commit
// too far back to read as of, whose lists hold more documents than
// graphql_max_result_rows, is the error of max_past_changes, the bound
// that keeps it from being read, as a smaller one's is: before, judging
// from its images whether its lists were empty counted them against the
// rows bound, and it was that bound's error. Nearer the head the same
// commit would be the rows bound's error, as the commit near the head
// here is.
func TestFarChangeSetPastRowsNamesMaxPastChanges(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxPastChanges = 3; c.GraphQLMaxResultRows = 2 })
	d.CreateDatabase(t, "evrows", "type User { name: String } type Note { owner: User title: String }")
	docs := "/api/document/admin/evrows"
	p0 := headPositionOf(t, d, "evrows", "Note")
	notes := func(ids ...string) string {
		var b strings.Builder
		b.WriteString("[")
		for i, id := range ids {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"@type":"Note","@id":"` + id + `","owner":"User/a","title":"x"}`)
		}
		b.WriteString("]")
		return b.String()
	}
	// Commit 1 adds a, commit 2 three notes, commits 3 to 5 rename a,
	// commit 6 adds three notes and commit 7 one: commit 2 is seven
	// changes from the head, commit 6 one.
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"User","@id":"a","name":"A"}`)
	d.MustDo(t, 200, dt.Admin(), "POST", docs, notes("n1", "n2", "n3"))
	for _, name := range []string{"B", "C", "D"} {
		d.MustDo(t, 200, dt.Admin(), "PUT", docs, `{"@type":"User","@id":"User/a","name":"`+name+`"}`)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", docs, notes("n4", "n5", "n6"))
	d.MustDo(t, 200, dt.Admin(), "POST", docs, notes("n7"))

	body, _ := json.Marshal(map[string]string{"query": `subscription { _ChangeSet { Note_added { _id owner { name } } } }`})
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/evrows", Body: string(body),
		Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
	t.Cleanup(st.Close)
	st.Next() // : connected
	for _, want := range []struct{ limit, message, data string }{
		{"max_past_changes", " holds more than 3 changes, the most a read of the past reads; resume from a later position", ""},
		{"graphql_max_result_rows", "the event is not sent: the request reads more than 2 documents", ""},
		{"", "", `{"data":{"_ChangeSet":{"Note_added":[{"_id":"Note/n7","owner":{"name":"D"}}]}}}`},
	} {
		data := st.Event().Field("data")
		if want.data != "" {
			if data != want.data {
				t.Errorf("the commit near the head: %s, want %s", data, want.data)
			}
			continue
		}
		var ev struct {
			Data   json.RawMessage
			Errors []struct {
				Message    string
				Extensions map[string]any
			}
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("decode %q: %v", data, err)
		}
		if ev.Data != nil || len(ev.Errors) != 1 || ev.Errors[0].Extensions["limit"] != want.limit || ev.Errors[0].Extensions["code"] != "RESULT_TOO_LARGE" ||
			!strings.Contains(ev.Errors[0].Message, want.message) {
			t.Errorf("%s, want the error of %s alone, saying %q", data, want.limit, want.message)
		}
	}
}

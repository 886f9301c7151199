package daemon_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestEventsReadReferencesAsOfTheirCommit: what an event (or a
// _ChangeSet) reads beyond the commit's images, the documents its
// references point to, its backlinks and the documents a filter through a
// reference tests, is the state as of the commit, whenever it is read.
// Commit 1 adds user a ("A") and note n1 (owner a), commit 2 note n2
// (owner a), commit 3 renames a to "Renamed", commit 4 adds user b ("A")
// and note n3 (owner b). Read in the present, commit 1's change set gave
// a's backlinks as [n1, n2] and n1's owner as "Renamed", a stream resumed
// from before commit 1 gave the same, and a filter on the owner's name
// "A" dropped n1's and n2's events.
func TestEventsReadReferencesAsOfTheirCommit(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "evs", "type User { name: String } type Note { owner: User title: String }")
	docs := "/api/document/admin/evs"
	p0 := headPositionOf(t, d, "evs", "Note")
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"User","@id":"a","name":"A"},{"@type":"Note","@id":"n1","owner":"User/a","title":"x"}]`)
	c1 := commitOf(t, headPositionOf(t, d, "evs", "Note"))
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Note","@id":"n2","owner":"User/a","title":"y"}`)
	gqlData(t, d, dt.Admin(), "evs", `mutation { User_replace(documents: [{_id: "User/a", name: "Renamed"}]) }`)
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"User","@id":"b","name":"A"},{"@type":"Note","@id":"n3","owner":"User/b","title":"z"}]`)
	c4 := commitOf(t, headPositionOf(t, d, "evs", "Note"))

	sel := `{ User_added { _id _owner_of_Note { _id } } Note_added { _id owner { name } } }`
	if got, want := gqlData(t, d, dt.Admin(), "evs", `{ _ChangeSet(commit: "`+c1+`") `+sel+` }`),
		`{"_ChangeSet":{"User_added":[{"_id":"User/a","_owner_of_Note":[{"_id":"Note/n1"}]}],"Note_added":[{"_id":"Note/n1","owner":{"name":"A"}}]}}`; got != want {
		t.Errorf("commit 1's change set:\n got %s\nwant %s", got, want)
	}
	// The newest commit's state is the present's.
	if got, want := gqlData(t, d, dt.Admin(), "evs", `{ _ChangeSet(commit: "`+c4+`") `+sel+` }`),
		`{"_ChangeSet":{"User_added":[{"_id":"User/b","_owner_of_Note":[{"_id":"Note/n3"}]}],"Note_added":[{"_id":"Note/n3","owner":{"name":"A"}}]}}`; got != want {
		t.Errorf("commit 4's change set:\n got %s\nwant %s", got, want)
	}
	// A filter through the reference, as of commit 1.
	if got, want := gqlData(t, d, dt.Admin(), "evs", `{ _ChangeSet(commit: "`+c1+`") { Note_added(filter: {owner: {name: {eq: "A"}}}) { _id } } }`),
		`{"_ChangeSet":{"Note_added":[{"_id":"Note/n1"}]}}`; got != want {
		t.Errorf("commit 1's change set, filtered through the owner:\n got %s\nwant %s", got, want)
	}

	// Streams resumed from before commit 1 (Last-Event-ID).
	open := func(query string) *dt.Stream {
		body, _ := json.Marshal(map[string]string{"query": query})
		st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/evs", Body: string(body),
			Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
		t.Cleanup(st.Close)
		st.Next() // : connected
		return st
	}
	expect := func(st *dt.Stream, what string, wants ...string) {
		t.Helper()
		for _, want := range wants {
			if f := st.Event(); !strings.Contains(f.Field("data"), want) {
				t.Errorf("%s: %q, want %s", what, f.Field("data"), want)
			}
		}
	}
	st := open(`subscription { Note_added { _id owner { name _owner_of_Note { _id } } } }`)
	expect(st, "notes with their owner",
		`{"_id":"Note/n1","owner":{"name":"A","_owner_of_Note":[{"_id":"Note/n1"}]}}`,
		`{"_id":"Note/n2","owner":{"name":"A","_owner_of_Note":[{"_id":"Note/n1"},{"_id":"Note/n2"}]}}`,
		`{"_id":"Note/n3","owner":{"name":"A","_owner_of_Note":[{"_id":"Note/n3"}]}}`)
	st = open(`subscription { User_added { _id _owner_of_Note { _id } } }`)
	expect(st, "users with their backlinks",
		`{"_id":"User/a","_owner_of_Note":[{"_id":"Note/n1"}]}`,
		`{"_id":"User/b","_owner_of_Note":[{"_id":"Note/n3"}]}`)
	st = open(`subscription { _ChangeSet { Note_added { _id owner { name } } } }`)
	expect(st, "change sets", `{"_id":"Note/n1","owner":{"name":"A"}}`, `{"_id":"Note/n2","owner":{"name":"A"}}`)
	st = open(`subscription { _ChangeSet { Note_added(filter: {owner: {name: {eq: "A"}}}) { _id } } }`)
	expect(st, "change sets filtered through the owner", `{"Note_added":[{"_id":"Note/n1"}]}`, `{"Note_added":[{"_id":"Note/n2"}]}`)
	st = open(`subscription { Note_added(filter: {owner: {name: {eq: "A"}}}) { _id } }`)
	expect(st, "notes filtered through their owner", `"Note/n1"`, `"Note/n2"`, `"Note/n3"`)
}

// TestEventReferencesHiddenSinceTheCommit: a field of a referenced
// document that a schema version since the commit protected from the
// reader cannot be shown as of the commit, as a read as of it refuses it:
// a _ChangeSet selecting it there is null with the error naming it, and a
// stream resumed from before the commit ends with that error. The fields
// it may show read as of the commit.
func TestEventReferencesHiddenSinceTheCommit(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "evh", "type User { name: String secret: String } type Note { owner: User }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/evh", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	docs := "/api/document/admin/evh"
	p0 := headPositionOf(t, d, "evh", "Note")
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"User","@id":"a","name":"A","secret":"s"},{"@type":"Note","@id":"n1","owner":"User/a"}]`)
	c1 := commitOf(t, headPositionOf(t, d, "evh", "Note"))
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/evh", "type User { name: String secret: String @private } type Note { owner: User }")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/evh", "type User { name: String secret: String } type Note { owner: User }")
	gqlData(t, d, dt.Admin(), "evh", `mutation { User_replace(documents: [{_id: "User/a", name: "B", secret: "t"}]) }`)

	// The error names the field and the commit's end, as a read as of
	// it does.
	// (tagged: the end of the commit the event is of).
	hidden := regexp.MustCompile("-" + c1 + "-2147483647-[0-9a-v]{8} cannot be shown: it was protected from your role")
	ans := gqlQuery(t, d, rita, "evh", `{ _ChangeSet(commit: "`+c1+`") { Note_added { owner { secret } } } }`)
	if string(ans.Data) != `{"_ChangeSet":null}` || len(ans.Errors) != 1 || !strings.Contains(ans.Errors[0].Message, "User.secret as of ") || !hidden.MatchString(ans.Errors[0].Message) {
		t.Errorf("commit 1's owner's secret: %s %+v, want null and the error naming User.secret", ans.Data, ans.Errors)
	}
	if got, want := gqlData(t, d, rita, "evh", `{ _ChangeSet(commit: "`+c1+`") { Note_added { owner { name } } } }`),
		`{"_ChangeSet":{"Note_added":[{"owner":{"name":"A"}}]}}`; got != want {
		t.Errorf("commit 1's owner's name:\n got %s\nwant %s", got, want)
	}
	body, _ := json.Marshal(map[string]string{"query": `subscription { Note_added { owner { secret } } }`})
	st := d.MustOpenStream(t, rita, dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/evh", Body: string(body),
		Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
	st.Next() // : connected
	frames := st.Ended()
	if len(frames) != 2 || !hidden.MatchString(frames[0].Field("data")) || frames[1][0] != "event: complete" {
		t.Errorf("a stream from before commit 1: %q, want the error naming User.secret and complete", frames)
	}
}

// TestEventErrorsGoWithTheirEvent: an event whose payload is written but
// holds a field error below a nullable reference (the referenced
// document, as of the commit, lacks a field the schema has made required
// since) carries that error; the next event carries only its own. The
// errors were kept back and sent with the next event of the commit whose
// payload was null, or not at all.
func TestEventErrorsGoWithTheirEvent(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "everr", "type User { name: String } type Note { owner: User title: String! }")
	docs := "/api/document/admin/everr"
	p0 := headPositionOf(t, d, "everr", "Note")
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"User","@id":"a"},{"@type":"Note","@id":"n1","owner":"User/a","title":"x"},{"@type":"Note","@id":"n2","title":"y"}]`)
	d.MustDo(t, 200, dt.Admin(), "PUT", docs, `{"@type":"User","@id":"a","name":"A"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/everr", "type User { name: String! } type Note { owner: User title: String! }")

	type event struct {
		Data   json.RawMessage
		Errors []struct {
			Message string
			Path    []any
		}
	}
	open := func(query string) func() event {
		body, _ := json.Marshal(map[string]string{"query": query})
		st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/everr", Body: string(body),
			Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
		t.Cleanup(st.Close)
		st.Next() // : connected
		return func() event {
			t.Helper()
			var ev event
			f := st.Event().Field("data")
			if err := json.Unmarshal([]byte(f), &ev); err != nil {
				t.Fatalf("decode %q: %v", f, err)
			}
			return ev
		}
	}
	next := open(`subscription { Note_added { _id owner { name } } }`)
	n1, n2 := next(), next()
	if string(n1.Data) != `{"Note_added":{"_id":"Note/n1","owner":null}}` || len(n1.Errors) != 1 || !strings.Contains(n1.Errors[0].Message, "name") {
		t.Errorf("n1's event: %s %+v, want its owner null and one error naming User.name", n1.Data, n1.Errors)
	}
	if string(n2.Data) != `{"Note_added":{"_id":"Note/n2","owner":null}}` || len(n2.Errors) != 0 {
		t.Errorf("n2's event: %s %+v, want no owner and no error", n2.Data, n2.Errors)
	}
	cs := open(`subscription { _ChangeSet { Note_added { _id owner { name } } } }`)()
	if string(cs.Data) != `{"_ChangeSet":{"Note_added":[{"_id":"Note/n1","owner":null},{"_id":"Note/n2","owner":null}]}}` || len(cs.Errors) != 1 || !strings.Contains(cs.Errors[0].Message, "name") {
		t.Errorf("the change set: %s %+v, want n1's owner null and one error naming User.name", cs.Data, cs.Errors)
	}
}

package daemon_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestNonNullFieldWithoutValue: a field today's schema requires, read
// where the document has no value for it (as of a position before the
// field was required, or in the events of a subscription resumed from
// there), is never a null under a non-null type: the null goes up to the
// nearest nullable parent, and an error names the field at its path, as
// GraphQL requires. What has a value reads as before.
func TestNonNullFieldWithoutValue(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "nonnull", "type Person { name: String! nick: String friend: Person }")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/nonnull", `{"@type":"Person","@id":"carol","name":"Carol","nick":"C"}`)
	p0 := headPosition(t, a, "nonnull")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/nonnull", `[{"@type":"Person","@id":"alice","name":"Alice"},
		{"@type":"Person","@id":"bob","name":"Bob","nick":"B","friend":"Person/alice"}]`)
	p1 := headPosition(t, a, "nonnull")
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/nonnull", `{"@type":"Person","@id":"Person/alice","name":"Alice","nick":"A"}`)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/nonnull", "type Person { name: String! nick: String! friend: Person }")

	// checkErr checks that the answer's one error is of Person.nick at path.
	checkErr := func(what string, ans gqlAnswer, path string) {
		t.Helper()
		if len(ans.Errors) != 1 {
			t.Fatalf("%s: errors %+v, want one", what, ans.Errors)
		}
		e := ans.Errors[0]
		if got := fmt.Sprint(e.Path); got != path || e.Extensions.Code != "UNPROCESSABLE" || !strings.Contains(e.Message, "non-null field Person.nick (String!)") {
			t.Errorf("%s: error %q %s at %s, want UNPROCESSABLE naming Person.nick at %s", what, e.Message, e.Extensions.Code, got, path)
		}
	}

	// The list is [Person!]!: alice without a nick nulls it, and the data.
	ans := gqlQuery(t, a, dt.Admin(), "nonnull", `{ Person(asOf: "`+p1+`") { _id nick } }`)
	if string(ans.Data) != "null" {
		t.Errorf("as of p1, every nick: data %s, want null", ans.Data)
	}
	checkErr("as of p1, every nick", ans, "[Person 0 nick]")
	// A reference is nullable: bob's friend is null, bob is read.
	ans = gqlQuery(t, a, dt.Admin(), "nonnull", `{ Person(asOf: "`+p1+`", id: "Person/bob") { _id nick friend { _id nick } } }`)
	if want := `{"Person":[{"_id":"Person/bob","nick":"B","friend":null}]}`; string(ans.Data) != want {
		t.Errorf("as of p1, bob and his friend: data %s, want %s", ans.Data, want)
	}
	checkErr("as of p1, bob and his friend", ans, "[Person 0 friend nick]")
	// Fields with values read as before, today and then.
	if got := gqlData(t, a, dt.Admin(), "nonnull", `{ Person(asOf: "`+p1+`") { _id name } }`); got != `{"Person":[{"_id":"Person/alice","name":"Alice"},{"_id":"Person/bob","name":"Bob"},{"_id":"Person/carol","name":"Carol"}]}` {
		t.Errorf("as of p1, names: %s", got)
	}
	if got := gqlData(t, a, dt.Admin(), "nonnull", `{ Person { _id nick } }`); got != `{"Person":[{"_id":"Person/alice","nick":"A"},{"_id":"Person/bob","nick":"B"},{"_id":"Person/carol","nick":"C"}]}` {
		t.Errorf("today: %s", got)
	}

	// Subscriptions resumed at p0 replay commit 2 through today's schema:
	// alice's event has a null payload (Person_added is nullable) and the
	// error; bob's is whole; the change set of commit 2 is null.
	open := func(query string) *dt.Stream {
		body, _ := json.Marshal(map[string]string{"query": query})
		st := a.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/nonnull", Body: string(body),
			Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
		st.Next() // : connected
		return st
	}
	event := func(st *dt.Stream) gqlAnswer {
		t.Helper()
		f := st.Event()
		var ans gqlAnswer
		if err := json.Unmarshal([]byte(f.Field("data")), &ans); err != nil {
			t.Fatalf("event %s: %v", f, err)
		}
		return ans
	}
	added := open(`subscription { Person_added { _id nick } }`)
	ans = event(added)
	if string(ans.Data) != `{"Person_added":null}` {
		t.Errorf("alice's event: data %s, want the payload null", ans.Data)
	}
	checkErr("alice's event", ans, "[Person_added nick]")
	if ans = event(added); string(ans.Data) != `{"Person_added":{"_id":"Person/bob","nick":"B"}}` || len(ans.Errors) != 0 {
		t.Errorf("bob's event: %s %+v", ans.Data, ans.Errors)
	}
	set := open(`subscription { _ChangeSet { Person_added { _id nick } } }`)
	ans = event(set)
	if string(ans.Data) != `{"_ChangeSet":null}` {
		t.Errorf("commit 2's change set: data %s, want null", ans.Data)
	}
	checkErr("commit 2's change set", ans, "[_ChangeSet Person_added 0 nick]")
}

// TestChangesOfAClassMadeAnInterface: a document whose class a schema
// change made an interface has no GraphQL object type to be shown as (it
// was presented as the interface, a __typename no object has, with every
// fragment on the interface's implementations applied to it), and
// leaving it out would be a silent gap (streams that kept up were sent
// it): _ChangeSet of its commit and a subscription resumed from before
// it answer a CONFLICT naming the change.
func TestChangesOfAClassMadeAnInterface(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "madeabstract", "type Pet { name: String! }")
	p0 := a.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/madeabstract?type=Pet&count=0", nil).Header.Get("Sluice-Position")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/madeabstract", `{"@type":"Pet","@id":"a","name":"A"}`)
	a.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/madeabstract?id=Pet/a", nil)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/madeabstract?force=true",
		"interface Pet { name: String! }\ntype Cat implements Pet { indoor: Boolean! }\ntype Dog implements Pet { breed: String! }")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/madeabstract", `{"@type":"Cat","@id":"c","name":"C","indoor":true}`)

	ans := gqlQuery(t, a, dt.Admin(), "madeabstract", `{ _ChangeSet(commit: "1") { Pet_added { __typename _id ... on Cat { indoor } ... on Dog { breed } } } }`)
	if len(ans.Errors) != 1 || ans.Errors[0].Extensions.Code != "CONFLICT" || !strings.Contains(ans.Errors[0].Message, "made Pet no document class") {
		t.Errorf("the change set of Pet/a's insert: %s %+v; want a CONFLICT naming the change", ans.Data, ans.Errors)
	}
	body, _ := json.Marshal(map[string]string{"query": `subscription { Pet_added { __typename _id ... on Cat { indoor } } }`})
	st := a.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/madeabstract", Body: string(body),
		Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
	st.Next() // : connected
	if f := st.Event(); !strings.Contains(f.String(), `"CONFLICT"`) || !strings.Contains(f.String(), "made Pet no document class") {
		t.Errorf("the first event from before Pet/a's insert: %s, want a CONFLICT naming the change", f)
	}
}

package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestFiltersOnFieldsHiddenSinceTheCommit: a field a read-only user may
// read now, but that a schema version since a commit protected from it
// (ssn: public, then @private, then public again), is not in that
// commit's images as the user sees them. A filter that tests it there, of
// a _ChangeSet (the query field, and a subscription) or of a
// subscription's events resumed from before, is refused with the error
// naming the field, as a read as of the commit is, rather than taking it
// for missing (nothing matched eq, and a not-eq matched every change,
// telling the user nothing it may know and something it may not). A
// filter on other fields, the commits made since the field was last
// protected, and the admin, read as before.
func TestFiltersOnFieldsHiddenSinceTheCommit(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "hid", "type Person { name: String! ssn: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/hid", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	docs := "/api/document/admin/hid"
	p0 := headPosition(t, d, "hid")
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Person","@id":"alice","name":"Alice","ssn":"123"}`)
	alice := commitOf(t, headPosition(t, d, "hid"))
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/hid", "type Person { name: String! ssn: String @private }")
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Person","@id":"bob","name":"Bob","ssn":"456"}`)
	bob := commitOf(t, headPosition(t, d, "hid"))
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/hid", "type Person { name: String! ssn: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Person","@id":"carol","name":"Carol","ssn":"789"}`)
	carol := commitOf(t, headPosition(t, d, "hid"))

	changeSet := func(commit, filter string) string {
		return `{ _ChangeSet(commit: "` + commit + `") { Person_added(filter: ` + filter + `) { _id } } }`
	}
	refused := func(what string, ans gqlAnswer, commit string) {
		t.Helper()
		if string(ans.Data) != `{"_ChangeSet":null}` || len(ans.Errors) != 1 || ans.Errors[0].Extensions.Code != "BAD_USER_INPUT" ||
			!strings.Contains(ans.Errors[0].Message, "Person.ssn as of commit "+commit+" cannot be shown: it was protected from your role") {
			t.Errorf("%s: %s %+v, want the change set null and the error naming Person.ssn", what, ans.Data, ans.Errors)
		}
	}
	for _, c := range []struct{ what, commit string }{{"alice's commit, before ssn was protected", alice}, {"bob's, while it was", bob}} {
		refused(c.what+", eq", gqlQuery(t, d, rita, "hid", changeSet(c.commit, `{ssn: {eq: "123"}}`)), c.commit)
		refused(c.what+", not eq", gqlQuery(t, d, rita, "hid", changeSet(c.commit, `{_not: {ssn: {eq: "x"}}}`)), c.commit)
		if got := gqlData(t, d, rita, "hid", changeSet(c.commit, `{name: {ne: "x"}}`)); !strings.Contains(got, `"_id":"Person/`) {
			t.Errorf("%s, a filter on name: %s", c.what, got)
		}
	}
	if got := gqlData(t, d, rita, "hid", changeSet(carol, `{ssn: {eq: "789"}}`)); got != `{"_ChangeSet":{"Person_added":[{"_id":"Person/carol"}]}}` {
		t.Errorf("carol's commit, made since: %s", got)
	}
	if got := gqlData(t, d, dt.Admin(), "hid", changeSet(alice, `{ssn: {eq: "123"}}`)); got != `{"_ChangeSet":{"Person_added":[{"_id":"Person/alice"}]}}` {
		t.Errorf("the admin's filter on alice's commit: %s", got)
	}

	// Subscriptions resumed from before alice's commit end at it with the
	// error; one filtering by name alone receives every event.
	open := func(query string) *dt.Stream {
		body, _ := json.Marshal(map[string]string{"query": query})
		st := d.MustOpenStream(t, rita, dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/hid", Body: string(body),
			Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
		st.Next() // : connected
		return st
	}
	for _, q := range []string{
		`subscription { Person_added(filter: {ssn: {eq: "789"}}) { _id } }`,
		`subscription { _ChangeSet { Person_added(filter: {ssn: {eq: "789"}}) { _id } } }`,
	} {
		frames := open(q).Ended()
		if len(frames) != 2 || !strings.Contains(frames[0].Field("data"), "Person.ssn as of commit "+alice+" cannot be shown: it was protected from your role") ||
			frames[1][0] != "event: complete" {
			t.Errorf("%s from before alice's commit: %q, want the error naming Person.ssn and complete", q, frames)
		}
	}
	st := open(`subscription { Person_added(filter: {name: {ne: "x"}}) { _id } }`)
	for _, want := range []string{"alice", "bob", "carol"} {
		if f := st.Event(); !strings.Contains(f.Field("data"), `"Person/`+want+`"`) {
			t.Errorf("a filter on name: %q, want %s's event", f, want)
		}
	}
}

// commitOf returns the commit a read's position stands at.
func commitOf(t *testing.T, pos string) string {
	t.Helper()
	parts := strings.Split(pos, "-")
	if len(parts) != 3 {
		t.Fatalf("position %q", pos)
	}
	return parts[1]
}

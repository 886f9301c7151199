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

// commitOf returns the commit a read's position stands at (its tag
// aside).
func commitOf(t *testing.T, pos string) string {
	t.Helper()
	parts := strings.Split(dt.Untag(pos), "-")
	if len(parts) != 3 {
		t.Fatalf("position %q", pos)
	}
	return parts[1]
}

// TestFiltersOnClassesDroppedSinceTheCommit: what
// TestFiltersOnFieldsHiddenSinceTheCommit checks of a field holds of every
// field of a class whose documents a forced schema change since the
// commit dropped (the class dropped and made again): its images show a
// reader "@id" and "@type" alone, and a filter testing one of its fields
// is refused, naming the field and the change, in a _ChangeSet and in a
// subscription resumed from before the commit. Before, the filter took
// the fields for missing: Item/a, added with name "A", matched no
// {name: {eq: "A"}} and every {_not: …} for the reader (an admin's
// answers the other way round), and a subscription filtering by name
// silently skipped its event.
func TestFiltersOnClassesDroppedSinceTheCommit(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const sdl = "type Item { name: String! code: String }\ntype Other { x: Int }"
	d.CreateDatabase(t, "gone", sdl)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/gone", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	p0 := headPositionOf(t, d, "gone", "Item")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/gone", `{"@type":"Item","@id":"a","name":"A","code":"c"}`)
	added := commitOf(t, headPositionOf(t, d, "gone", "Item"))
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/gone?force=true", "type Other { x: Int }")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/gone?force=true", sdl)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/gone", `{"@type":"Item","@id":"b","name":"B"}`)
	since := commitOf(t, headPositionOf(t, d, "gone", "Item"))

	changeSet := func(commit, filter string) string {
		return `{ _ChangeSet(commit: "` + commit + `") { Item_added(filter: ` + filter + `) { _id } } }`
	}
	want := "Item.name as of commit " + added + " cannot be shown: a schema change after that commit (in effect from commit "
	for _, f := range []string{`{name: {eq: "A"}}`, `{_not: {name: {eq: "A"}}}`, `{_or: [{_id: "Item/a"}, {code: {eq: "c"}}]}`} {
		ans := gqlQuery(t, d, rita, "gone", changeSet(added, f))
		field := "Item.name"
		if strings.Contains(f, "code") {
			field = "Item.code"
		}
		if string(ans.Data) != `{"_ChangeSet":null}` || len(ans.Errors) != 1 || ans.Errors[0].Extensions.Code != "BAD_USER_INPUT" ||
			!strings.Contains(ans.Errors[0].Message, strings.Replace(want, "Item.name", field, 1)) {
			t.Errorf("rita's filter %s of commit %s: %s %+v, want the change set null and the error naming %s", f, added, ans.Data, ans.Errors, field)
		}
	}
	// A filter on the id alone, the image's, and the admin's, who sees the
	// images as written, are answered; so is a filter of a commit made
	// since.
	if got := gqlData(t, d, rita, "gone", changeSet(added, `{_id: "Item/a"}`)); got != `{"_ChangeSet":{"Item_added":[{"_id":"Item/a"}]}}` {
		t.Errorf("rita's filter on _id: %s", got)
	}
	if got := gqlData(t, d, dt.Admin(), "gone", changeSet(added, `{name: {eq: "A"}}`)); got != `{"_ChangeSet":{"Item_added":[{"_id":"Item/a"}]}}` {
		t.Errorf("the admin's filter on name: %s", got)
	}
	if got := gqlData(t, d, rita, "gone", changeSet(since, `{name: {eq: "B"}}`)); got != `{"_ChangeSet":{"Item_added":[{"_id":"Item/b"}]}}` {
		t.Errorf("rita's filter of commit %s, made since: %s", since, got)
	}

	// A subscription resumed from before the commit ends at it with the
	// error, rather than being sent Item/a, whose name is "A".
	body, _ := json.Marshal(map[string]string{"query": `subscription { Item_added(filter: {_not: {name: {eq: "A"}}}) { _id } }`})
	st := d.MustOpenStream(t, rita, dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/gone", Body: string(body),
		Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
	defer st.Close()
	st.Next() // : connected
	if f := st.Event(); !strings.Contains(f.Field("data"), want) {
		t.Fatalf("a subscription filtering by name from before commit %s: %q, want the error naming Item.name", added, f)
	}
	if frames := st.Ended(); len(frames) != 1 || frames[0][0] != "event: complete" {
		t.Errorf("after the error: %q, want complete", frames)
	}
}

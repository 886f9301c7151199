package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestStreamsOfAValueSluiceCannotRead: a row holding a Float NaN (written
// in SQL as Sluice's own role, the checks skipped, as rows from before the
// checks may) is deleted in SQL by another role: the change's image
// before it leaves the NaN out, though a read compares it (NaN > 0, as
// Postgres sorts it, so P(filter: {f: {gt: 0}}) lists the row). Before,
// the image's missing value was taken for null:
//
//   - a live query filtering by f > 0 judged the delete unable to change
//     its result, and kept listing the deleted row;
//   - a subscription to deletes filtering by f > 0 left the delete out,
//     silently, where a read before it selected the row.
//
// Now the live query reads again and sends the result without the row; a
// subscription whose filter depends on f ends with the error naming f (as
// a _ChangeSet's filter is refused), since whether the change matches is
// unknown; one filtering on a field that reads (tag) is sent the event.
// So too for a delete of such a row through the API, whose before image
// Sluice's writer logs without the value.
func TestStreamsOfAValueSluiceCannotRead(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "unknown", "type P { f: Float tag: String }")
	docs := "/api/document/admin/unknown"
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"P","@id":"a","f":1,"tag":"x"},{"@type":"P","@id":"b","f":2,"tag":"y"}]`)
	w := newSQLWriter(t, d, "unknown")
	sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = 'on'", "UPDATE "+w.table("P")+" SET f = 'NaN' WHERE _id = 'P/a'")

	open := func(query string) *dt.Stream {
		body, _ := json.Marshal(map[string]string{"query": query})
		st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/unknown", Body: string(body),
			Header: []string{"Accept", "text/event-stream"}})
		st.Next() // : connected
		return st
	}
	data := func(st *dt.Stream, what string) string {
		t.Helper()
		f := st.Event()
		var ans gqlAnswer
		if err := json.Unmarshal([]byte(f.Field("data")), &ans); f[0] != "event: next" || err != nil || len(ans.Errors) > 0 {
			t.Fatalf("%s: %q, want a result", what, f)
		}
		return string(ans.Data)
	}
	live := open(`subscription { P(filter: {f: {gt: 0}}, orderBy: {_id: ASC}) { _id } }`)
	if got := data(live, "the live query's first result"); got != `{"P":[{"_id":"P/a"},{"_id":"P/b"}]}` {
		t.Fatalf("the live query's first result: %s, want P/a (NaN > 0) and P/b", got)
	}
	onF := open(`subscription { P_deleted(filter: {f: {gt: 0}}) { _id } }`)
	onTag := open(`subscription { P_deleted(filter: {tag: {eq: "x"}}) { _id } }`)
	sqlExec(t, w.url, "DELETE FROM "+w.table("P")+" WHERE _id = 'P/a'")
	pos := headPositionOf(t, d, "unknown", "P")
	if got := data(live, "after P/a's delete in SQL"); got != `{"P":[{"_id":"P/b"}]}` {
		t.Errorf("the live query after P/a's delete in SQL: %s, want P/b alone", got)
	}
	if got := data(onTag, "deletes filtered by tag"); got != `{"P_deleted":{"_id":"P/a"}}` {
		t.Errorf("deletes filtered by tag: %s, want P/a", got)
	}
	// The API deletes P/b (f 2 > 0): a filter taking the unknown f for
	// missing would go on to it.
	d.MustDo(t, 200, dt.Admin(), "DELETE", docs+"?id=P/b", nil)
	frames := onF.Ended()
	if len(frames) != 2 || !strings.Contains(frames[0].Field("data"), "the filter tests f, whose value in this change's document Sluice cannot read") ||
		frames[1][0] != "event: complete" {
		t.Errorf("deletes filtered by f: %q, want the error naming f and complete", frames)
	}
	if strings.Contains(frames[0].Field("data"), "tag") {
		t.Errorf("the error names more than the field the filter tests: %s", frames[0].Field("data"))
	}

	// A _ChangeSet of the commit: refused filtering by f, answered by tag.
	commit := commitOf(t, pos)
	ans := gqlQuery(t, d, dt.Admin(), "unknown", `{ _ChangeSet(commit: "`+commit+`") { P_deleted(filter: {f: {gt: 0}}) { _id } } }`)
	if len(ans.Errors) != 1 || !strings.Contains(ans.Errors[0].Message, "the filter tests f") {
		t.Errorf("_ChangeSet filtered by f: %s %+v, want the error naming f", ans.Data, ans.Errors)
	}
	if got := gqlData(t, d, dt.Admin(), "unknown", `{ _ChangeSet(commit: "`+commit+`") { P_deleted(filter: {tag: {eq: "x"}}) { _id } } }`); got != `{"_ChangeSet":{"P_deleted":[{"_id":"P/a"}]}}` {
		t.Errorf("_ChangeSet filtered by tag: %s", got)
	}

	// A delete through the API of such a row: its before image, logged
	// by Sluice's writer, leaves the NaN out too, and the log says so.
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"P","@id":"e","f":1,"tag":"x"}`)
	sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = 'on'", "UPDATE "+w.table("P")+" SET f = 'NaN' WHERE _id = 'P/e'")
	d.MustDo(t, 200, dt.Admin(), "DELETE", docs+"?id=P/e", nil)
	commit = commitOf(t, headPositionOf(t, d, "unknown", "P"))
	ans = gqlQuery(t, d, dt.Admin(), "unknown", `{ _ChangeSet(commit: "`+commit+`") { P_deleted(filter: {f: {gt: 0}}) { _id } } }`)
	if len(ans.Errors) != 1 || !strings.Contains(ans.Errors[0].Message, "the filter tests f") {
		t.Errorf("_ChangeSet of the API's delete, filtered by f: %s %+v, want the error naming f", ans.Data, ans.Errors)
	}
}

package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestLiveQueryResultWithFieldErrors: a live query's result with the
// errors of values its documents hold (a required field without a value
// that can be read: here a row written in SQL as Sluice's own role, the
// checks skipped) is sent as a query answers it, the null up to the
// nearest nullable parent (data itself for a list of such documents) and
// the errors with their paths, and the live query goes on: a commit that
// changes the errors alone sends the result again, and one that mends
// the document sends it without errors. A live query resumed from a
// result with errors, unchanged, is told only its position, and then gets
// a result with the same data and other errors. A result that could not be read
// whole (past graphql_max_result_rows) still ends it. Before, a field
// error ended the live query.
func TestLiveQueryResultWithFieldErrors(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLMaxResultRows = 3 })
	d.CreateDatabase(t, "liveerr", "type P { name: String! score: Float! rank: Float! friend: P }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/liveerr", `[{"@type":"P","@id":"x","name":"X","score":1,"rank":1},
		{"@type":"P","@id":"b","name":"B","score":1,"rank":1,"friend":"P/x"}]`)
	w := newSQLWriter(t, d, "liveerr")
	// unchecked writes x's row as Sluice's own role, the triggers
	// skipped: no commit, so a live query sees it at the next commit.
	unchecked := func(set string) {
		t.Helper()
		sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = 'on'", "UPDATE "+w.table("P")+" SET "+set+" WHERE _id = 'P/x'")
	}
	// touch commits a change of b's name, which no live query here
	// selects: the results are read again, and the rows as unchecked
	// left them.
	n := 0
	touch := func() {
		t.Helper()
		n++
		d.MustDo(t, 200, dt.Admin(), "PATCH", "/api/document/admin/liveerr?id=P/b", `{"name":"B`+strings.Repeat("!", n)+`"}`,
			"Content-Type", "application/merge-patch+json")
	}
	open := func(q string, header ...string) *dt.Stream {
		body, _ := json.Marshal(map[string]string{"query": q})
		st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/liveerr", Body: string(body),
			Header: append([]string{"Accept", "text/event-stream"}, header...)})
		st.Next() // : connected
		return st
	}
	// result reads the next result and checks its data and the path of
	// each of its errors, all UNPROCESSABLE.
	result := func(st *dt.Stream, what, data string, paths ...string) string {
		t.Helper()
		f := st.Event()
		if f[0] != "event: next" {
			t.Fatalf("%s: %q, want a result", what, f)
		}
		var ans gqlAnswer
		if err := json.Unmarshal([]byte(f.Field("data")), &ans); err != nil {
			t.Fatalf("%s: %s: %v", what, f, err)
		}
		if string(ans.Data) != data || len(ans.Errors) != len(paths) {
			t.Fatalf("%s: %s\nwant data %s and %d errors", what, f.Field("data"), data, len(paths))
		}
		for i, e := range ans.Errors {
			if got := strings.Trim(strings.ReplaceAll(mustJSON(t, e.Path), `"`, ""), "[]"); got != paths[i] || e.Extensions.Code != "UNPROCESSABLE" {
				t.Errorf("%s: error %q %s at %s, want UNPROCESSABLE at %s", what, e.Message, e.Extensions.Code, got, paths[i])
			}
		}
		return f.Field("id")
	}

	unchecked(`score = 'NaN'`)
	const friendQuery = `subscription { P(ids: ["P/b"]) { _id friend { score rank } } }`
	friend := open(friendQuery)
	all := open(`query @live { P { _id score } }`)
	result(friend, "b's friend without a score", `{"P":[{"_id":"P/b","friend":null}]}`, "P,0,friend,score")
	result(all, "every score, x's missing", `null`, "P,1,score")

	// The same data, another error: another result.
	unchecked(`score = 2, rank = 'NaN'`)
	touch()
	pos := result(friend, "b's friend without a rank", `{"P":[{"_id":"P/b","friend":null}]}`, "P,0,friend,rank")
	result(all, "every score, x's back", `{"P":[{"_id":"P/b","score":1},{"_id":"P/x","score":2}]}`)
	// Resumed from that result, unchanged since: only its position.
	resumed := open(friendQuery, "Last-Event-ID", pos)
	if f := resumed.Event(); f.String() != "id: "+pos {
		t.Errorf("resumed from a result with an error, unchanged: %q, want only its id", f)
	}

	// The same data with the first error again: sent to both, the
	// resumed stream telling it from its client's by its errors too.
	unchecked(`score = 'NaN', rank = 3`)
	touch()
	result(friend, "b's friend without a score again", `{"P":[{"_id":"P/b","friend":null}]}`, "P,0,friend,score")
	result(resumed, "resumed: b's friend without a score again", `{"P":[{"_id":"P/b","friend":null}]}`, "P,0,friend,score")
	result(all, "every score, x's missing again", `null`, "P,1,score")

	unchecked(`score = 2`)
	touch()
	result(friend, "b's friend mended", `{"P":[{"_id":"P/b","friend":{"score":2,"rank":3}}]}`)
	result(all, "every score, x's mended", `{"P":[{"_id":"P/b","score":1},{"_id":"P/x","score":2}]}`)

	// Past graphql_max_result_rows (3): the result is not read whole, and
	// the live query ends with the error naming the bound.
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/liveerr", `[{"@type":"P","@id":"c","name":"C","score":1,"rank":1},
		{"@type":"P","@id":"d","name":"D","score":1,"rank":1}]`)
	frames := all.Ended()
	if len(frames) != 2 || !strings.Contains(frames[0].String(), `"limit":"graphql_max_result_rows"`) || frames[1][0] != "event: complete" {
		t.Fatalf("a result past graphql_max_result_rows: %q, want the error and complete", frames)
	}
}

// TestLiveQueryBoundaryOfAnUnreadableLastRow: a full live result whose
// last row holds an order value Sluice cannot read (a Float NaN, in a row
// written in SQL as Sluice's own role, the checks skipped) has no
// boundary. The row is read without that value, but it is not null:
// descending, Postgres sorts a document without the field (null) before
// NaN, so one added with an id after the last row's enters the result.
// Before, the missing value was taken for null, the new document judged
// to sort after the last row (null = null, its id after), and the live
// query kept the old result for good.
func TestLiveQueryBoundaryOfAnUnreadableLastRow(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "nanbound", "type P { f: Float }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/nanbound", `[{"@type":"P","@id":"a","f":1}]`)
	w := newSQLWriter(t, d, "nanbound")
	sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = 'on'", "UPDATE "+w.table("P")+" SET f = 'NaN' WHERE _id = 'P/a'")

	const q = `P(orderBy: {f: DESC}, limit: 1) { _id }`
	body, _ := json.Marshal(map[string]string{"query": "subscription { " + q + " }"})
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/nanbound", Body: string(body),
		Header: []string{"Accept", "text/event-stream"}})
	st.Next() // : connected
	data := func(what string) string {
		t.Helper()
		f := st.Event()
		var ans gqlAnswer
		if err := json.Unmarshal([]byte(f.Field("data")), &ans); f[0] != "event: next" || err != nil {
			t.Fatalf("%s: %q, want a result", what, f)
		}
		return string(ans.Data)
	}
	if got := data("first result"); got != `{"P":[{"_id":"P/a"}]}` {
		t.Fatalf("first result: %s, want P/a (its f unreadable, not an error: f is nullable)", got)
	}

	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/nanbound", `{"@type":"P","@id":"c"}`)
	qb, _ := json.Marshal(map[string]string{"query": "{ " + q + " }"})
	if ans := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/nanbound", string(qb), "Content-Type", "application/json"); !strings.Contains(string(ans.Body), `{"P":[{"_id":"P/c"}]}`) {
		t.Fatalf("the query answers %s, want P/c (nulls first descending)", ans.Body)
	}
	if got := data("after P/c is added"); got != `{"P":[{"_id":"P/c"}]}` {
		t.Errorf("the live result after P/c is added: %s, want P/c as the query answers", got)
	}
}

package daemon_test

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestReadAsOfRangeBoundedBeforeItIsRead: a read as of a position whose
// log up to the head holds more than max_past_changes changes is refused
// before anything reads the log, on every path a client reads the past
// by: a REST document and listing (as_of), a GraphQL query, aggregate
// and backlink (asOf, given inline or as a variable), and what a
// _ChangeSet(commit:) reads beyond its commit. The error is a 400
// (GraphQL: BAD_USER_INPUT) naming the setting and the oldest position a
// read of the past reaches, and a read as of that position is read.
// Before, every such read read and sorted every change from its position
// to the head, bounded only by statement_timeout. A subscription's
// events, which read as of their own commits, are bounded by it too
// (TestResumedEventsReadThePastWithinItsBound).
func TestReadAsOfRangeBoundedBeforeItIsRead(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxPastChanges = 5 })
	d.CreateDatabase(t, "bound", "type Person { name: String! friend: Person }")
	from := headPosition(t, d, "bound")
	whole := "-" + strconv.Itoa(sluice.WholeCommit)
	if !strings.HasSuffix(from, "-0"+whole) {
		t.Fatalf("a new database's log is at %s, not before its first commit", from)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bound", `[{"@type":"Person","@id":"p0","name":"A"},{"@type":"Person","@id":"p1","name":"B","friend":"Person/p0"},{"@type":"Person","@id":"p2","name":"C"}]`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/bound", `{"@type":"Person","@id":"Person/p0","name":"A2"}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bound", `[{"@type":"Person","@id":"p3","name":"D"},{"@type":"Person","@id":"p4","name":"E"}]`)
	third := strings.TrimSuffix(dt.Untag(headPosition(t, d, "bound")), whole)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bound", `[{"@type":"Person","@id":"p5","name":"F"},{"@type":"Person","@id":"p6","name":"G"},{"@type":"Person","@id":"p7","name":"H"},{"@type":"Person","@id":"p8","name":"I"}]`)
	now := dt.Untag(headPosition(t, d, "bound")) // the error names the head by its numbers
	// Commits 1 to 4 hold 3, 1, 2 and 4 changes: the last five follow
	// the first change of commit 3.
	oldest := third + "-0"
	want := "the log of admin/bound from as_of " + from + " to its head " + now + " holds more than 5 changes, the most a read of the past reads (max_past_changes): read as of a later position; the oldest one a read reaches now is " + oldest
	wantGQL := strings.Replace(want, "from as_of", "from asOf", 1)
	afterFirst := strings.Replace(from, "-0-", "-1-", 1)
	wantCommit := strings.Replace(want, "from as_of "+from, "from commit "+afterFirst, 1)

	for _, path := range []string{
		"/api/document/admin/bound?id=Person/p1&as_of=",
		"/api/document/admin/bound?as_of=",
		"/api/document/admin/bound?type=Person&as_of=",
	} {
		r := d.Do(t, dt.Admin(), "GET", path+url.QueryEscape(from), nil)
		var e struct {
			Message string `json:"api:message"`
		}
		if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != 400 || e.Message != want {
			t.Errorf("%s: %d %s, want 400 %q", path, r.Status, r.Body, want)
		}
	}
	for _, c := range []struct {
		query string
		vars  map[string]any
		want  string
	}{
		{`{ Person(asOf: "` + from + `") { _id } }`, nil, wantGQL},
		{`query($p: String) { Person(asOf: $p) { _id } }`, map[string]any{"p": from}, wantGQL},
		{`query($p: String) { Person_aggregate(asOf: $p) { count } }`, map[string]any{"p": from}, wantGQL},
		{`{ Person(asOf: "` + from + `", id: "Person/p0") { _friend_of_Person { _id } } }`, nil, wantGQL},
		// What a commit's changes are read with (a reference) is read
		// as of the commit: six changes after commit 1.
		{`{ _ChangeSet(commit: "1") { _CommitMetadata { _id } Person_added { friend { _id } } } }`, nil, wantCommit},
	} {
		body, _ := json.Marshal(map[string]any{"query": c.query, "variables": c.vars})
		r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/bound", body, "Content-Type", "application/json")
		var a gqlAnswer
		// A commit's own position carries its tag; the wanted positions
		// carry none.
		if err := json.Unmarshal(r.Body, &a); err != nil || len(a.Errors) != 1 || untagWords(a.Errors[0].Message) != c.want || a.Errors[0].Extensions.Code != "BAD_USER_INPUT" {
			t.Errorf("%s %v: %s, want BAD_USER_INPUT %q", c.query, c.vars, r.Body, c.want)
		}
	}

	// From the oldest position that fits, every path reads.
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/bound?id=Person/p0&as_of="+url.QueryEscape(oldest), nil); !strings.Contains(string(r.Body), `"name":"A2"`) {
		t.Errorf("Person/p0 as of %s: %s", oldest, r.Body)
	}
	if got := gqlData(t, d, dt.Admin(), "bound", `{ Person_aggregate(asOf: "`+oldest+`") { count } }`); got != `{"Person_aggregate":{"count":4}}` {
		t.Errorf("aggregate as of %s: %s", oldest, got)
	}

	// A subscription's events read as of their own commits under the
	// bound too: a stream resumed from before commit 1, seven changes
	// before the head, gets the bound's error in place of each of its
	// events whose references would be read as of it, then commit 3's,
	// four changes before the head, read as of it.
	body, _ := json.Marshal(map[string]string{"query": `subscription { Person_added { _id friend { name } } }`})
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/bound", Body: string(body),
		Header: []string{"Accept", "text/event-stream", "Last-Event-ID", from}})
	t.Cleanup(st.Close)
	st.Next() // : connected
	for _, want := range []string{`"limit":"max_past_changes"`, `"limit":"max_past_changes"`, `"limit":"max_past_changes"`, `"_id":"Person/p3","friend":null`} {
		if f := st.Event(); !strings.Contains(f.Field("data"), want) {
			t.Errorf("resumed subscription: %q, want %s", f.Field("data"), want)
		}
	}
}

// untagWords returns msg with each word that is a tagged position
// untagged.
func untagWords(msg string) string {
	words := strings.Split(msg, " ")
	for i, w := range words {
		words[i] = dt.Untag(w)
	}
	return strings.Join(words, " ")
}

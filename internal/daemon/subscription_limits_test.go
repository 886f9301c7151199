package daemon_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestSubscriptionEventsAreBounded: a subscription's events are bounded
// as a query's answer is, by graphql_max_response_bytes (each event's
// data) and graphql_max_result_rows (the documents its references read):
// an event past one is not sent, a next holding the error naming the
// bound comes in its place, and the stream goes on. Before, they had no
// bound: a document listing itself 60 times gave a 47 KB event under a
// 4,096-byte bound (depth 12 of documents listing each other gave one of
// 296 MB).
func TestSubscriptionEventsAreBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLMaxResponseBytes, c.GraphQLMaxResultRows = 4096, 3 })
	d.CreateDatabase(t, "subl", "type P { name: String friends: [P] }")
	self := func(name string, n int) string {
		return `{"@type":"P","@id":"P/a","name":"` + name + `","friends":[` + strings.TrimSuffix(strings.Repeat(`"P/a",`, n), ",") + `]}`
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subl", self("a", 60)+"\n"+friendsDocs(4), "Content-Type", "application/x-ndjson")
	open := func(q string) *dt.Stream {
		st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/subl",
			Header: []string{"Accept", "text/event-stream"}, Body: `{"query":"` + strings.ReplaceAll(q, `"`, `\"`) + `"}`})
		st.Next() // : connected
		return st
	}
	event := open(`subscription { P_updated(filter: {_id: "P/a"}) { _id friends { friends { name } } } }`)
	set := open(`subscription { _ChangeSet { P_updated(filter: {_id: "P/a"}) { friends { friends { name } } } } }`)
	rows := open(`subscription { P_updated(filter: {_id: "P/p0"}) { _id friends { name } } }`)
	next := func(st *dt.Stream, what string, want ...string) {
		t.Helper()
		f := st.Event()
		for _, w := range want {
			if !strings.Contains(f.String(), w) {
				t.Errorf("%s: %.400s\nwant it to contain %s", what, f, w)
			}
		}
	}

	// 3,600 names: about 47 KB.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/subl", self("a2", 60))
	tooLarge := []string{"event: next\n", `data: {"errors":[{"message":"the event is not sent: the response is larger than 4096 bytes`,
		`"extensions":{"code":"RESULT_TOO_LARGE","limit":"graphql_max_response_bytes"}`}
	next(event, "P_updated of 60 references to itself", append(tooLarge, `"path":["P_updated"]`)...)
	next(set, "_ChangeSet of 60 references to itself", append(tooLarge, `"path":["_ChangeSet"]`)...)
	// The streams go on.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/subl", self("a3", 1))
	next(event, "P_updated of one reference to itself", `data: {"data":{"P_updated":{"_id":"P/a","friends":[{"friends":[{"name":"a3"}]}]}}}`)
	next(set, "_ChangeSet of one reference to itself", `data: {"data":{"_ChangeSet":{"P_updated":[{"friends":[{"friends":[{"name":"a3"}]}]}]}}}`)

	// 4 friends: 4 documents read.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/subl", `{"@type":"P","@id":"P/p0","name":"p0 again","friends":["P/p0","P/p1","P/p2","P/p3"]}`)
	next(rows, "P_updated of 4 friends", `data: {"errors":[{"message":"the event is not sent: the request reads more than 3 documents`,
		`"path":["P_updated"]`, `"extensions":{"code":"RESULT_TOO_LARGE","limit":"graphql_max_result_rows"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/subl", `{"@type":"P","@id":"P/p0","name":"p0 alone","friends":["P/p1"]}`)
	next(rows, "P_updated of 1 friend", `data: {"data":{"P_updated":{"_id":"P/p0","friends":[{"name":"p1"}]}}}`)
}

// TestSubscriptionFilterLookupsAreBounded: a filter through a reference
// reads the referenced documents, which count towards
// graphql_max_result_rows with the rest of the commit's reads. Past the
// bound, the changes whose filters could no longer be evaluated get an
// error event each in place of theirs (the ones evaluated before keep
// theirs), and the stream goes on. Before, the referenced document read
// past the bound looked missing: the matching events were dropped
// unseen, and under _not non-matching ones were sent.
func TestSubscriptionFilterLookupsAreBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLMaxResultRows = 3 })
	d.CreateDatabase(t, "subf", "type P { name: String best: P }")
	var xs, as strings.Builder
	for i := range 5 {
		fmt.Fprintf(&xs, `{"@type":"P","@id":"P/x%d","name":"x"}`+"\n", i)
		fmt.Fprintf(&as, `{"@type":"P","@id":"P/a%d","name":"a%d","best":"P/x%d"}`+"\n", i, i, i)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subf", xs.String(), "Content-Type", "application/x-ndjson")
	open := func(q string) *dt.Stream {
		st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/subf",
			Header: []string{"Accept", "text/event-stream"}, Body: `{"query":"` + strings.ReplaceAll(q, `"`, `\"`) + `"}`})
		st.Next() // : connected
		return st
	}
	match := open(`subscription { P_added(filter: {best: {name: {eq: "x"}}}) { _id } }`)
	not := open(`subscription { P_added(filter: {_not: {best: {name: {eq: "x"}}}}) { _id } }`)
	// Five documents, each referring to a distinct one named x: five
	// documents to read for the filters, three allowed.
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subf", as.String(), "Content-Type", "application/x-ndjson")
	tooMany := `data: {"errors":[{"message":"the event is not sent: the request reads more than 3 documents`
	limit := `"path":["P_added"],"extensions":{"code":"RESULT_TOO_LARGE","limit":"graphql_max_result_rows"}`
	next := func(st *dt.Stream, what string, want ...string) {
		t.Helper()
		f := st.Event()
		for _, w := range want {
			if !strings.Contains(f.String(), w) {
				t.Errorf("%s: %.400s\nwant it to contain %s", what, f, w)
			}
		}
	}
	for i := range 3 {
		next(match, fmt.Sprintf("P_added of P/a%d", i), "event: next\n", fmt.Sprintf(`data: {"data":{"P_added":{"_id":"P/a%d"}}}`, i))
	}
	for i := 3; i < 5; i++ {
		next(not, fmt.Sprintf("P_added(_not) of P/a%d, past the rows bound", i), "event: next\n", tooMany, limit)
		next(match, fmt.Sprintf("P_added of P/a%d, past the rows bound", i), "event: next\n", tooMany, limit)
	}
	// The streams go on.
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subf", `{"@type":"P","@id":"P/b","name":"b","best":"P/x0"}`)
	next(match, "P_added of P/b", `data: {"data":{"P_added":{"_id":"P/b"}}}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subf", `{"@type":"P","@id":"P/c","name":"c"}`)
	next(not, "P_added(_not) of P/c", `data: {"data":{"P_added":{"_id":"P/c"}}}`)
}

// TestSubscriptionWalkIsBoundedPerEvent: resolving the references of a
// commit's events visits at most graphql_max_response_bytes objects and
// references for each event, as each event's data holds at most that
// many bytes. Before, the bound was for all the events of the commit
// together: 60 events of 100 references each (about 1.4 KB each, under a
// 4,096-byte bound) were all replaced by the error.
func TestSubscriptionWalkIsBoundedPerEvent(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLMaxResponseBytes = 4096 })
	d.CreateDatabase(t, "subw", "type P { name: String friends: [P] }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subw", friendsDocs(4), "Content-Type", "application/x-ndjson")
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/subw",
		Header: []string{"Accept", "text/event-stream"}, Body: `{"query":"subscription { P_added { _id friends { name } } }"}`})
	st.Next() // : connected
	var refs []string
	for i := range 100 {
		refs = append(refs, fmt.Sprintf(`"P/p%d"`, i%4))
	}
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, `{"@type":"P","@id":"P/n%d","name":"n%d","friends":[%s]}`+"\n", i, i, strings.Join(refs, ","))
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subw", b.String(), "Content-Type", "application/x-ndjson")
	for i := range 60 {
		f := st.Event().String()
		want := fmt.Sprintf(`data: {"data":{"P_added":{"_id":"P/n%d","friends":[{"name":"p0"},{"name":"p1"},`, i)
		if !strings.Contains(f, want) {
			t.Fatalf("event %d: %.400s\nwant it to contain %s", i, f, want)
		}
	}
}

// TestSubscriptionReadsAreBounded: the documents a subscription event
// reads are bounded as a query's are, at four times
// graphql_max_response_bytes as Postgres sends them, by a class's events
// and _ChangeSet's alike: 30 friends of 2,000 bytes each are more than
// 16 KiB to read, though their ids are a small answer.
func TestSubscriptionReadsAreBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLMaxResponseBytes = 4096 })
	d.CreateDatabase(t, "subr", "type P { name: String friends: [P] }")
	var docs, friends []string
	for i := range 30 {
		docs = append(docs, fmt.Sprintf(`{"@type":"P","@id":"P/p%02d","name":%q}`, i, strings.Repeat("x", 2000)))
		friends = append(friends, fmt.Sprintf(`"P/p%02d"`, i))
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subr", strings.Join(docs, "\n"), "Content-Type", "application/x-ndjson")
	open := func(q string) *dt.Stream {
		st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/subr",
			Header: []string{"Accept", "text/event-stream"}, Body: `{"query":"` + strings.ReplaceAll(q, `"`, `\"`) + `"}`})
		st.Next() // : connected
		return st
	}
	event := open(`subscription { P_added(filter: {_id: "P/hub"}) { friends { _id } } }`)
	set := open(`subscription { _ChangeSet { P_added(filter: {_id: "P/hub"}) { friends { _id } } } }`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subr", `{"@type":"P","@id":"P/hub","name":"hub","friends":[`+strings.Join(friends, ",")+`]}`)
	for what, st := range map[string]*dt.Stream{"P_added": event, "_ChangeSet": set} {
		// A query's advice (limit and offset) is not an event's.
		if f := st.Event().String(); !strings.Contains(f, "the documents the request reads are larger than 16384 bytes") || !strings.Contains(f, `"limit":"graphql_max_response_bytes"`) ||
			strings.Contains(f, "limit and offset") || !strings.Contains(f, "select fewer fields or levels of references") {
			t.Errorf("%s of 30 large friends: %.400s", what, f)
		}
	}
}

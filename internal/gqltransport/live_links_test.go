package gqltransport_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// notesSDL has a reference (owner) declared by an interface, so that its
// backlinks list documents of two classes, and a list of references.
const notesSDL = `
type User { name: String! }
interface Owned { owner: User title: String rank: Int }
type Note implements Owned { watchers: [User!] }
type Task implements Owned { done: Boolean }
`

func note(id, owner, title string, rank int) string {
	return fmt.Sprintf(`{"@type":"Note","@id":"Note/%s","owner":"User/%s","title":%q,"rank":%d}`, id, owner, title, rank)
}

// TestLiveQueryFollowsBacklinks: a live query through backlinks on one
// daemon, the commits made through another on the same Postgres. A
// referencing document added, re-pointed away or to the document,
// changed in a selected field or deleted gives a new result; one that
// changes nothing the result shows (a document pointing at another, a
// field not selected) sends nothing: the next result stands at the
// commit that changed it. A per-document subscription selecting a
// backlink reads it too.
func TestLiveQueryFollowsBacklinks(t *testing.T) {
	t.Parallel()
	d1 := dt.Start(t)
	d1.CreateDatabase(t, "notes", notesSDL)
	d2 := dt.Start(t, dt.WithDatabaseURL(d1.DatabaseURL))
	w := &writer{t: t, d: d2, db: "notes"}
	w.insert(`[{"@type":"User","@id":"User/a","name":"Ann"},{"@type":"User","@id":"User/b","name":"Bob"}]`)
	w.insert(note("n1", "a", "one", 1))

	s := subscribe(t, d1, "notes", `subscription { User(id: "User/a") { name _owner_of_Owned(orderBy: {title: ASC}) { _id title } _watchers_of_Note { _id } } }`)
	added := subscribe(t, d1, "notes", `subscription { Note_added { _id owner { name _owner_of_Note { _id } } } }`)
	for _, st := range []*stream{s, added} {
		st.connected()
	}
	s.expect(2, `{"User":[{"name":"Ann","_owner_of_Owned":[{"_id":"Note/n1","title":"one"}],"_watchers_of_Note":[]}]}`)

	seq := w.insert(note("n2", "a", "two", 2)) // added
	s.expect(seq, `{"User":[{"name":"Ann","_owner_of_Owned":[{"_id":"Note/n1","title":"one"},{"_id":"Note/n2","title":"two"}],"_watchers_of_Note":[]}]}`)
	if _, data := added.nexts(1); data[0] != `{"data":{"Note_added":{"_id":"Note/n2","owner":{"name":"Ann","_owner_of_Note":[{"_id":"Note/n1"},{"_id":"Note/n2"}]}}}}` {
		t.Fatalf("Note_added with a backlink: %s", data[0])
	}

	w.insert(note("n3", "b", "three", 3))      // points at another document
	w.replace(note("n2", "a", "two", 20))      // a field not selected
	seq = w.replace(note("n1", "b", "one", 1)) // re-pointed away
	s.expect(seq, `{"User":[{"name":"Ann","_owner_of_Owned":[{"_id":"Note/n2","title":"two"}],"_watchers_of_Note":[]}]}`)
	seq = w.insert(`{"@type":"Task","@id":"Task/t1","owner":"User/a","title":"a task","rank":1}`) // another class of the interface
	s.expect(seq, `{"User":[{"name":"Ann","_owner_of_Owned":[{"_id":"Task/t1","title":"a task"},{"_id":"Note/n2","title":"two"}],"_watchers_of_Note":[]}]}`)
	seq = w.replace(note("n3", "a", "three", 3)) // re-pointed to it
	s.expect(seq, `{"User":[{"name":"Ann","_owner_of_Owned":[{"_id":"Task/t1","title":"a task"},{"_id":"Note/n3","title":"three"},{"_id":"Note/n2","title":"two"}],"_watchers_of_Note":[]}]}`)
	seq = w.replace(`{"@type":"Note","@id":"Note/n2","owner":"User/a","title":"zwei","rank":20,"watchers":["User/b","User/a"]}`) // a selected field, and a list
	s.expect(seq, `{"User":[{"name":"Ann","_owner_of_Owned":[{"_id":"Task/t1","title":"a task"},{"_id":"Note/n3","title":"three"},{"_id":"Note/n2","title":"zwei"}],"_watchers_of_Note":[{"_id":"Note/n2"}]}]}`)
	seq = w.delete("Note/n3")
	s.expect(seq, `{"User":[{"name":"Ann","_owner_of_Owned":[{"_id":"Task/t1","title":"a task"},{"_id":"Note/n2","title":"zwei"}],"_watchers_of_Note":[{"_id":"Note/n2"}]}]}`)
}

// TestLiveAggregates: a live count and sum on one daemon, commits through
// another. A commit that leaves the value as it is (a document outside
// the filter, a change of a counted document that moves no aggregate)
// sends nothing; one that moves it sends the new value, at its commit.
func TestLiveAggregates(t *testing.T) {
	t.Parallel()
	d1 := dt.Start(t)
	d1.CreateDatabase(t, "agg", notesSDL)
	d2 := dt.Start(t, dt.WithDatabaseURL(d1.DatabaseURL))
	w := &writer{t: t, d: d2, db: "agg"}
	w.insert(`[{"@type":"User","@id":"User/a","name":"Ann"}]`)
	w.insert(note("n1", "a", "one", 2))

	s := subscribe(t, d1, "agg", `subscription { Note_aggregate(filter: {rank: {ge: 2}}) { count sum { rank } max { title } } }`)
	all := mustOpen(t, d1, dt.Admin(), http.MethodPost, "/api/graphql/admin/agg", body(`query @live { Owned_aggregate { count } }`), nil, "Accept", sse)
	for _, st := range []*stream{s, all} {
		st.connected()
	}
	s.expect(2, `{"Note_aggregate":{"count":1,"sum":{"rank":"2"},"max":{"title":"one"}}}`)
	all.expect(2, `{"Owned_aggregate":{"count":1}}`)

	seq := w.insert(note("n2", "a", "low", 1)) // outside the filter
	all.expect(seq, `{"Owned_aggregate":{"count":2}}`)
	w.replace(`{"@type":"Note","@id":"Note/n1","owner":"User/a","title":"one","rank":2,"watchers":["User/a"]}`) // counted, moves nothing
	seq = w.insert(note("n3", "a", "two", 5))
	s.expect(seq, `{"Note_aggregate":{"count":2,"sum":{"rank":"7"},"max":{"title":"two"}}}`)
	all.expect(seq, `{"Owned_aggregate":{"count":3}}`)
	seq = w.replace(note("n2", "a", "low", 3)) // enters the filter
	s.expect(seq, `{"Note_aggregate":{"count":3,"sum":{"rank":"10"},"max":{"title":"two"}}}`)
	w.insert(`{"@type":"User","@id":"User/b","name":"Bob"}`) // another class
	seq = w.delete("Note/n3")
	s.expect(seq, `{"Note_aggregate":{"count":2,"sum":{"rank":"5"},"max":{"title":"one"}}}`)
	all.expect(seq, `{"Owned_aggregate":{"count":2}}`)
}

// TestSubscriptionBacklinksBounded: the documents of a subscription's
// events come from the commit, but what they reference and what points
// at them is data: an event reads at most graphql_max_result_rows
// documents, as a query does, and one that would read more is not sent:
// a next with that limit's error comes in its place, at its id, and the
// stream goes on.
func TestSubscriptionBacklinksBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLMaxResultRows = 3 })
	d.CreateDatabase(t, "bound", notesSDL)
	w := &writer{t: t, d: d, db: "bound"}
	w.insert(`[{"@type":"User","@id":"User/a","name":"Ann"},{"@type":"User","@id":"User/b","name":"Bob"}]`)
	s := subscribe(t, d, "bound", `subscription { Note_added { _id owner { _owner_of_Note { _id } } } }`)
	s.connected()
	w.insert(note("n1", "a", "one", 1))
	w.insert(note("n2", "a", "two", 2)) // its owner and 2 backlinks: 3 documents
	if _, data := s.nexts(2); data[1] != `{"data":{"Note_added":{"_id":"Note/n2","owner":{"_owner_of_Note":[{"_id":"Note/n1"},{"_id":"Note/n2"}]}}}}` {
		t.Fatalf("within the bound: %q", data)
	}
	seq := w.insert(note("n3", "a", "three", 3)) // 4 documents
	ids, data := s.nexts(1)
	if !strings.Contains(ids[0], fmt.Sprintf("-%d-", seq)) ||
		data[0] != `{"errors":[{"message":"the event is not sent: the request reads more than 3 documents; select fewer fields or levels of references, or read the changed document by a query as of the event's position (asOf, its id) (limit graphql_max_result_rows)","path":["Note_added"],"extensions":{"code":"RESULT_TOO_LARGE","limit":"graphql_max_result_rows"}}]}` {
		t.Fatalf("an event over the bound: %q %q", ids, data)
	}
	w.insert(note("n4", "b", "four", 4)) // the stream goes on
	if _, data := s.nexts(1); data[0] != `{"data":{"Note_added":{"_id":"Note/n4","owner":{"_owner_of_Note":[{"_id":"Note/n4"}]}}}}` {
		t.Fatalf("after the event over the bound: %q", data)
	}
}

// TestLiveAggregateOutOfRangeGoesOn: a live aggregate whose value the
// documents put out of its type's range (a Float sum past the largest
// float) is a result with that error, as a query answers it, and the live
// query goes on: a commit that brings the sum back sends its value. It
// ended the stream, as a read that fails does, though a commit mends it,
// and a client starting it again was refused until one did.
func TestLiveAggregateOutOfRangeGoesOn(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "range", "type F { x: Float }")
	w := &writer{t: t, d: d, db: "range"}
	w.insert(`{"@type":"F","@id":"F/a","x":1e308}`)
	s := subscribe(t, d, "range", `subscription { F_aggregate { count sum { x } } }`)
	s.connected()
	s.expect(1, `{"F_aggregate":{"count":1,"sum":{"x":1e+308}}}`)

	seq := w.insert(`{"@type":"F","@id":"F/b","x":1e308}`) // the sum is past the largest float
	const outOfRange = `{"errors":[{"message":"an aggregate of F is out of the range of its type (sum.x: a Float past ±1.8e308)","path":["F_aggregate"],"extensions":{"code":"BAD_USER_INPUT"}}],"data":null,`
	ids, data := s.nexts(1)
	if !strings.Contains(ids[0], fmt.Sprintf("-%d-", seq)) || !strings.HasPrefix(data[0], outOfRange) {
		t.Fatalf("a sum past the largest float: %q %q", ids, data)
	}
	seq = w.delete("F/a")
	s.expect(seq, `{"F_aggregate":{"count":1,"sum":{"x":1e+308}}}`)
}

// TestLiveCohortReadsApart: the live queries of a cohort (one query,
// other variables) read one after the other in one snapshot, and one
// whose statement fails there (a BigInt sum past numeric's range, after
// its first statement) leaves the others' reads as they were: the failed
// statement ended the snapshot's transaction, and every later read of
// the batch failed ("current transaction is aborted", an internal error),
// ending live queries whose own reads were fine, whoever's they were.
func TestLiveCohortReadsApart(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "cohort", "type F { g: String b: BigInt }")
	w := &writer{t: t, d: d, db: "cohort"}
	huge := strings.Repeat("9", 131072) // two of them sum past numeric's range
	w.insert(`[{"@type":"F","@id":"F/x1","g":"big","b":"` + huge + `"},{"@type":"F","@id":"F/x2","g":"big","b":"` + huge + `"},{"@type":"F","@id":"F/s","g":"small","b":"1"}]`)
	const q = `query($g: String) @live { F(filter: {g: {eq: $g}}) { _id } F_aggregate(filter: {g: {eq: $g}}) { count sum { b } } }`
	big := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/cohort", body(q, "variables", map[string]any{"g": "big"}), nil, "Accept", sse)
	big.connected()
	if _, data := big.nexts(1); !strings.Contains(data[0], "out of the range of its type") {
		t.Fatalf("the sum past the range: %q", data)
	}
	small := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/cohort", body(q, "variables", map[string]any{"g": "small"}), nil, "Accept", sse)
	small.connected()
	small.expect(1, `{"F":[{"_id":"F/s"}],"F_aggregate":{"count":1,"sum":{"b":"1"}}}`)

	// One commit changes both: they are read together, the failing one first.
	seq := w.insert(`[{"@type":"F","@id":"F/y1","g":"big","b":"0"},{"@type":"F","@id":"F/y2","g":"small","b":"2"}]`)
	small.expect(seq, `{"F":[{"_id":"F/s"},{"_id":"F/y2"}],"F_aggregate":{"count":2,"sum":{"b":"3"}}}`)
}

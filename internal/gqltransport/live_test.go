package gqltransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// staffSDL has a reference (manager), a protected field and a second
// class.
const staffSDL = `
type Person { name: String! team: String age: Int manager: Person ssn: String @private }
type Team { name: String! }
`

// liveResult is one result of a live query: the commit its position
// stands at, and its data.
type liveResult struct {
	seq  int64
	data string
}

// result reads the next event of a live query's SSE stream and checks
// that its position is its SSE id, its extensions.position and its
// extensions.lastEventId.
func (s *stream) result() liveResult {
	s.t.Helper()
	f := s.Event()
	if len(f) != 3 || f[0] != "event: next" || !idRE.MatchString(f[1]) {
		s.t.Fatalf("not a live query result: %q", f)
	}
	s.last = f.Field("id")
	return parseLiveResult(s.t, s.last, f.Field("data"))
}

// parseResult checks a live query result message whose position is id.
func parseLiveResult(t testing.TB, id, msg string) liveResult {
	t.Helper()
	var m struct {
		Data       json.RawMessage `json:"data"`
		Errors     json.RawMessage `json:"errors"`
		Extensions struct {
			Position    string `json:"position"`
			LastEventID string `json:"lastEventId"`
		} `json:"extensions"`
	}
	if err := json.Unmarshal([]byte(msg), &m); err != nil || m.Errors != nil {
		t.Fatalf("result %s: %v", msg, err)
	}
	if m.Extensions.Position != id || m.Extensions.LastEventID != id || !strings.HasSuffix(dt.Untag(id), "-2147483647") {
		t.Fatalf("result at %s carries position %q and lastEventId %q: %s", id, m.Extensions.Position, m.Extensions.LastEventID, msg)
	}
	parts := strings.Split(id, "-")
	seq, _ := strconv.ParseInt(parts[1], 10, 64)
	return liveResult{seq: seq, data: string(m.Data)}
}

// expect reads the next result and checks it stands at commit seq and
// holds data.
func (s *stream) expect(seq int64, data string) {
	s.t.Helper()
	if r := s.result(); r.seq != seq || r.data != data {
		s.t.Fatalf("result at commit %d: %s\nwant at %d:       %s", r.seq, r.data, seq, data)
	}
}

// writer makes commits on a database through daemon d, counting them: a
// database's commits are numbered from 1, so the count is the newest
// commit's sequence number.
type writer struct {
	t   testing.TB
	d   *dt.Daemon
	db  string
	seq int64
}

func (w *writer) do(method, docs string) int64 {
	w.t.Helper()
	w.d.MustDo(w.t, http.StatusOK, dt.Admin(), method, "/api/document/admin/"+w.db, docs)
	w.seq++
	return w.seq
}

func (w *writer) insert(docs string) int64  { w.t.Helper(); return w.do(http.MethodPost, docs) }
func (w *writer) replace(docs string) int64 { w.t.Helper(); return w.do(http.MethodPut, docs) }
func (w *writer) delete(id string) int64 {
	w.t.Helper()
	w.d.MustDo(w.t, http.StatusOK, dt.Admin(), http.MethodDelete, "/api/document/admin/"+w.db+"?id="+id, nil)
	w.seq++
	return w.seq
}

func person(id, name, team, manager string) string {
	m := ""
	if manager != "" {
		m = `,"manager":"Person/` + manager + `"`
	}
	return fmt.Sprintf(`{"@type":"Person","@id":"Person/%s","name":%q,"team":%q%s}`, id, name, team, m)
}

// TestLiveQueryFollowsCommits: a live query over SSE on one daemon, the
// commits made through another on the same Postgres. Its first result is
// the current one; each commit that changes the result gives the new
// result at that commit's position, and a commit that does not (a
// document outside the filter, another class, a change past the limit, a
// field not selected) sends nothing: the next result stands at the
// commit that changed it.
func TestLiveQueryFollowsCommits(t *testing.T) {
	t.Parallel()
	d1 := dt.Start(t)
	d1.CreateDatabase(t, "staff", staffSDL)
	d2 := dt.Start(t, dt.WithDatabaseURL(d1.DatabaseURL))
	w := &writer{t: t, d: d2, db: "staff"}
	w.insert(person("m", "Mia", "y", ""))
	w.insert(person("a", "Ann", "x", "m"))
	w.insert(person("b", "Bob", "x", ""))

	const sel = `Person(filter: {team: {eq: $t}}, orderBy: {name: ASC}, limit: 2) { _id name manager { name } }`
	q := `subscription Team($t: String) { ` + sel + ` }`
	s := mustOpen(t, d1, dt.Admin(), http.MethodPost, "/api/graphql/admin/staff", body(q, "variables", map[string]any{"t": "x"}), nil, "Accept", sse)
	s.connected()
	s.expect(3, `{"Person":[{"_id":"Person/a","name":"Ann","manager":{"name":"Mia"}},{"_id":"Person/b","name":"Bob","manager":null}]}`)

	w.insert(person("c", "Cat", "x", ""))                  // 4: past the limit
	w.insert(person("z", "Zed", "y", ""))                  // 5: outside the filter
	w.insert(`{"@type":"Team","@id":"Team/t","name":"T"}`) // 6: another class
	seq := w.insert(person("al", "Al", "x", "m"))          // first in order: Bob leaves the page
	s.expect(seq, `{"Person":[{"_id":"Person/al","name":"Al","manager":{"name":"Mia"}},{"_id":"Person/a","name":"Ann","manager":{"name":"Mia"}}]}`)

	seq = w.replace(person("a", "Ann", "y", "m")) // leaves the filter
	s.expect(seq, `{"Person":[{"_id":"Person/al","name":"Al","manager":{"name":"Mia"}},{"_id":"Person/b","name":"Bob","manager":null}]}`)

	seq = w.replace(person("m", "Mina", "y", "")) // the referenced document
	s.expect(seq, `{"Person":[{"_id":"Person/al","name":"Al","manager":{"name":"Mina"}},{"_id":"Person/b","name":"Bob","manager":null}]}`)

	seq = w.delete("Person/al") // Cat enters the page
	s.expect(seq, `{"Person":[{"_id":"Person/b","name":"Bob","manager":null},{"_id":"Person/c","name":"Cat","manager":null}]}`)

	w.replace(`{"@type":"Person","@id":"Person/c","name":"Cat","team":"x","age":3}`) // a field not selected
	seq = w.replace(person("b", "Bo", "x", ""))
	s.expect(seq, `{"Person":[{"_id":"Person/b","name":"Bo","manager":null},{"_id":"Person/c","name":"Cat","manager":null}]}`)

	// The @live spelling of the same query, on the first daemon too.
	l := mustOpen(t, d1, dt.Admin(), http.MethodPost, "/api/graphql/admin/staff",
		body(`query Team($t: String) @live { `+sel+` }`, "variables", map[string]any{"t": "x"}), nil, "Accept", sse)
	l.connected()
	l.expect(seq, `{"Person":[{"_id":"Person/b","name":"Bo","manager":null},{"_id":"Person/c","name":"Cat","manager":null}]}`)
	seq = w.delete("Person/c")
	for _, st := range []*stream{s, l} {
		st.expect(seq, `{"Person":[{"_id":"Person/b","name":"Bo","manager":null}]}`)
	}
}

// metric returns the sum of a metric of d's /metrics.
func metric(t testing.TB, d *dt.Daemon, name string) float64 {
	t.Helper()
	return dt.MetricValue(string(d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/metrics", nil).Body), name)
}

// TestLiveQueryCosts: identical live queries share one evaluation, and
// live queries that differ only in their variables one change feed
// subscription; a commit costs a read only for the results it can
// change: one of another class, or of a document no filter takes, costs
// none. (A result is read before it is published, so once a client has
// it the counters count it.)
func TestLiveQueryCosts(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "cost", staffSDL)
	w := &writer{t: t, d: d, db: "cost"}
	w.insert(person("a", "Ann", "x", ""))
	q := `subscription S($t: String) { Person(filter: {team: {eq: $t}}) { name } }`
	open := func(team string) *stream {
		s := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/cost", body(q, "variables", map[string]any{"t": team}), nil, "Accept", sse)
		s.connected()
		return s
	}
	// y opens once x's result is read, so that the two first results are
	// two reads (read together, they would be one: below).
	x1, x2 := open("x"), open("x")
	x1.expect(1, `{"Person":[{"name":"Ann"}]}`)
	x2.expect(1, `{"Person":[{"name":"Ann"}]}`)
	y := open("y")
	y.expect(1, `{"Person":[]}`)
	if got := metric(t, d, "sluice_live_query_reads_total"); got != 2 {
		t.Fatalf("%v reads for the first results of two shares, want 2", got)
	}
	var subs []struct{ ID uint64 }
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/admin/subscriptions", nil).Body, &subs); err != nil || len(subs) != 1 {
		t.Fatalf("change feed subscriptions of one cohort: %v (%v)", subs, err)
	}

	w.insert(`{"@type":"Team","@id":"Team/t","name":"T"}`)
	w.insert(person("z", "Zed", "z", ""))
	seq := w.insert(person("b", "Bob", "x", ""))
	x1.expect(seq, `{"Person":[{"name":"Ann"},{"name":"Bob"}]}`)
	x2.expect(seq, `{"Person":[{"name":"Ann"},{"name":"Bob"}]}`)
	for name, want := range map[string]float64{"sluice_live_query_reads_total": 3, "sluice_live_query_statements_total": 3, "sluice_live_query_results_total": 3} {
		if got := metric(t, d, name); got != want {
			t.Errorf("%s = %v after three commits of which one changed one result, want %v", name, got, want)
		}
	}
	seq = w.insert(person("c", "Cy", "y", ""))
	y.expect(seq, `{"Person":[{"name":"Cy"}]}`)
	seq = w.insert(person("d", "Di", "x", ""))
	x1.expect(seq, `{"Person":[{"name":"Ann"},{"name":"Bob"},{"name":"Di"}]}`)
	if got := metric(t, d, "sluice_live_query_reads_total"); got != 5 {
		t.Errorf("%v reads, want 5", got)
	}
	// A commit that changes the results of both variable sets has them
	// read together: one snapshot, one statement (a cohort's batch).
	statements := metric(t, d, "sluice_live_query_statements_total")
	seq = w.insert("[" + person("e", "Eve", "x", "") + "," + person("f", "Flo", "y", "") + "]")
	x1.expect(seq, `{"Person":[{"name":"Ann"},{"name":"Bob"},{"name":"Di"},{"name":"Eve"}]}`)
	y.expect(seq, `{"Person":[{"name":"Cy"},{"name":"Flo"}]}`)
	if got := metric(t, d, "sluice_live_query_reads_total"); got != 6 {
		t.Errorf("%v reads after a commit changing two results of a cohort, want 6", got)
	}
	if got := metric(t, d, "sluice_live_query_statements_total") - statements; got != 1 {
		t.Errorf("%v statements for two results of a cohort, want 1", got)
	}
	// A document that moves from one variable set's filter to the
	// other's changes both results (found by its value before and after).
	seq = w.replace(person("e", "Eve", "y", ""))
	x1.expect(seq, `{"Person":[{"name":"Ann"},{"name":"Bob"},{"name":"Di"}]}`)
	y.expect(seq, `{"Person":[{"name":"Cy"},{"name":"Eve"},{"name":"Flo"}]}`)
	// A filter of a number or of two fields still finds what changes it.
	n := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/cost",
		body(`subscription { Person(filter: {age: {eq: 7}, _or: [{team: {eq: "x"}}, {team: {eq: "y"}}]}) { name } }`), nil, "Accept", sse)
	n.connected()
	n.expect(seq, `{"Person":[]}`)
	seq = w.replace(`{"@type":"Person","@id":"Person/f","name":"Flo","team":"y","age":7}`) // y's result stays as it is
	n.expect(seq, `{"Person":[{"name":"Flo"}]}`)
}

// TestLiveQueryBurst: commits in quick succession may be coalesced, but
// every result is a state the database was in at its position, positions
// only grow, and the last state arrives.
func TestLiveQueryBurst(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "burst", staffSDL)
	s := subscribe(t, d, "burst", `subscription { Person(orderBy: {name: ASC}) { name } }`)
	s.connected()
	s.expect(0, `{"Person":[]}`)
	const n = 30
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= n; i++ {
			req, _ := http.NewRequest(http.MethodPost, d.URL+"/api/document/admin/burst", strings.NewReader(person(fmt.Sprint(i), fmt.Sprintf("p%02d", i), "x", "")))
			dt.Admin()(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("commit %d: %v", i, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("commit %d: status %d", i, resp.StatusCode)
				return
			}
		}
	}()
	// The state at commit k holds p01 … pk.
	state := func(k int64) string {
		var names []string
		for i := int64(1); i <= k; i++ {
			names = append(names, fmt.Sprintf(`{"name":"p%02d"}`, i))
		}
		return `{"Person":[` + strings.Join(names, ",") + `]}`
	}
	results, last := 0, int64(0)
	for last < n {
		r := s.result()
		results++
		if r.seq <= last || r.data != state(r.seq) {
			t.Fatalf("result %d at commit %d after one at %d: %s", results, r.seq, last, r.data)
		}
		last = r.seq
	}
	<-done
	t.Logf("%d commits gave %d results", n, results)
}

// TestLiveQuerySubclassesAndCommits: a live query of an abstract parent
// lists its subclasses' documents with their own fields through
// `... on`, and each document's _CommitMetadata follows the commit that
// last wrote it; one of a concrete parent with include_children: false
// lists its own documents only, and a commit of a subclass's document
// sends it nothing.
func TestLiveQuerySubclassesAndCommits(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", `
interface Animal { name: String! }
type Dog implements Animal { breed: String }
type Cat implements Animal { lives: Int }
interface Pet @concrete { name: String! }
type Hamster implements Pet { wheel: Boolean }
`)
	w := &writer{t: t, d: d, db: "zoo"}
	w.insert(`{"@type":"Dog","@id":"Dog/d","name":"d","breed":"lab"}`)
	open := func(q string) *stream {
		s := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/zoo", body("subscription { "+q+" }"), nil, "Accept", sse)
		s.connected()
		return s
	}
	animals := open(`Animal(orderBy: {name: ASC}) { _id name ... on Dog { breed } ... on Cat { lives } _CommitMetadata { _id } }`)
	own := open(`Pet(include_children: false, orderBy: {name: ASC}) { _id _type }`)
	pets := open(`Pet(orderBy: {name: ASC}) { _id _type }`)
	animals.expect(1, `{"Animal":[{"_id":"Dog/d","name":"d","breed":"lab","_CommitMetadata":{"_id":"1"}}]}`)
	own.expect(1, `{"Pet":[]}`)
	pets.expect(1, `{"Pet":[]}`)

	cat := `{"_id":"Cat/c","name":"c","lives":9,"_CommitMetadata":{"_id":"2"}}`
	seq := w.insert(`{"@type":"Cat","@id":"Cat/c","name":"c","lives":9}`)
	animals.expect(seq, `{"Animal":[`+cat+`,{"_id":"Dog/d","name":"d","breed":"lab","_CommitMetadata":{"_id":"1"}}]}`)
	seq = w.replace(`{"@type":"Dog","@id":"Dog/d","name":"d","breed":"pug"}`)
	animals.expect(seq, `{"Animal":[`+cat+`,{"_id":"Dog/d","name":"d","breed":"pug","_CommitMetadata":{"_id":"3"}}]}`)

	seq = w.insert(`{"@type":"Hamster","@id":"Hamster/h","name":"h","wheel":true}`)
	pets.expect(seq, `{"Pet":[{"_id":"Hamster/h","_type":"Hamster"}]}`)
	seq = w.insert(`{"@type":"Pet","@id":"Pet/p","name":"p"}`)
	pets.expect(seq, `{"Pet":[{"_id":"Hamster/h","_type":"Hamster"},{"_id":"Pet/p","_type":"Pet"}]}`)
	// own's next result is this one: the commits before sent it nothing.
	own.expect(seq, `{"Pet":[{"_id":"Pet/p","_type":"Pet"}]}`)
	// Nor did any to animals since the Dog's.
	seq = w.delete("Cat/c")
	animals.expect(seq, `{"Animal":[{"_id":"Dog/d","name":"d","breed":"pug","_CommitMetadata":{"_id":"3"}}]}`)
}

// TestLiveQueryReadsOnlyBeforeItsBoundary: a live query of the first
// documents in an order, up to a limit, over a class that grows past its
// last row: those commits cannot change its full result and cost no read;
// one that sorts before the last row, moves a document across it, or
// removes a row of the result, is read and sent.
func TestLiveQueryReadsOnlyBeforeItsBoundary(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "bound", `type Item { n: Int! }`)
	w := &writer{t: t, d: d, db: "bound"}
	item := func(id string, n int) string { return fmt.Sprintf(`{"@type":"Item","@id":"Item/%s","n":%d}`, id, n) }
	w.insert(item("a", 10))
	seq := w.insert(item("b", 20))
	s := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/bound",
		body(`subscription { Item(orderBy: {n: ASC}, limit: 2) { _id n } }`), nil, "Accept", sse)
	s.connected()
	s.expect(seq, `{"Item":[{"_id":"Item/a","n":10},{"_id":"Item/b","n":20}]}`)
	reads := metric(t, d, "sluice_live_query_reads_total")

	for i := range 5 {
		w.insert(item(fmt.Sprint("p", i), 30+i)) // past the last row
	}
	w.insert(item("bb", 20))  // the last row's n, an id after its id
	w.replace(item("p0", 40)) // moved, still past the last row
	w.delete("Item/p1")
	seq = w.insert(item("c", 15)) // before the last row: b leaves
	s.expect(seq, `{"Item":[{"_id":"Item/a","n":10},{"_id":"Item/c","n":15}]}`)
	if got := metric(t, d, "sluice_live_query_reads_total") - reads; got != 1 {
		t.Errorf("%v reads for eight commits past the result's last row and one before it, want 1", got)
	}

	seq = w.replace(item("b", 5)) // from past the last row to the first
	s.expect(seq, `{"Item":[{"_id":"Item/b","n":5},{"_id":"Item/a","n":10}]}`)
	seq = w.delete("Item/a") // a row of the result: c comes back
	s.expect(seq, `{"Item":[{"_id":"Item/b","n":5},{"_id":"Item/c","n":15}]}`)
	seq = w.replace(item("c", 100)) // the last row moves past others
	s.expect(seq, `{"Item":[{"_id":"Item/b","n":5},{"_id":"Item/bb","n":20}]}`)
}

// TestLiveQueryRefusesAsOf: a live query follows the present; a root
// field with asOf asks for a past state, which its runs would read as the
// present instead. It is refused naming the field, for a query and an
// aggregate, by a literal or a variable. (Subscription fields have no
// asOf.)
func TestLiveQueryRefusesAsOf(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "staff", staffSDL)
	w := &writer{t: t, d: d, db: "staff"}
	w.insert(person("a", "Ann", "x", ""))
	for _, q := range []string{
		`query @live { Person(asOf: "garbage") { name } }`,
		`query($at: String) @live { now: Person { name } then: Person(asOf: $at) { name } }`,
		`query($at: String) @live { Person_aggregate(asOf: $at) { count } }`,
	} {
		s := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/staff", body(q, "variables", map[string]any{"at": "garbage"}), nil, "Accept", sse)
		if f := s.Event(); !strings.Contains(f.Field("data"), "a live query follows the present, and asOf reads a past state") {
			t.Errorf("%s: %q", q, f)
		}
		s.Close()
	}
}

// TestLiveIfNull: @live(if: null), literal or a variable, is an ordinary
// query, as the graphql-live-query convention reads it: answered once,
// then the stream ends. Only if left out is it true. (A null was taken
// as true, and the query stayed open.)
func TestLiveIfNull(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "ifnull", staffSDL)
	for _, b := range []string{
		body(`query @live(if: null) { Person { _id } }`),
		body(`query Q($l: Boolean) @live(if: $l) { Person { _id } }`, "variables", map[string]any{"l": nil}),
	} {
		s, _ := d.OpenStream(t, dt.Admin(), dt.StreamRequest{Method: http.MethodPost, Path: "/api/graphql/admin/ifnull", Body: b,
			Header: []string{"Accept", sse}})
		frames := s.Ended()
		if len(frames) != 2 || !strings.Contains(fmt.Sprint(frames[0]), `{"Person":[]}`) {
			t.Errorf("%s: frames %v, want one result and complete", b, frames)
		}
	}
}

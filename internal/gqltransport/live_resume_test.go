package gqltransport_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/jsonpatch"
)

// TestLiveQueryResume: a live query resumed from a result's position
// (Last-Event-ID, ?lastEventId= on a GET, extensions.lastEventId) gets,
// when nothing since can have changed its result, the SSE event of only
// an id (its result is current at that position) and nothing else until
// it changes; when something did, the current result; a position the
// history no longer holds or from another incarnation of the database
// gives the current result too; a position ahead of the log is an error.
// Resumed on the other daemon of the same Postgres.
func TestLiveQueryResume(t *testing.T) {
	t.Parallel()
	d1 := dt.Start(t)
	d1.CreateDatabase(t, "res", staffSDL)
	d2 := dt.Start(t, dt.WithDatabaseURL(d1.DatabaseURL))
	w := &writer{t: t, d: d1, db: "res"}
	w.insert(person("a", "Ann", "x", ""))
	q := `subscription { Person(filter: {team: {eq: "x"}}) { name } }`
	s := subscribe(t, d1, "res", q)
	s.connected()
	f := s.Event()
	pos := f.Field("id")
	s.Close()

	// Unchanged: commits that cannot change it.
	w.insert(`{"@type":"Team","@id":"Team/t","name":"T"}`)
	head := w.insert(person("z", "Zed", "z", ""))
	epoch := strings.Split(pos, "-")[0]
	r := subscribe(t, d2, "res", q, "Last-Event-ID", pos)
	r.connected()
	if f := r.Event(); len(f) != 1 || dt.Untag(f.Field("id")) != epoch+"-"+itoa(head)+"-2147483647" {
		t.Fatalf("resumed with an unchanged result: %q, want the id of its current position alone", f)
	}
	seq := w.insert(person("b", "Bob", "x", ""))
	r.expect(seq, `{"Person":[{"name":"Ann"},{"name":"Bob"}]}`) // and nothing before
	r.Close()

	// Changed: the current result, at once.
	w.replace(person("a", "Ann", "y", ""))
	seq = w.insert(`{"@type":"Team","@id":"Team/u","name":"U"}`)
	g := mustOpen(t, d2, dt.Admin(), http.MethodGet, "/api/graphql/admin/res?query="+urlQuery(q)+"&lastEventId="+pos, "", nil, "Accept", sse)
	g.connected()
	g.expect(seq, `{"Person":[{"name":"Bob"}]}`)

	// Positions the history does not hold: the current result.
	for _, old := range []string{"zzzz-1-2147483647", epoch + "-0-2147483647"} {
		o := mustOpen(t, d1, dt.Admin(), http.MethodPost, "/api/graphql/admin/res", body(q, "extensions", map[string]any{"lastEventId": old}), nil, "Accept", sse)
		o.connected()
		o.expect(seq, `{"Person":[{"name":"Bob"}]}`)
	}
	// Ahead of the log: an error, inside the commit after the newest too
	// (one lost in a failover: the result built on it is not current).
	for _, ahead := range []string{epoch + "-99-2147483647", epoch + "-" + itoa(seq+1) + "-0"} {
		e := mustOpen(t, d1, dt.Admin(), http.MethodPost, "/api/graphql/admin/res", body(q, "extensions", map[string]any{"lastEventId": ahead}), nil, "Accept", sse)
		if fs := e.Ended(); len(fs) != 2 || !strings.Contains(fs[0].String(), `"code":"BAD_USER_INPUT"`) || fs[1].String() != "event: complete\ndata:" {
			t.Fatalf("resumed at %s, ahead of the log: %q", ahead, fs)
		}
	}

	// graphql-ws: an unchanged result sends nothing (its clients would
	// take any message for a result), then the next result.
	c := mustConnect(t, d2, "res")
	c.send(`{"id":"l","type":"subscribe","payload":{"query":` + jsonString(q) + `,"extensions":{"lastEventId":"` + epoch + `-` + itoa(seq) + `-2147483647"}}}`)
	c.barrier("b")
	seq = w.insert(person("c", "Cy", "x", ""))
	got := untagPositions(c.read())
	if want := `{"id":"l","type":"next","payload":{"data":{"Person":[{"name":"Bob"},{"name":"Cy"}]},"extensions":{"position":"` + epoch + `-` + itoa(seq) + `-2147483647","lastEventId":"` + epoch + `-` + itoa(seq) + `-2147483647"}}}`; got != want {
		t.Fatalf("graphql-ws after an unchanged resume:\ngot  %s\nwant %s", got, want)
	}
}

// TestLiveQueryPatches: with extensions.patch "json-patch", a live query
// sends its first result whole (with revision 1), then each change as
// the JSON Patch from the result before (revision + 1), which applied to
// it gives the new result exactly; a member that joins gets the current
// result whole. Over SSE and graphql-ws.
func TestLiveQueryPatches(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "patch", staffSDL)
	w := &writer{t: t, d: d, db: "patch"}
	for _, p := range []string{person("m", "Mia", "y", ""), person("a", "Ann", "x", "m"), person("c", "Cat", "x", "")} {
		w.insert(p)
	}
	q := `subscription { Person(filter: {team: {eq: "x"}}, orderBy: {name: ASC}) { _id name age manager { name } } }`
	s := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/patch", body(q, "extensions", map[string]any{"patch": "json-patch"}), nil, "Accept", sse)
	s.connected()
	c := mustConnect(t, d, "patch")
	// Its first result, read below, says it is registered: a barrier
	// operation's answer could come before or after it.
	c.send(`{"id":"p","type":"subscribe","payload":{"query":` + jsonString(q) + `,"extensions":{"patch":"json-patch"}}}`)

	type message struct {
		Data       json.RawMessage `json:"data"`
		Extensions struct {
			Position string          `json:"position"`
			Revision int64           `json:"revision"`
			Patch    json.RawMessage `json:"patch"`
		} `json:"extensions"`
	}
	// apply follows a client: a whole result replaces its state, a patch
	// applies to the result of the revision before.
	type client struct {
		data     []byte
		revision int64
		patches  int
	}
	apply := func(cl *client, raw string) {
		t.Helper()
		var m message
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		if m.Data != nil {
			cl.data, cl.revision = m.Data, m.Extensions.Revision
			return
		}
		if m.Extensions.Revision != cl.revision+1 {
			t.Fatalf("patch of revision %d on revision %d: %s", m.Extensions.Revision, cl.revision, raw)
		}
		out, err := jsonpatch.Apply(cl.data, m.Extensions.Patch)
		if err != nil {
			t.Fatalf("apply %s: %v", raw, err)
		}
		cl.data, cl.revision = out, m.Extensions.Revision
		cl.patches++
	}
	// want is the result a query reads now, as the decoded value.
	want := func() any {
		var r struct{ Data any }
		if err := json.Unmarshal([]byte(gql(t, d, "patch", strings.Replace(q, "subscription", "query", 1))), &r); err != nil {
			t.Fatal(err)
		}
		return r.Data
	}
	same := func(name string, cl *client) {
		t.Helper()
		var got any
		if err := json.Unmarshal(cl.data, &got); err != nil {
			t.Fatal(err)
		}
		if g, w := mustJSON(got), mustJSON(want()); g != w {
			t.Fatalf("%s: the patched result %s, the query's %s", name, g, w)
		}
	}
	var sc, wc client
	wsPayload := func() string {
		var m struct{ Payload json.RawMessage }
		if err := json.Unmarshal([]byte(c.read()), &m); err != nil {
			t.Fatal(err)
		}
		return string(m.Payload)
	}
	apply(&sc, s.Event().Field("data"))
	apply(&wc, wsPayload())
	if sc.revision != 1 || wc.revision != 1 {
		t.Fatalf("first results of revisions %d and %d, want 1", sc.revision, wc.revision)
	}
	for _, step := range []func(){
		func() { w.insert(person("b", "Bea", "x", "m")) },                                           // an insert in the middle
		func() { w.replace(person("m", "Mina", "y", "")) },                                          // a referenced document
		func() { w.replace(`{"@type":"Person","@id":"Person/c","name":"Cat","team":"x","age":4}`) }, // a field appears
		func() { w.delete("Person/a") },                                                             // a removal
		func() { w.replace(person("c", "Cat", "z", "")) },                                           // leaves the filter
	} {
		step()
		apply(&sc, s.Event().Field("data"))
		apply(&wc, wsPayload())
		same("SSE", &sc)
		same("graphql-ws", &wc)
	}
	if sc.patches != 5 || wc.patches != 5 {
		t.Fatalf("%d and %d of 5 changes came as patches", sc.patches, wc.patches)
	}
	// A member that joins gets the current result whole.
	j := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/patch", body(q, "extensions", map[string]any{"patch": "json-patch"}), nil, "Accept", sse)
	j.connected()
	var jc client
	apply(&jc, j.Event().Field("data"))
	if jc.revision != 6 {
		t.Fatalf("a member that joined got revision %d, want the current, 6", jc.revision)
	}
	same("joined", &jc)
	// An unknown patch format is refused.
	bad := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/patch", body(q, "extensions", map[string]any{"patch": "merge"}), nil, "Accept", sse)
	if fs := bad.Ended(); len(fs) != 2 || !strings.Contains(fs[0].String(), `extensions.patch must be \"json-patch\"`) {
		t.Fatalf("extensions.patch merge: %q", fs)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonString(s string) string { return mustJSON(s) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func urlQuery(q string) string { return url.QueryEscape(q) }

// TestLiveQueryResumeJudgesTheLimit: a resumed live query of a full,
// limited result judges the commits since its client's position against
// the result's last row, as live commits are judged: a document that
// sorts after it changes nothing, and the client is told its result is
// current; one that sorts before does.
func TestLiveQueryResumeJudgesTheLimit(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "lim", staffSDL)
	w := &writer{t: t, d: d, db: "lim"}
	w.insert(person("a", "Ann", "x", ""))
	w.insert(person("b", "Bob", "x", ""))
	q := `subscription { Person(orderBy: {name: ASC}, limit: 1) { name } }`
	s := subscribe(t, d, "lim", q)
	s.connected()
	pos := s.Event().Field("id")
	s.Close()
	head := w.insert(person("z", "Zed", "x", ""))
	r := subscribe(t, d, "lim", q, "Last-Event-ID", pos)
	r.connected()
	epoch := strings.Split(pos, "-")[0]
	if f := r.Event(); len(f) != 1 || dt.Untag(f.Field("id")) != epoch+"-"+itoa(head)+"-2147483647" {
		t.Fatalf("resumed after a document sorting past the limit: %q, want the id of its current position alone", f)
	}
	seq := w.insert(person("aa", "Aaron", "x", ""))
	r.expect(seq, `{"Person":[{"name":"Aaron"}]}`)
}

// TestLiveQueryResumeKeepsNoResult: live queries resumed at the position
// of an unchanged result of about 400 KB cost the heap about what plain
// members of its share cost: a resumed stream compares the share's next
// result with the one its client has by a digest, and keeps no copy of
// it (found by review: each kept the result it read for as long as the
// result did not change, ~512 KiB a stream, counted by no live_bytes).
// Not parallel: it measures the process's heap.
func TestLiveQueryResumeKeepsNoResult(t *testing.T) {
	const n = 20
	d := dt.Start(t)
	d.CreateDatabase(t, "resheap", "type Dog { name: String! }")
	var docs []string
	for i := range 400 {
		docs = append(docs, fmt.Sprintf(`{"@type":"Dog","@id":"Dog/d%d","name":"%s"}`, i, strings.Repeat("x", 1000)))
	}
	insert(t, d, "resheap", "["+strings.Join(docs, ",")+"]")
	q := `subscription { Dog { name } }`
	first := subscribe(t, d, "resheap", q)
	first.connected()
	pos := first.Event().Field("id")
	// The least of a few measures: other tests share the process's heap.
	var joined, resumed int64 = 1 << 62, 1 << 62
	for range 3 {
		before := heapNow()
		for range n {
			s := subscribe(t, d, "resheap", q)
			s.connected()
			if f := s.Event(); f.Field("id") != pos {
				t.Fatalf("a member: %.200q, want the result at %s", f, pos)
			}
		}
		mid := heapNow()
		for range n {
			r := subscribe(t, d, "resheap", q, "Last-Event-ID", pos)
			r.connected()
			if f := r.Event(); f.String() != "id: "+pos {
				t.Fatalf("resumed with an unchanged result: %.200q, want its id alone", f)
			}
		}
		after := heapNow()
		joined, resumed = min(joined, (mid.heap-before.heap)/n), min(resumed, (after.heap-mid.heap)/n)
		if resumed < joined+64<<10 {
			break
		}
	}
	t.Logf("heap per stream: %d KiB a member, %d KiB a resumed one", joined>>10, resumed>>10)
	if resumed > joined+64<<10 {
		t.Errorf("a resumed stream takes %d KiB of heap, a member %d KiB: want within 64 KiB", resumed>>10, joined>>10)
	}
}

// TestLiveQueryMembersShareTheResult: members of a live query's share
// of about 400 KB hold no copy of it: each costs the heap a few KiB, a
// connection's (clients here that read the result and keep nothing).
// The ~1.5 MiB a member seems to cost in TestLiveQueryResumeKeepsNoResult
// is its test client's: a dt.Stream buffers up to 65,536 frames, a 1.5
// MiB channel, whatever it reads. Not parallel: it measures the
// process's heap.
func TestLiveQueryMembersShareTheResult(t *testing.T) {
	const n = 20
	d := dt.Start(t)
	d.CreateDatabase(t, "share", "type Dog { name: String! }")
	var docs []string
	for i := range 400 {
		docs = append(docs, fmt.Sprintf(`{"@type":"Dog","@id":"Dog/d%d","name":"%s"}`, i, strings.Repeat("x", 1000)))
	}
	insert(t, d, "share", "["+strings.Join(docs, ",")+"]")
	q := body(`subscription { Dog { name } }`)
	// member opens a member and reads its readiness frame and first
	// result through a 4 KiB buffer, keeping nothing; it returns the
	// result's size.
	member := func() int {
		req, err := http.NewRequest(http.MethodPost, d.URL+"/api/graphql/admin/share", strings.NewReader(q))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", sse)
		req.Header.Set("Content-Type", "application/json")
		dt.Admin()(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		br := bufio.NewReaderSize(resp.Body, 4096)
		size := 0
		for blanks := 0; blanks < 2; { // after ": connected", after the result
			line, err := br.ReadSlice('\n')
			size += len(line)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				t.Fatalf("after %d bytes: %v", size, err)
			}
			if len(line) == 1 {
				blanks++
			}
		}
		return size
	}
	if size := member(); size < 400_000 {
		t.Fatalf("the first member read %d bytes, want the ~400 KB result", size)
	}
	var each int64 = 1 << 62
	for range 3 { // the least of a few measures: other tests share the heap
		before := heapNow()
		for range n {
			member()
		}
		each = min(each, (heapNow().heap-before.heap)/n)
		if each < 64<<10 {
			break
		}
	}
	t.Logf("heap per member of a ~400 KB result: %d KiB", each>>10)
	if each > 64<<10 {
		t.Errorf("a member of a ~400 KB result takes %d KiB of heap, want a connection's, within 64 KiB", each>>10)
	}
}

package gqltransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/jsonpatch"
)

// patchClient follows a live query with patches as a client does: a
// whole result replaces its state, a patch applies to the result of the
// revision before, and an SSE event of only an id says its state is
// current at that position.
type patchClient struct {
	t        testing.TB
	data     []byte
	revision int64
	id       string // the position of its state
}

// take applies the next event of s, which must be a whole result, or a
// patch whose base is exactly the client's state.
func (c *patchClient) take(s *stream) {
	c.t.Helper()
	f := s.Event()
	if len(f) == 1 && strings.HasPrefix(f[0], "id: ") {
		c.id = f.Field("id")
		return
	}
	var m struct {
		Data       json.RawMessage `json:"data"`
		Errors     json.RawMessage `json:"errors"`
		Extensions struct {
			Revision int64           `json:"revision"`
			Patch    json.RawMessage `json:"patch"`
		} `json:"extensions"`
	}
	if err := json.Unmarshal([]byte(f.Field("data")), &m); err != nil || m.Errors != nil || f.Field("event") != "next" {
		c.t.Fatalf("not a live result: %q (%v)", f, err)
	}
	c.id = f.Field("id")
	if m.Data != nil {
		c.data, c.revision = m.Data, m.Extensions.Revision
		return
	}
	if c.data == nil || m.Extensions.Revision != c.revision+1 {
		c.t.Fatalf("a patch of revision %d on a client at revision %d (state %s): %q", m.Extensions.Revision, c.revision, c.data, f)
	}
	out, err := jsonpatch.Apply(c.data, m.Extensions.Patch)
	if err != nil {
		c.t.Fatalf("the patch %s does not apply to the client's state %s: %v", m.Extensions.Patch, c.data, err)
	}
	c.data, c.revision = out, m.Extensions.Revision
}

// until takes the events of s until the client's state stands at commit
// seq, and checks it is want, the answer of a query read then.
func (c *patchClient) until(s *stream, seq int64, want string) {
	c.t.Helper()
	for !strings.HasSuffix(dt.Untag(c.id), fmt.Sprintf("-%d-2147483647", seq)) {
		c.take(s)
	}
	var got any
	var exp struct{ Data any }
	if err := json.Unmarshal(c.data, &got); err != nil {
		c.t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		c.t.Fatal(err)
	}
	if g, w := mustJSON(got), mustJSON(exp.Data); g != w {
		c.t.Fatalf("the client's state at commit %d: %s, the query's %s", seq, g, w)
	}
}

// TestLiveQueryResumedPatchBase: a live query with patches resumed
// (Last-Event-ID) while another member shares its result, and while
// commits change it, gets whole results or patches whose base is exactly
// the result it has: its client's own (resumed with nothing owed), or
// the whole result its resume sent (revision 0), which no patch of the
// share follows. Resumed from the newest position the other member has
// and from an older one, each while a commit races the resume.
func TestLiveQueryResumedPatchBase(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "rpatch", staffSDL)
	w := &writer{t: t, d: d, db: "rpatch"}
	w.insert(person("a", "Ann", "x", ""))
	for i := range 5 {
		w.insert(person(fmt.Sprint("p", i), "P", "y", ""))
	}
	q := `subscription { Person(filter: {team: {eq: "x"}}, orderBy: {name: ASC}) { _id name age } }`
	req := body(q, "extensions", map[string]any{"patch": "json-patch"})
	open := func(header ...string) *stream {
		s := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/rpatch", req, nil, append([]string{"Accept", sse}, header...)...)
		s.connected()
		return s
	}
	now := func() string { return gql(t, d, "rpatch", strings.Replace(q, "subscription", "query", 1)) }
	// A commit of the test's goroutine... and one racing a resume
	// (an error is reported, not fatal, off the test's goroutine).
	write := func(i int) string {
		return fmt.Sprintf(`{"@type":"Person","@id":"Person/p%d","name":"P%03d","team":"x","age":%d}`, i%5, i, i)
	}
	race := func(doc string) <-chan error {
		done := make(chan error, 1)
		go func() {
			r, err := http.NewRequest(http.MethodPut, d.URL+"/api/document/admin/rpatch", strings.NewReader(doc))
			if err == nil {
				dt.Admin()(r)
				var resp *http.Response
				if resp, err = http.DefaultClient.Do(r); err == nil {
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("PUT %s: %s", doc, resp.Status)
					}
				}
			}
			done <- err
		}()
		return done
	}

	a := open()
	ac := &patchClient{t: t}
	ac.take(a)
	history := map[string]patchClient{ac.id: *ac} // A's states, by position
	old := ac.id
	for i := range 12 {
		seq := w.replace(write(i))
		ac.until(a, seq, now())
		history[ac.id] = *ac
		from := ac.id
		if i%2 == 1 {
			from = old // changed since: owed the current result
		}
		errc := race(write(100 + i))
		b := open("Last-Event-ID", from)
		bc := history[from] // what B's client has
		bc.t = t
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		w.seq++
		seq = w.replace(write(200 + i))
		bc.until(b, seq, now())
		b.Close()
		ac.until(a, seq, now())
		history[ac.id] = *ac
	}
}

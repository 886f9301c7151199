package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// friendsQuery returns a query of the first P and levels levels of its
// friends, then their names.
func friendsQuery(levels int) string {
	return "{ P(limit: 1) { " + strings.Repeat("friends { ", levels) + "name" + strings.Repeat(" }", levels) + " } }"
}

// friendsDocs returns n documents P/p0… each listing all n as friends.
func friendsDocs(n int) string {
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf(`"P/p%d"`, i))
	}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"@type":"P","@id":"P/p%d","name":"p%d","friends":[%s]}`+"\n", i, i, strings.Join(ids, ","))
	}
	return b.String()
}

// TestPrefetchOfCyclicReferencesIsBounded: four documents each listing
// all four as friends, and a query 10 levels of friends deep, whose
// answer holds 4^10 objects. The references are walked once per document
// and level, not once per occurrence (4^10 walks took 1.4 GiB and
// seconds), and the answer stops at graphql_max_response_bytes as it is
// written: the error names it and the daemon's peak memory grows by a
// few MB. The deepest query the default depth limit lets through (18
// levels, 4^18 objects) is refused as soon. The daemon runs as its own
// process, so that its memory is its own.
func TestPrefetchOfCyclicReferencesIsBounded(t *testing.T) {
	t.Parallel()
	bin, err := dt.SluiceBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := dt.StartProc(t, bin, []string{"serve", "--listen", "127.0.0.1:0", "--graphql-max-response-bytes", "1048576"},
		[]string{"SLUICE_DATABASE_URL=" + pgtest.NewDatabase(t), "SLUICE_ADMIN_PASSWORD=" + dt.AdminPassword}, nil)
	d := dt.Remote("http://" + p.Addr)
	d.CreateDatabase(t, "cyclic", "type P { name: String friends: [P] }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/cyclic", friendsDocs(4), "Content-Type", "application/x-ndjson")
	pid := p.Cmd.Process.Pid
	for _, levels := range []int{10, 18} {
		resetPeak(t, pid)
		peak0 := procMemory(t, pid, "VmHWM")
		// The old walk of 18 levels would not end: the deadline makes
		// the test fail rather than hang.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		body, _ := json.Marshal(map[string]string{"query": friendsQuery(levels)})
		req, _ := http.NewRequestWithContext(ctx, "POST", d.URL+"/api/graphql/admin/cyclic", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		dt.Admin()(req)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%d levels: %v", levels, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil {
			t.Fatalf("%d levels: %v", levels, err)
		}
		peak := procMemory(t, pid, "VmHWM")
		t.Logf("%d levels of friends: %v, peak RSS %d -> %d KiB (+%d)", levels, time.Since(start), peak0, peak, peak-peak0)
		if !strings.Contains(string(b), `"limit":"graphql_max_response_bytes"`) {
			t.Errorf("%d levels: %d %.300s", levels, resp.StatusCode, b)
		}
		if peak-peak0 > 64<<10 {
			t.Fatalf("%d levels of friends: the daemon's peak RSS grew by %d KiB, want it bounded by the documents and graphql_max_response_bytes", levels, peak-peak0)
		}
	}
	// A query whose answer fits is answered whole.
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/cyclic", `{"query":"`+friendsQuery(2)+`"}`, "Content-Type", "application/json")
	names := `{"name":"p0"},{"name":"p1"},{"name":"p2"},{"name":"p3"}`
	friends := `{"friends":[` + names + `]}`
	want := `{"data":{"P":[{"friends":[` + strings.Repeat(friends+",", 3) + friends + `]}]}`
	if !strings.HasPrefix(string(r.Body), want) {
		t.Errorf("2 levels of friends: %s\nwant %s", r.Body, want)
	}
}

// TestPrefetchVisitsAreBounded: resolving references visits at most one
// object or reference per byte of graphql_max_response_bytes, dangling
// ones too (which the answer leaves out): a document listing 1,000
// missing friends, selected five times under a bound of 4,096 bytes,
// fails naming it, and one listing 100 answers. (Listing 5,000, the
// document alone is more than the request may read, four times the
// bound, which fails first.)
func TestPrefetchVisitsAreBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLMaxResponseBytes = 4096 })
	d.CreateDatabase(t, "dangling", "type P { name: String friends: [P] }")
	doc := func(id string, n int) string {
		return `{"@type":"P","@id":"P/` + id + `","name":"` + id + `","friends":["P/` + id + `"` + strings.Repeat(`,"P/missing"`, n) + `]}`
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/dangling", doc("many", 1000)+"\n"+doc("few", 100)+"\n"+doc("more", 5000), "Content-Type", "application/x-ndjson")
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/dangling", `{"query":"{ P(filter: {_id: \"P/many\"}) { a: friends { name } b: friends { name } c: friends { name } d: friends { name } e: friends { name } } }"}`, "Content-Type", "application/json")
	if !strings.Contains(string(r.Body), "resolving the references of the response visits more than 4096 objects and references") ||
		!strings.Contains(string(r.Body), `"limit":"graphql_max_response_bytes"`) {
		t.Errorf("1,000 dangling friends five times: %s", r.Body)
	}
	r = d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/dangling", `{"query":"{ P(filter: {_id: \"P/more\"}) { friends { name } } }"}`, "Content-Type", "application/json")
	if !strings.Contains(string(r.Body), "the documents the request reads are larger than 16384 bytes") {
		t.Errorf("5,000 dangling friends: %s", r.Body)
	}
	r = d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/dangling", `{"query":"{ P(filter: {_id: \"P/few\"}) { friends { name } } }"}`, "Content-Type", "application/json")
	if want := `{"data":{"P":[{"friends":[{"name":"few"}]}]}`; !strings.HasPrefix(string(r.Body), want) {
		t.Errorf("100 dangling friends: %s, want %s", r.Body, want)
	}
}

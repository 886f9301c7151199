package gqltransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

const dogAdded = `subscription { Dog_added { name } }`

// names returns the names of Dog_added events.
func names(data []string) string {
	var out []string
	for _, d := range data {
		_, n, _ := strings.Cut(d, `"name":"`)
		n, _, _ = strings.Cut(n, `"`)
		out = append(out, n)
	}
	return strings.Join(out, " ")
}

func dogs(names ...string) string {
	var b strings.Builder
	b.WriteString("[")
	for i, n := range names {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"@type":"Dog","@id":"Dog/%s","name":"%s"}`, n, n)
	}
	b.WriteString("]")
	return b.String()
}

// TestResume replays exactly the missed events, whichever way the
// position is given, also from inside a commit, then continues live.
func TestResume(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	s := subscribe(t, d, "zoo", dogAdded)
	s.connected()
	insert(t, d, "zoo", dogs("a", "b", "c"))
	insert(t, d, "zoo", dogs("d"))
	ids, data := s.nexts(2)
	if names(data) != "a b" {
		t.Fatalf("first events: %v", data)
	}
	s.Close()
	insert(t, d, "zoo", dogs("e"))

	path := "/api/graphql/admin/zoo"
	resumes := map[string]*stream{
		"Last-Event-ID":          subscribe(t, d, "zoo", dogAdded, "Last-Event-ID", ids[1]),
		"lastEventId":            mustOpen(t, d, dt.Admin(), http.MethodGet, path+"?lastEventId="+ids[1]+"&query="+url.QueryEscape(dogAdded), "", nil, "Accept", sse),
		"extensions.lastEventId": mustOpen(t, d, dt.Admin(), http.MethodPost, path, body(dogAdded, "extensions", map[string]any{"lastEventId": ids[1]}), nil, "Accept", sse),
		"NDJSON":                 mustOpen(t, d, dt.Admin(), http.MethodPost, path, body(dogAdded), nil, "Accept", ndjson, "Last-Event-ID", ids[1]),
		// The header wins over the parameter.
		"both": mustOpen(t, d, dt.Admin(), http.MethodGet, path+"?lastEventId="+ids[0]+"&query="+url.QueryEscape(dogAdded), "", nil, "Accept", sse, "Last-Event-ID", ids[1]),
	}
	for _, r := range resumes {
		r.connected()
	}
	insert(t, d, "zoo", dogs("f"))
	epoch := strings.Split(ids[0], "-")[0]
	for how, r := range resumes {
		if r.NDJSON() {
			var got []string
			for len(got) < 4 {
				if f := r.Next(); f[0] != "null" {
					got = append(got, f[0])
				}
			}
			if names(got) != "c d e f" {
				t.Fatalf("%s: %v", how, got)
			}
			continue
		}
		rids, data := r.nexts(4)
		want := []string{epoch + "-1-2", epoch + "-2-0", epoch + "-3-0", epoch + "-4-0"}
		if names(data) != "c d e f" || strings.Join(rids, " ") != strings.Join(want, " ") {
			t.Fatalf("%s: ids %v names %s", how, rids, names(data))
		}
	}
}

// TestResumeErrors: a position from another epoch or pruned history is an
// error next and complete; one ahead of the log too (BAD_USER_INPUT).
func TestResumeErrors(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	insert(t, d, "zoo", dogs("a"))
	for pos, want := range map[string]string{
		"zzzzzzzzzz-1-0": `data: {"errors":[{"message":"position zzzzzzzzzz-1-0 is not a position of admin/zoo: it is another database's, or an earlier database's of that name; re-read the current state","extensions":{"code":"POSITION_EXPIRED"}}]}`,
	} {
		s := subscribe(t, d, "zoo", dogAdded, "Last-Event-ID", pos)
		frames := s.Ended()
		if len(frames) != 2 || len(frames[0]) != 2 || frames[0][0] != "event: next" || frames[1].String() != "event: complete\ndata:" {
			t.Fatalf("resume from %s: %q", pos, frames)
		}
		if got := frames[0][1]; got != want {
			t.Fatalf("resume from %s: %s", pos, got)
		}
	}
	// Ahead of the log.
	s := subscribe(t, d, "zoo", dogAdded)
	s.connected()
	insert(t, d, "zoo", dogs("b"))
	ids, _ := s.nexts(1)
	epoch := strings.Split(ids[0], "-")[0]
	frames := subscribe(t, d, "zoo", dogAdded, "Last-Event-ID", epoch+"-99-0").Ended()
	if len(frames) != 2 || !strings.Contains(frames[0].String(), `"code":"BAD_USER_INPUT"`) {
		t.Fatalf("position ahead: %q", frames)
	}
}

// TestResumeAfterRestart: a client resumes on a new daemon on the same
// data with no gap and no duplicate.
func TestResumeAfterRestart(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "zoo", zooSDL)
	s := subscribe(t, a, "zoo", dogAdded)
	s.connected()
	insert(t, a, "zoo", dogs("a", "b"))
	ids, _ := s.nexts(1)
	a.Stop(t)
	// The shutdown completed the stream after what was queued.
	rest := s.Ended()
	if len(rest) != 2 || rest[1].String() != "event: complete\ndata:" || !strings.Contains(rest[0].String(), `"name":"b"`) {
		t.Fatalf("frames at shutdown: %q", rest)
	}
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	insert(t, b, "zoo", dogs("c"))
	r := subscribe(t, b, "zoo", dogAdded, "Last-Event-ID", ids[0])
	r.connected()
	insert(t, b, "zoo", dogs("d"))
	if _, data := r.nexts(3); names(data) != "b c d" {
		t.Fatalf("after restart: %v", data)
	}
}

// TestShutdownCompletesStreams: every open stream gets complete.
func TestShutdownCompletesStreams(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	var ss []*stream
	for range 3 {
		ss = append(ss, subscribe(t, d, "zoo", dogAdded))
		ss = append(ss, mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/zoo", body(`subscription { _ChangeSet { _CommitMetadata { _id } } }`), nil, "Accept", ndjson))
	}
	for _, s := range ss {
		s.connected()
	}
	d.Stop(t)
	for _, s := range ss {
		frames := s.Ended()
		want := "event: complete\ndata:"
		if s.NDJSON() {
			want = ""
		}
		if len(frames) != 1 || frames[0].String() != want {
			t.Fatalf("frames at shutdown: %q", frames)
		}
	}
}

// TestTwoDaemons: a commit on one daemon reaches subscribers on both.
func TestTwoDaemons(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "zoo", zooSDL)
	sa := subscribe(t, a, "zoo", dogAdded)
	sb := subscribe(t, b, "zoo", dogAdded)
	sa.connected()
	sb.connected()
	var wg sync.WaitGroup
	for i, d := range []*dt.Daemon{a, b} {
		wg.Go(func() {
			for j := range 10 {
				insert(t, d, "zoo", dogs(fmt.Sprintf("d%d-%d", i, j)))
			}
		})
	}
	wg.Wait()
	ia, da := sa.nexts(20)
	ib, db := sb.nexts(20)
	if strings.Join(ia, " ") != strings.Join(ib, " ") || names(da) != names(db) {
		t.Fatalf("daemons delivered different streams:\n%v\n%v", ia, ib)
	}
	for i, id := range ia {
		if !strings.HasSuffix(id, fmt.Sprintf("-%d-0", i+1)) {
			t.Fatalf("event %d is %s", i, id)
		}
	}
}

// TestDisconnectLeavesNoGoroutine is not parallel: goleak looks at every
// goroutine of the process, and parallel tests only start once the
// sequential ones are done.
func TestDisconnectLeavesNoGoroutine(t *testing.T) {
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	cycle := func(i int) {
		accept := sse
		if i%2 == 1 {
			accept = ndjson
		}
		s := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/zoo?heartbeat=1h", body(dogAdded), nil, "Accept", accept)
		s.connected()
		s.Close()
	}
	cycle(0)
	base := goleak.IgnoreCurrent()
	for i := range 1000 {
		cycle(i)
	}
	insert(t, d, "zoo", dogs("after"))
	http.DefaultClient.CloseIdleConnections()
	eventually.Nil(t, wait, "no goroutine left behind", func() error { return dt.GoroutinesSince(base) })
}

// TestGrouping: identical subscriptions share one change feed subscription
// (one evaluation per event); different variables do not.
func TestGrouping(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	q := `subscription S($n: String) { Dog_added(filter: {name: {eq: $n}}) { name } }`
	open := func(n string) *stream {
		return mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/zoo", body(q, "variables", map[string]any{"n": n}), nil, "Accept", sse)
	}
	ss := []*stream{open("a"), open("a"), open("a"), open("b")}
	for _, s := range ss {
		s.connected()
	}
	var subs []struct{ Transport string }
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/admin/subscriptions", nil).Body, &subs); err != nil {
		t.Fatal(err)
	}
	if len(subs) != 2 || subs[0].Transport != "graphql-sse" || subs[1].Transport != "graphql-sse" {
		t.Fatalf("change feed subscriptions for 4 subscribers in 2 shares: %+v", subs)
	}
	// The gauge counts the clients, not the shares.
	m := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
	if got := dt.MetricValue(m, "sluice_stream_subscribers", `transport="graphql-sse"`); got != 4 {
		t.Fatalf("subscribers gauge for 4 subscribers in 2 shares: %v", got)
	}
	insert(t, d, "zoo", dogs("b", "a"))
	for i, s := range ss {
		want := "a"
		if i == 3 {
			want = "b"
		}
		if ids, data := s.nexts(1); names(data) != want || !strings.HasSuffix(ids[0], map[string]string{"a": "-1-1", "b": "-1-0"}[want]) {
			t.Fatalf("subscriber %d: %v %v", i, ids, data)
		}
	}
	// A member that leaves does not end the share for the others.
	ss[0].Close()
	insert(t, d, "zoo", dogs("a2"))
	insert(t, d, "zoo", `{"@type":"Dog","@id":"Dog/a3","name":"a"}`)
	for _, s := range ss[1:3] {
		if ids, data := s.nexts(1); names(data) != "a" || !strings.HasSuffix(ids[0], "-3-0") {
			t.Fatalf("after a member left: %v %v", ids, data)
		}
	}
	// The server notices the closed stream when it next writes to it.
	eventually.True(t, wait, "the subscribers gauge at 3 after one of 4 left", func() bool {
		m := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
		return dt.MetricValue(m, "sluice_stream_subscribers", `transport="graphql-sse"`) == 3
	})
}

// TestDeliveryMetrics: the delivered counter counts every event written
// to every GraphQL stream (added to at most once a second while a stream
// runs, and when it ends), and a share observes the delivery latency once
// per commit, at its last member's write.
func TestDeliveryMetrics(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	metrics := func() string { return string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body) }
	const label = `transport="graphql-sse"`
	ss := []*stream{subscribe(t, d, "zoo", dogAdded), subscribe(t, d, "zoo", dogAdded), subscribe(t, d, "zoo", dogAdded)}
	for _, s := range ss {
		s.connected()
	}
	insert(t, d, "zoo", dogs("a", "b"))
	insert(t, d, "zoo", dogs("c"))
	for _, s := range ss {
		s.nexts(3)
		s.Close()
	}
	// The streams count what is left when they end, and a stream may
	// publish its count (once a second) just before it observes the
	// latency of what it wrote: wait for both (bounded) rather than
	// sleeping.
	var m string
	eventually.True(t, wait, "9 events delivered and 2 latencies observed", func() bool {
		m = metrics()
		return dt.MetricValue(m, "sluice_stream_events_delivered_total", label) >= 9 &&
			dt.MetricValue(m, "sluice_stream_delivery_latency_seconds_count", label) >= 2
	})
	if got := dt.MetricValue(m, "sluice_stream_events_delivered_total", label); got != 9 {
		t.Errorf("delivered %v, want 9 (3 events to 3 streams)", got)
	}
	if got := dt.MetricValue(m, "sluice_stream_delivery_latency_seconds_count", label); got != 2 {
		t.Errorf("latency observations %v, want 2 (one per commit for the share)", got)
	}
}

package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestForcedTypeChangeAcrossReplicas changes a field's type (Int to
// String, forced) while writers, readers, subscriptions and live queries
// work on two replicas of one Postgres, whose pooled connections hold
// statements prepared for the old type. From the change's answer on,
// every write of the new type succeeds on both replicas and every read
// shows the new type; nothing fails inside (no "cached plan must not
// change result type", no SQLSTATE, no internal error). A subscription or
// live query that selects the changed field ends with an error naming
// the change, having never delivered a value of another type than its
// selection's; one that does not goes on, as do the REST change stream
// and the streams opened after the change.
func TestForcedTypeChangeAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	replicas := []*dt.Daemon{a, b}
	a.CreateDatabase(t, "race", "type T { n: Int label: String }\ntype P { age: Int }")

	var problems problemList
	// Statements are prepared on many pooled connections of both
	// replicas: concurrent writes and reads, each kind on each.
	var warm sync.WaitGroup
	for g := range 12 {
		warm.Go(func() {
			for i, d := range replicas {
				id := fmt.Sprintf("warm-%d-%d", g, i)
				problems.expect(post(d, "/api/document/admin/race", fmt.Sprintf(`{"@type":"T","@id":"%s","n":%d,"label":"warm"}`, id, g)), 200, "warm-up write")
				problems.expect(query(d, `{ T { _id n label } }`), 200, "warm-up query")
				problems.expect(get(d, "/api/document/admin/race?type=T"), 200, "warm-up listing")
				problems.expect(get(d, "/api/document/admin/race?id=T/"+id), 200, "warm-up read")
			}
		})
	}
	warm.Wait()
	problems.check(t)

	// Streams opened before the change, on either replica.
	subN := subscribe(t, b, `subscription { T_added { _id n } }`)
	subLabel := subscribe(t, a, `subscription { T_added { _id label } }`)
	subP := subscribe(t, b, `subscription { P_added { _id age } }`)
	liveN := subscribe(t, a, `subscription { T { _id n } }`)
	liveLabel := subscribe(t, b, `subscription { T(filter: {label: {eq: "keep"}}) { _id label } }`)
	restT := b.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/race/T"})
	for _, s := range []*dt.Stream{liveN, liveLabel} {
		if f := s.Event(); f.Field("event") != "next" {
			t.Fatalf("a live query's first result: %s", f)
		}
	}
	if f := restT.Next(); !strings.HasPrefix(f[0], ": connected") {
		t.Fatalf("REST change stream: %s", f)
	}

	// Writers and readers race the change on both replicas. A request
	// sent after the change answered must see the new type; one sent
	// before may see either, but never fail inside.
	var changed atomic.Bool
	stop := make(chan struct{})
	var after atomic.Int64 // requests sent after the change that answered as they must
	ready := make(chan struct{}, 64)
	var race sync.WaitGroup
	for i, d := range replicas {
		race.Go(func() { // writes
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				post1 := changed.Load()
				id := fmt.Sprintf("w%d-%d", i, k)
				if !post1 {
					r := post(d, "/api/document/admin/race", fmt.Sprintf(`{"@type":"T","@id":"%s","n":%d}`, id, k))
					problems.expectOneOf(r, "a write of an Int racing the change", 200, 400)
					if r.status == 400 && !strings.Contains(r.body, "expected String") {
						problems.add("a write of an Int racing the change: %d %s", r.status, r.body)
					}
					select {
					case ready <- struct{}{}:
					default:
					}
					continue
				}
				r := post(d, "/api/document/admin/race", fmt.Sprintf(`{"@type":"T","@id":"%s","n":"x%d"}`, id, k))
				if problems.expect(r, 200, "a write of a String after the change") {
					after.Add(1)
				}
				r = post(d, "/api/document/admin/race", fmt.Sprintf(`{"@type":"T","@id":"%s-int","n":%d}`, id, k))
				if r.status != 400 || !strings.Contains(r.body, "expected String") {
					problems.add("a write of an Int after the change: %d %s", r.status, r.body)
				}
			}
		})
		race.Go(func() { // reads
			for {
				select {
				case <-stop:
					return
				default:
				}
				post1 := changed.Load()
				r := query(d, `{ T { _id n label } }`)
				if !problems.expect(r, 200, "a query") {
					continue
				}
				var res struct {
					Data struct {
						T []struct {
							N any `json:"n"`
						}
					}
					Errors []any
				}
				if err := json.Unmarshal([]byte(r.body), &res); err != nil || len(res.Errors) > 0 {
					problems.add("a query: %s", r.body)
					continue
				}
				if post1 {
					for _, doc := range res.Data.T {
						if _, isNumber := doc.N.(float64); isNumber {
							problems.add("a query after the change read n as a number: %s", r.body)
							break
						}
					}
					after.Add(1)
				}
				problems.expect(get(d, "/api/document/admin/race?type=T&count=5"), 200, "a listing")
			}
		})
	}
	// The change comes once both replicas wrote.
	for range 4 {
		select {
		case <-ready:
		case <-time.After(time.Minute):
			t.Fatal("the writers did not start")
		}
	}
	r := a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/race?force=true", "type T { n: String label: String }\ntype P { age: Int }")
	changed.Store(true)
	if !strings.Contains(string(r.Body), `"changes":["changes field T.n from Int to String; its stored values are dropped"]`) {
		t.Fatalf("the change: %s", r.Body)
	}
	deadline := time.Now().Add(time.Minute)
	for after.Load() < 40 && time.Now().Before(deadline) && problems.len() == 0 {
		select {
		case <-ready:
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(stop)
	race.Wait()
	problems.check(t)
	if after.Load() < 40 {
		t.Fatalf("only %d requests after the change within a minute", after.Load())
	}

	// A stream that selects n ends with the change named, after events
	// whose n was only ever an Int.
	for name, s := range map[string]*dt.Stream{"subscription": subN, "live query": liveN} {
		frames := s.Ended()
		if len(frames) < 2 || frames[len(frames)-1].Field("event") != "complete" {
			t.Fatalf("%s selecting n: %v", name, frames)
		}
		last := frames[len(frames)-2].Field("data")
		if !strings.Contains(last, `"code":"CONFLICT"`) || !strings.Contains(last, "changes field T.n from Int to String") || !strings.Contains(last, "T.n, now of type String (was Int)") {
			t.Fatalf("%s selecting n ended with %s", name, last)
		}
		for _, f := range frames[:len(frames)-2] {
			if data := f.Field("data"); strings.Contains(data, `"n":"`) {
				t.Fatalf("%s selecting n (an Int) delivered a string: %s", name, data)
			}
		}
	}

	// The others go on, through the new schema.
	b.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/race", `{"@type":"T","@id":"last","n":"z","label":"keep"}`)
	b.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/race", `{"@type":"P","@id":"p","age":40}`)
	waitFor(t, subLabel, `{"data":{"T_added":{"_id":"T/last","label":"keep"}}}`)
	waitFor(t, subP, `{"data":{"P_added":{"_id":"P/p","age":40}}}`)
	waitFor(t, liveLabel, `{"_id":"T/last","label":"keep"}`)
	waitFor(t, restT, `"subject":"T/last"`)

	// Streams opened after the change read n as a String.
	for i, d := range replicas {
		sub := subscribe(t, d, `subscription { T_added { _id n } }`)
		live := subscribe(t, d, `subscription { T(ids: ["T/late`+fmt.Sprint(i)+`"]) { _id n } }`)
		live.Event()
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/race", fmt.Sprintf(`{"@type":"T","@id":"late%d","n":"late"}`, i))
		waitFor(t, sub, fmt.Sprintf(`{"data":{"T_added":{"_id":"T/late%d","n":"late"}}}`, i))
		waitFor(t, live, fmt.Sprintf(`{"_id":"T/late%d","n":"late"}`, i))
	}
}

// problemList collects what went wrong on the racing goroutines, which
// may not fail the test themselves.
type problemList struct {
	mu   sync.Mutex
	list []string
}

func (p *problemList) add(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.list) < 20 {
		p.list = append(p.list, fmt.Sprintf(format, args...))
	}
}

func (p *problemList) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.list)
}

// expect records a problem unless r has status want and says nothing of
// Postgres or of an internal error; it reports whether r was as expected.
func (p *problemList) expect(r answer, want int, what string) bool {
	return p.expectOneOf(r, what, want)
}

func (p *problemList) expectOneOf(r answer, what string, want ...int) bool {
	ok := false
	for _, w := range want {
		ok = ok || r.status == w
	}
	for _, leak := range []string{"SQLSTATE", "internal error", "cached plan", "INTERNAL_SERVER_ERROR"} {
		ok = ok && !strings.Contains(r.body, leak)
	}
	if !ok {
		p.add("%s: %d %s", what, r.status, r.body)
	}
	return ok
}

func (p *problemList) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.list) > 0 {
		t.Fatalf("%d problems:\n%s", len(p.list), strings.Join(p.list, "\n"))
	}
}

// answer is an HTTP answer, or a transport error as status 0.
type answer struct {
	status int
	body   string
}

func send(d *dt.Daemon, method, path, body string, header ...string) answer {
	req, err := http.NewRequest(method, d.URL+path, strings.NewReader(body))
	if err != nil {
		return answer{body: err.Error()}
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	dt.Admin()(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{body: err.Error()}
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = io.Copy(&buf, resp.Body)
	return answer{status: resp.StatusCode, body: buf.String()}
}

func post(d *dt.Daemon, path, body string) answer { return send(d, "POST", path, body) }
func get(d *dt.Daemon, path string) answer        { return send(d, "GET", path, "") }

func query(d *dt.Daemon, q string) answer {
	body, _ := json.Marshal(map[string]string{"query": q})
	return send(d, "POST", "/api/graphql/admin/race", string(body), "Content-Type", "application/json")
}

// subscribe opens a GraphQL subscription of admin/race over SSE and reads
// its readiness frame.
func subscribe(t *testing.T, d *dt.Daemon, q string) *dt.Stream {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"query": q})
	s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/race", Body: string(body),
		Header: []string{"Accept", "text/event-stream"}})
	if f := s.Next(); f.String() != ": connected" {
		t.Fatalf("%s: first frame %s", q, f)
	}
	return s
}

// waitFor reads s until an event's data holds want.
func waitFor(t *testing.T, s *dt.Stream, want string) {
	t.Helper()
	for {
		f := s.Event()
		if strings.Contains(f.Field("data"), want) {
			return
		}
		if f.Field("event") == "complete" {
			t.Fatalf("the stream completed before %s", want)
		}
	}
}

// TestSchemaChangeEndsWhatItInvalidates: a forced change that drops a
// field ends the subscription selecting it (it no longer validates) and
// not one that does not; one that drops a class ends the REST change
// stream of that class. Each says what changed, and streams opened on
// what is left go on.
func TestSchemaChangeEndsWhatItInvalidates(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "race", "type T { n: Int label: String }\ntype Gone { x: Int }")
	subN := subscribe(t, d, `subscription { T_added { _id n } }`)
	subLabel := subscribe(t, d, `subscription { T_added { _id label } }`)
	restGone := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/race/Gone"})
	restT := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/race/T"})
	restGone.Next()
	restT.Next()
	r := d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/race?force=true", "type T { label: String }")
	if !strings.Contains(string(r.Body), `"commit":"1"`) {
		t.Fatalf("the change is not the log's first commit: %s", r.Body)
	}
	frames := subN.Ended()
	last := frames[len(frames)-2].Field("data")
	if !strings.Contains(last, `"code":"CONFLICT"`) || !strings.Contains(last, "drops field T.n") || !strings.Contains(last, "no longer validates") {
		t.Fatalf("the subscription selecting the dropped field ended with %s", last)
	}
	frames = restGone.Ended()
	if last := frames[len(frames)-1]; last.Field("event") != "error" || !strings.Contains(last.String(), "which dropped class Gone") {
		t.Fatalf("the REST stream of the dropped class ended with %q", frames)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/race", `{"@type":"T","@id":"after","label":"kept"}`)
	waitFor(t, subLabel, `{"data":{"T_added":{"_id":"T/after","label":"kept"}}}`)
	waitFor(t, restT, `"subject":"T/after"`)
	// The log shows the change as a commit of its own.
	if log := d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/race", nil); !strings.Contains(string(log.Body), "schema change: ") {
		t.Fatalf("the log: %s", log.Body)
	}
}

// TestSchemaChangeNamesOnlyWhatReadersSee: what a schema change tells a
// reader, in the log's commit message and in the error that ends its
// subscription, names no field hidden from it, before or after the
// change; it counts what it leaves out. The admin's stream names it all.
func TestSchemaChangeNamesOnlyWhatReadersSee(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "race", "type T { n: Int label: String ssn: String @private }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/race", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	open := func(who dt.Auth) *dt.Stream {
		s := d.MustOpenStream(t, who, dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/race", Body: `{"query":"subscription { T_added { _id n } }"}`,
			Header: []string{"Accept", "text/event-stream"}})
		if f := s.Next(); f.String() != ": connected" {
			t.Fatalf("first frame %s", f)
		}
		return s
	}
	ritas, admins := open(rita), open(dt.Admin())
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/race?force=true", "type T { label: String ssn: Int @private pin: String @private }")

	hidden := []string{"ssn", "pin"}
	frames := ritas.Ended()
	last := frames[len(frames)-2].Field("data")
	if !strings.Contains(last, "drops field T.n") || !strings.Contains(last, "2 changes not shown: they concern what role read may not see") {
		t.Fatalf("the reader's subscription ended with %s", last)
	}
	frames = admins.Ended()
	if last := frames[len(frames)-2].Field("data"); !strings.Contains(last, "drops field T.n") || !strings.Contains(last, "T.ssn") || !strings.Contains(last, "T.pin") {
		t.Fatalf("the admin's subscription ended with %s", last)
	}
	log := string(d.MustDo(t, 200, rita, "GET", "/api/log/admin/race", nil).Body)
	if !strings.Contains(log, "schema change: drops field T.n and its values; 2 changes not shown") {
		t.Fatalf("the log the reader reads: %s", log)
	}
	for _, h := range hidden {
		if strings.Contains(last, h) || strings.Contains(log, h) {
			t.Fatalf("%s named to the reader: %s\n%s", h, last, log)
		}
	}
}

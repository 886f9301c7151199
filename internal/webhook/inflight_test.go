package webhook_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// slowReceiver is a receiver that takes its time: it answers each request
// 204 after hold (for the request's number, from 0) has passed, whether
// or not the client still waits, as a receiver busy with a request does.
// It measures what it handles at once: requests, and their bytes
// (Content-Length) while it handles more than one, from their arrival to
// their answer.
type slowReceiver struct {
	srv  *httptest.Server
	hold func(n int) time.Duration
	got  chan arrival

	mu                        sync.Mutex
	n, inFlight, mostInFlight int
	bytesInFlight, mostShared int64
}

// arrival is a request as slowReceiver got it.
type arrival struct {
	path, id, signature, body string
}

func startSlowReceiver(t *testing.T, hold func(n int) time.Duration) *slowReceiver {
	t.Helper()
	r := &slowReceiver{hold: hold, got: make(chan arrival, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		n := r.n
		r.n++
		r.inFlight++
		r.mostInFlight = max(r.mostInFlight, r.inFlight)
		r.bytesInFlight += req.ContentLength
		if r.inFlight > 1 {
			r.mostShared = max(r.mostShared, r.bytesInFlight)
		}
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.inFlight--
			r.bytesInFlight -= req.ContentLength
			r.mu.Unlock()
		}()
		b, _ := io.ReadAll(req.Body)
		r.got <- arrival{path: req.URL.Path, id: req.Header.Get("webhook-id"), signature: req.Header.Get("webhook-signature"), body: string(b)}
		if d := r.hold(n); d > 0 {
			<-time.After(d) // the receiver at work, not a wait for an event
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// next returns the next request to arrive.
func (r *slowReceiver) next(t *testing.T) arrival {
	t.Helper()
	select {
	case a := <-r.got:
		return a
	case <-time.After(60 * time.Second):
		t.Fatal("no webhook request within 60s")
		return arrival{}
	}
}

// most returns the most requests the receiver handled at once, and the
// most bytes of requests it handled at once, more than one.
func (r *slowReceiver) most() (int, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mostInFlight, r.mostShared
}

// TestSettingsChangeLetsTheRequestInFlightFinish: a change of a webhook's
// settings (its description, its secret) while a request is in flight
// lets that request finish and counts it, and applies from the next
// request (found by review: the change stopped the webhook's loop, which
// abandoned the request however far its receiver had got with it, and
// the next loop sent it again at once, 0.3 s later, while the receiver
// still handled the first copy).
func TestSettingsChangeLetsTheRequestInFlightFinish(t *testing.T) {
	t.Parallel()
	r := startSlowReceiver(t, func(n int) time.Duration {
		if n < 2 {
			return 2 * time.Second
		}
		return 0
	})
	d := dt.Start(t, func(c *config.Config) { c.WebhookAllowNetworks = loopback })
	d.CreateDatabase(t, "inflight", personSchema)
	h := createHook(t, d, nil, "inflight", "", fmt.Sprintf(`{"url":%q}`, r.srv.URL))
	one := fmt.Sprintf("/api/webhooks/admin/inflight/%d", h.ID)
	for _, name := range []string{"a", "b", "c"} {
		insert(t, d, "inflight", name)
	}
	delivered := func(name string) arrival {
		t.Helper()
		a := r.next(t)
		if !strings.Contains(a.body, `"@id":"Person/`+name+`"`) {
			t.Fatalf("the request after those of the documents before %s: %s %.200s", name, a.id, a.body)
		}
		return a
	}
	// Each change is made while the receiver holds a request (for 2 s).
	delivered("a")
	d.MustDo(t, 200, dt.Admin(), "PATCH", one, `{"description":"changed while a was in flight"}`)
	b := delivered("b")
	if n := strings.Count(b.signature, "v1,"); n != 1 {
		t.Fatalf("b, sent before the rotation, has %d signatures: %s", n, b.signature)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", one+"/rotate-secret", `{"grace":"1h"}`)
	// The rotation applies from the next request: signed with both
	// secrets.
	if c := delivered("c"); strings.Count(c.signature, "v1,") != 2 {
		t.Fatalf("c, sent after the rotation, is not signed with both secrets: %s", c.signature)
	}
	insert(t, d, "inflight", "d")
	delivered("d")
	if most, _ := r.most(); most != 1 {
		t.Errorf("the receiver handled %d requests of the webhook at once", most)
	}
	var st struct {
		Delivered   int    `json:"delivered"`
		Description string `json:"description"`
	}
	eventuallyStatus(t, d, "inflight", h.ID, &st, func() bool { return st.Delivered == 4 })
	if st.Description != "changed while a was in flight" {
		t.Errorf("description %q", st.Description)
	}
}

// eventuallyStatus reads webhook id of admin/<db> into v until done holds.
func eventuallyStatus(t *testing.T, d *dt.Daemon, db string, id int64, v any, done func() bool) {
	t.Helper()
	waitStatus(t, d, db, id, 30*time.Second, func(m map[string]any) bool {
		b, _ := json.Marshal(m)
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
		return done()
	})
}

// TestWebhookBodiesShareABudget: the request bodies every webhook holds at
// once, being made or sent, stay within webhook_body_budget, measured at a
// slow receiver; each webhook's requests still arrive in order, and one
// larger than the whole budget goes when it is alone (found by review:
// the caps on webhooks are per database and per user, so 1,000 webhooks
// each sending a 16 MiB document held 16 GB at once).
func TestWebhookBodiesShareABudget(t *testing.T) {
	t.Parallel()
	const budget = 8 << 20
	r := startSlowReceiver(t, func(int) time.Duration { return 300 * time.Millisecond })
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
		c.WebhookBodyBudget = budget
	})
	d.CreateDatabase(t, "budget", personSchema)
	const hooks = 6
	for i := range hooks {
		createHook(t, d, nil, "budget", "", fmt.Sprintf(`{"url":%q}`, fmt.Sprintf("%s/hook/%d", r.srv.URL, i)))
	}
	// Three documents of 3 MiB (two such requests fit the budget, not
	// six), then one of 9 MiB, larger than the budget.
	docs := []struct {
		name string
		size int
	}{{"p1", 3 << 20}, {"p2", 3 << 20}, {"p3", 3 << 20}, {"p4", 9 << 20}}
	for _, doc := range docs {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/budget",
			fmt.Sprintf(`{"@type":"Person","@id":%q,"name":%q}`, doc.name, strings.Repeat("x", doc.size)))
	}
	next := map[string]int{} // a webhook's path: its next document
	for range hooks * len(docs) {
		a := r.next(t)
		i := next[a.path]
		if i >= len(docs) || !strings.Contains(a.body, `"@id":"Person/`+docs[i].name+`"`) {
			t.Fatalf("%s: request %d is %s, want the event of %s", a.path, i+1, a.id, docs[min(i, len(docs)-1)].name)
		}
		next[a.path]++
	}
	most, shared := r.most()
	t.Logf("%d webhooks, 4 documents of 3 to 9 MiB: at most %d requests, %.1f MiB, at once", hooks, most, float64(shared)/(1<<20))
	if shared > budget {
		t.Errorf("the receiver handled %.1f MiB of requests at once, more than webhook_body_budget's %d MiB", float64(shared)/(1<<20), budget>>20)
	}
	if most < 2 {
		t.Errorf("the requests went one at a time: the budget holds two")
	}
	if n := dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_webhook_body_budget_waits_total"); n == 0 {
		t.Errorf("sluice_webhook_body_budget_waits_total is 0")
	}
}

// TestSettingsChangeKeepsTheBudgetTurn: a webhook waiting for room in
// webhook_body_budget whose settings change meanwhile keeps the bytes it
// waited for when it starts over to read them, and sends its request
// before the webhook that waited behind it; every byte of the budget is
// free at the end (found by review: the run that took the bytes gave them
// back when it started over, the next waiter took them, and the restarted
// run found no room and waited again at the back: a PATCH during each
// wait delayed the webhook for ever).
func TestSettingsChangeKeepsTheBudgetTurn(t *testing.T) {
	t.Parallel()
	const budget = 8 << 20
	// The receiver holds the first request until release is closed; it
	// answers the others at once.
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	got := make(chan arrival, 100)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		got <- arrival{path: req.URL.Path, id: req.Header.Get("webhook-id"), body: string(b)}
		mu.Lock()
		first := n == 0
		n++
		mu.Unlock()
		if first {
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(open) // before srv.Close, which waits for the handler
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
		c.WebhookBodyBudget = budget
		c.WebhookTimeout = 2 * time.Minute // the first request is held
	})
	d.CreateDatabase(t, "turn", personSchema)
	next := func(path, name string) {
		t.Helper()
		select {
		case a := <-got:
			if a.path != path || !strings.Contains(a.body, `"@id":"Person/`+name+`"`) {
				t.Fatalf("the request that arrived is %s %s, want %s's of %s", a.path, a.id, path, name)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("no request within 60s, want %s's of %s", path, name)
		}
	}
	metric := func(name string) float64 {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), name)
	}
	// One request of 5 MiB fits the budget, not two.
	doc := func(name string, size int) {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/turn",
			fmt.Sprintf(`{"@type":"Person","@id":%q,"name":%q}`, name, strings.Repeat("x", size)))
	}
	// A webhook starts after the newest commit: a sees p1, p2 and p3, b
	// p2 and p3, c p3. a's request of p1 is held at the receiver, with
	// its bytes; b, then c, wait for them, in that order.
	create := func(name string) hook {
		return createHook(t, d, nil, "turn", "", fmt.Sprintf(`{"url":%q}`, srv.URL+"/"+name))
	}
	hooks := map[string]hook{}
	for i, name := range []string{"a", "b", "c"} {
		hooks[name] = create(name)
		doc(fmt.Sprintf("p%d", i+1), 5<<20)
		if name == "a" {
			next("/a", "p1")
			continue
		}
		eventually.True(t, 30*time.Second, name+" waits for room in the budget", func() bool {
			return metric("sluice_webhook_body_budget_waits_total") == float64(i)
		})
	}
	// b's settings change while it waits. A webhook made after the
	// change is started by a reload of the active webhooks that read it:
	// once its loop starts, b's loop knows its settings changed.
	starts := metric("sluice_webhook_loop_starts_total")
	d.MustDo(t, 200, dt.Admin(), "PATCH", fmt.Sprintf("/api/webhooks/admin/turn/%d", hooks["b"].ID), `{"description":"changed while b waited"}`)
	create("d")
	eventually.True(t, 30*time.Second, "the loop of the webhook made after the change starts", func() bool {
		return metric("sluice_webhook_loop_starts_total") > starts
	})
	// a's request is answered: its bytes go to b, which waited first.
	// b starts over to read its settings, and sends p2 before c sends
	// p3 (without the fix, b gave them back and c took them).
	open()
	next("/b", "p2")
	// The rest, each webhook's in order.
	want := map[string][]string{"/a": {"p2", "p3"}, "/b": {"p3"}, "/c": {"p3"}}
	for range 4 {
		select {
		case a := <-got:
			w := want[a.path]
			if len(w) == 0 || !strings.Contains(a.body, `"@id":"Person/`+w[0]+`"`) {
				t.Fatalf("%s: request %s, want the event of %v", a.path, a.id, w)
			}
			want[a.path] = w[1:]
		case <-time.After(60 * time.Second):
			t.Fatalf("requests left: %v", want)
		}
	}
	// Every byte of the budget is free once a, b and c are gone: d's
	// request, larger than the budget, takes all of it.
	for _, name := range []string{"a", "b", "c"} {
		d.MustDo(t, 200, dt.Admin(), "DELETE", fmt.Sprintf("/api/webhooks/admin/turn/%d", hooks[name].ID), nil)
	}
	doc("p4", 9<<20)
	next("/d", "p4")
}

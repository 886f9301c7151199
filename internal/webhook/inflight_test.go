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
	"github.com/sluice-dev/sluice/internal/daemon"
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

// TestLargeCommitIsReadWithinTheBudget: a commit larger than
// webhook_body_budget that wakes many webhooks is read from the log by
// one of them at a time: the others wait for room before they read it,
// so the pages of the log the webhooks hold at once stay within the
// budget, or one change larger than it (found by review: each webhook
// read the commit, and made its events, before it asked the budget for
// the request's body: 20 webhooks, one 8 MiB document and a budget of 1
// MiB took 768 MiB of heap). The first request is held by the receiver
// until every other webhook waits for room, so that they all try to read
// while one holds the commit.
func TestLargeCommitIsReadWithinTheBudget(t *testing.T) {
	t.Parallel()
	const budget, size, hooks = 1 << 20, 3 << 20, 5
	var mu sync.Mutex
	var pages, bytes, mostPages, mostBytes int64
	read := func(n int64) func() {
		mu.Lock()
		defer mu.Unlock()
		pages, bytes = pages+1, bytes+n
		mostPages, mostBytes = max(mostPages, pages), max(mostBytes, bytes)
		return func() {
			mu.Lock()
			defer mu.Unlock()
			pages, bytes = pages-1, bytes-n
		}
	}
	release := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	got := make(chan string, hooks)
	var first sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		first.Do(func() { <-release })
		got <- req.URL.Path + " " + string(b[:min(len(b), 200)])
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, WebhookLogRead: read}, func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
		c.WebhookBodyBudget = budget
	})
	d.CreateDatabase(t, "large", personSchema)
	for i := range hooks {
		createHook(t, d, nil, "large", "", fmt.Sprintf(`{"url":%q}`, fmt.Sprintf("%s/hook/%d", srv.URL, i)))
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/large", fmt.Sprintf(`{"@type":"Person","@id":"big","name":%q}`, strings.Repeat("x", size)))
	eventually.True(t, 60*time.Second, "every webhook but the one sending waits for room in the budget", func() bool {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_webhook_body_budget_waits_total") >= hooks-1
	})
	close(release)
	seen := map[string]bool{}
	for range hooks {
		select {
		case a := <-got:
			path, body, _ := strings.Cut(a, " ")
			if seen[path] || !strings.Contains(body, `"subject":"Person/big"`) {
				t.Fatalf("%s: a second request, or not the large document's: %s", path, body)
			}
			seen[path] = true
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d webhooks delivered the large document within 60s", len(seen), hooks)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d webhooks, a %d MiB document, a budget of %d MiB: at most %d pages, %.1f MiB, of the log held at once",
		hooks, size>>20, budget>>20, mostPages, float64(mostBytes)/(1<<20))
	if mostBytes > size+budget {
		t.Errorf("the webhooks held %.1f MiB of pages of the log at once (%d pages): want at most the document's page and the budget, %d MiB",
			float64(mostBytes)/(1<<20), mostPages, (size+budget)>>20)
	}
}

// budgetTurns is the setting of the tests of turns in
// webhook_body_budget: a budget of 8 MiB, which one request of 5 MiB fits
// and two do not, a database db, and a receiver that holds the first
// request until open is called and answers the others at once.
type budgetTurns struct {
	d    *dt.Daemon
	db   string
	url  string
	got  chan arrival
	open func()
}

func startBudgetTurns(t *testing.T, db string) *budgetTurns {
	t.Helper()
	release := make(chan struct{})
	var once sync.Once
	r := &budgetTurns{db: db, got: make(chan arrival, 100), open: func() { once.Do(func() { close(release) }) }}
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.got <- arrival{path: req.URL.Path, id: req.Header.Get("webhook-id"), body: string(b)}
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
	t.Cleanup(r.open) // before srv.Close, which waits for the handler
	r.url = srv.URL
	r.d = dt.Start(t, func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
		c.WebhookBodyBudget = 8 << 20
		c.WebhookTimeout = 2 * time.Minute // the first request is held
	})
	r.d.CreateDatabase(t, db, personSchema)
	return r
}

// next checks that the next request to arrive is path's, of document name.
func (r *budgetTurns) next(t *testing.T, path, name string) {
	t.Helper()
	select {
	case a := <-r.got:
		if a.path != path || !strings.Contains(a.body, `"@id":"Person/`+name+`"`) {
			t.Fatalf("the request that arrived is %s %s, want %s's of %s", a.path, a.id, path, name)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no request within 60s, want %s's of %s", path, name)
	}
}

// rest checks that the requests of want (path: documents, in order) arrive,
// each path's in order, and nothing else.
func (r *budgetTurns) rest(t *testing.T, want map[string][]string) {
	t.Helper()
	left := 0
	for _, w := range want {
		left += len(w)
	}
	for range left {
		select {
		case a := <-r.got:
			w := want[a.path]
			if len(w) == 0 || !strings.Contains(a.body, `"@id":"Person/`+w[0]+`"`) {
				t.Fatalf("%s: request %s, want the event of %v", a.path, a.id, w)
			}
			want[a.path] = w[1:]
		case <-time.After(60 * time.Second):
			t.Fatalf("requests left: %v", want)
		}
	}
}

func (r *budgetTurns) metric(t *testing.T, name string) float64 {
	t.Helper()
	return dt.MetricValue(string(r.d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), name)
}

// doc writes document name with a name of size bytes.
func (r *budgetTurns) doc(t *testing.T, name string, size int) {
	t.Helper()
	r.d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/"+r.db,
		fmt.Sprintf(`{"@type":"Person","@id":%q,"name":%q}`, name, strings.Repeat("x", size)))
}

// create makes webhook name, sending to /name, as who.
func (r *budgetTurns) create(t *testing.T, who dt.Auth, name string) hook {
	t.Helper()
	res := r.d.MustDo(t, 201, who, "POST", "/api/webhooks/admin/"+r.db, fmt.Sprintf(`{"url":%q}`, r.url+"/"+name))
	var h hook
	if err := json.Unmarshal(res.Body, &h); err != nil || h.ID == 0 {
		t.Fatalf("create webhook %s: %s (%v)", name, res.Body, err)
	}
	return h
}

// queue makes webhooks a, b and c (as who names, else as the admin), each
// before a document of 5 MiB, p1 to p3: a starts after the newest commit,
// so a sees p1, p2 and p3, b p2 and p3, c p3. a's request of p1 is held at
// the receiver, with its bytes; b, then c, wait for them, in that order.
func (r *budgetTurns) queue(t *testing.T, who map[string]dt.Auth) map[string]hook {
	t.Helper()
	hooks := map[string]hook{}
	for i, name := range []string{"a", "b", "c"} {
		as, ok := who[name]
		if !ok {
			as = dt.Admin()
		}
		hooks[name] = r.create(t, as, name)
		r.doc(t, fmt.Sprintf("p%d", i+1), 5<<20)
		if name == "a" {
			r.next(t, "/a", "p1")
			continue
		}
		eventually.True(t, 30*time.Second, name+" waits for room in the budget", func() bool {
			return r.metric(t, "sluice_webhook_body_budget_waits_total") == float64(i)
		})
	}
	return hooks
}

// freed checks that every byte of the budget is free once a, b and c are
// deleted: d's request, larger than the budget, takes all of it.
func (r *budgetTurns) freed(t *testing.T, hooks map[string]hook) {
	t.Helper()
	for _, name := range []string{"a", "b", "c"} {
		r.d.MustDo(t, 200, dt.Admin(), "DELETE", fmt.Sprintf("/api/webhooks/admin/%s/%d", r.db, hooks[name].ID), nil)
	}
	r.doc(t, "p4", 9<<20)
	r.next(t, "/d", "p4")
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
	r := startBudgetTurns(t, "turn")
	hooks := r.queue(t, nil)
	// b's settings change while it waits. A webhook made after the
	// change is started by a reload of the active webhooks that read it:
	// once its loop starts, b's loop knows its settings changed.
	starts := r.metric(t, "sluice_webhook_loop_starts_total")
	r.d.MustDo(t, 200, dt.Admin(), "PATCH", fmt.Sprintf("/api/webhooks/admin/turn/%d", hooks["b"].ID), `{"description":"changed while b waited"}`)
	r.create(t, dt.Admin(), "d")
	eventually.True(t, 30*time.Second, "the loop of the webhook made after the change starts", func() bool {
		return r.metric(t, "sluice_webhook_loop_starts_total") > starts
	})
	// a's request is answered: its bytes go to b, which waited first.
	// b starts over to read its settings, and sends p2 before c sends
	// p3 (without the fix, b gave them back and c took them).
	r.open()
	r.next(t, "/b", "p2")
	r.rest(t, map[string][]string{"/a": {"p2", "p3"}, "/b": {"p3"}, "/c": {"p3"}})
	r.freed(t, hooks)
}

// TestAccessChangeKeepsTheBudgetTurn: a webhook waiting for room in
// webhook_body_budget whose creator's role is narrowed meanwhile (it
// still reads) keeps the bytes it waited for when it starts over to check
// the access and make its request with the new role, and sends it before
// the webhook that waited behind it (found by review: the run gave the
// bytes back when the access change started it over, as a change of
// settings once did, so every such change made during its wait sent it to
// the back again).
func TestAccessChangeKeepsTheBudgetTurn(t *testing.T) {
	t.Parallel()
	r := startBudgetTurns(t, "access")
	r.d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"carl","organization":"admin","password":"carl-password"}`)
	r.d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/access", `{"user":"carl","role":"admin"}`)
	carl := dt.Basic("carl", "carl-password")
	hooks := r.queue(t, map[string]dt.Auth{"b": carl})
	// b's run read the access log's version before it waited: the
	// change is newer, and affects b's grant (a narrower role), so b
	// starts over once its turn comes, before it sends (see loop.send).
	r.d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/access", `{"user":"carl","role":"write"}`)
	r.create(t, dt.Admin(), "d")
	// a's request is answered: its bytes go to b, which starts over and
	// sends p2 before c sends p3 (without the fix, b gave them back and
	// c took them). (How many loops start meanwhile depends on when d's
	// starts and on the waits: not counted, it failed once in CI.)
	r.open()
	r.next(t, "/b", "p2")
	r.rest(t, map[string][]string{"/a": {"p2", "p3"}, "/b": {"p3"}, "/c": {"p3"}})
	r.freed(t, hooks)
}

// TestAccessEndedKeepsNoBudgetTurn: a webhook waiting for room in
// webhook_body_budget whose creator loses its read access meanwhile is
// paused as revoked once its turn comes, and keeps none of the bytes:
// the webhook that waited behind it sends its request, and every byte of
// the budget is free at the end.
func TestAccessEndedKeepsNoBudgetTurn(t *testing.T) {
	t.Parallel()
	r := startBudgetTurns(t, "ended")
	r.d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	r.d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/ended", `{"user":"rita","role":"admin"}`)
	hooks := r.queue(t, map[string]dt.Auth{"b": dt.Basic("rita", "rita-password")})
	r.d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/ended", `{"user":"rita","role":"none"}`)
	r.create(t, dt.Admin(), "d")
	r.open()
	// b sends nothing: c's p3 comes first (a's p2 waits behind c).
	r.next(t, "/c", "p3")
	r.rest(t, map[string][]string{"/a": {"p2", "p3"}})
	waitStatus(t, r.d, "ended", hooks["b"].ID, 30*time.Second, func(m map[string]any) bool { return m["state"] == "revoked" })
	r.freed(t, hooks)
}

package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// goReceiver is a webhook receiver in the test process: it hands each
// request's body, with when it arrived, to got, and answers with the
// next of its planned answers (204 once they run out).
type goReceiver struct {
	srv  *httptest.Server
	got  chan goRequest
	mu   sync.Mutex
	plan []func(http.ResponseWriter)
}

// goRequest is a request a goReceiver got: its body, and when it arrived.
type goRequest struct {
	body string
	at   time.Time
}

func startGoReceiver(t *testing.T) *goReceiver {
	t.Helper()
	r := &goReceiver{got: make(chan goRequest, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		at := time.Now()
		r.mu.Lock()
		var answer func(http.ResponseWriter)
		if len(r.plan) > 0 {
			answer, r.plan = r.plan[0], r.plan[1:]
		}
		r.mu.Unlock()
		r.got <- goRequest{body: string(b), at: at}
		if answer == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		answer(w)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// answer plans the answers to the next requests.
func (r *goReceiver) answer(fns ...func(http.ResponseWriter)) {
	r.mu.Lock()
	r.plan = append(r.plan, fns...)
	r.mu.Unlock()
}

// next returns the next request's body.
func (r *goReceiver) next(t *testing.T) string {
	t.Helper()
	return r.nextRequest(t).body
}

// nextRequest returns the next request.
func (r *goReceiver) nextRequest(t *testing.T) goRequest {
	t.Helper()
	return r.nextWithin(t, 30*time.Second)
}

// nextWithin returns the next request, failing the test when none came
// within d.
func (r *goReceiver) nextWithin(t *testing.T, d time.Duration) goRequest {
	t.Helper()
	select {
	case req := <-r.got:
		return req
	case <-time.After(d):
		t.Fatalf("no webhook request within %s", d)
		return goRequest{}
	}
}

// TestWebhookCreatorNarrowedSeesNoPrivateField: a webhook delivers with
// its creator's access as it is at each delivery: once the creator is
// narrowed from admin to read, neither the next commit's event, made at
// once, nor the retry of an event first attempted while it was admin,
// shows the @private field.
func TestWebhookCreatorNarrowedSeesNoPrivateField(t *testing.T) {
	t.Parallel()
	r := startGoReceiver(t)
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookRetrySchedule = []time.Duration{time.Second, time.Second}
		c.WebhookAllowNetworks = loopback
	})
	d.CreateDatabase(t, "narrow", "type Person { name: String! ssn: String @private }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"carl","organization":"admin","password":"carl-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/narrow", `{"user":"carl","role":"admin"}`)
	carl := dt.Basic("carl", "carl-password")
	d.MustDo(t, 201, carl, "POST", "/api/webhooks/admin/narrow", fmt.Sprintf(`{"url":%q}`, r.srv.URL+"/hook"))
	person := func(name string) string {
		return fmt.Sprintf(`{"@type":"Person","@id":%q,"name":%q,"ssn":"secret-%s"}`, name, name, name)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/narrow", person("a"))
	if b := r.next(t); !strings.Contains(b, "secret-a") {
		t.Fatalf("an admin's webhook: %s", b)
	}
	// The first attempt of b fails while carl is an admin; carl is
	// narrowed before its retry.
	r.answer(func(w http.ResponseWriter) { w.WriteHeader(500) })
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/narrow", person("b"))
	if b := r.next(t); !strings.Contains(b, "secret-b") {
		t.Fatalf("the first attempt, carl an admin: %s", b)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/narrow", `{"user":"carl","role":"read"}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/narrow", person("c"))
	for _, name := range []string{"b", "c"} {
		b := r.next(t)
		// The document, not the whole event: the event's id is random
		// and may hold "ssn".
		var ev struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(b), &ev); err != nil {
			t.Fatalf("the event of %s: %v: %s", name, err, b)
		}
		_, hasSSN := ev.Data["ssn"]
		if ev.Data["@id"] != "Person/"+name || hasSSN || strings.Contains(b, "secret") {
			t.Fatalf("after carl was narrowed to read, the event of %s: %s", name, b)
		}
	}
}

// TestWebhookCaps: a user may make at most max_webhooks_per_user webhooks
// over every database (409 naming the key); the super user is exempt.
func TestWebhookCaps(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxWebhooksPerUser = 2 })
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wendy","organization":"admin","password":"wendy-password"}`)
	wendy := dt.Basic("wendy", "wendy-password")
	for _, db := range []string{"one", "two"} {
		d.CreateDatabase(t, db, personSchema)
		d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"wendy","role":"admin"}`)
	}
	hook := `{"url":"https://example.com/hook"}`
	d.MustDo(t, 201, wendy, "POST", "/api/webhooks/admin/one", hook)
	d.MustDo(t, 201, wendy, "POST", "/api/webhooks/admin/two", hook)
	if r := d.Do(t, wendy, "POST", "/api/webhooks/admin/one", hook); r.Status != 409 || !strings.Contains(string(r.Body), "max_webhooks_per_user") {
		t.Fatalf("a third webhook of wendy's: %d %s, want 409 naming max_webhooks_per_user", r.Status, r.Body)
	}
	for range 3 {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/one", hook)
	}
}

// TestWebhookAnswersAreBounded: an answer holding NUL bytes is recorded,
// sanitized, as a failed attempt, retried on the schedule (not sooner);
// an answer with more than 16 KiB of headers is a failed attempt saying
// so, however large.
func TestWebhookAnswersAreBounded(t *testing.T) {
	t.Parallel()
	r := startGoReceiver(t)
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookRetrySchedule = []time.Duration{2 * time.Second, 50 * time.Millisecond, 50 * time.Millisecond}
		c.WebhookAllowNetworks = loopback
	})
	d.CreateDatabase(t, "answers", personSchema)
	h := createHook(t, d, nil, "answers", "", fmt.Sprintf(`{"url":%q}`, r.srv.URL+"/hook"))
	r.answer(func(w http.ResponseWriter) {
		w.WriteHeader(500)
		_, _ = w.Write([]byte("bad\x00answer\x00"))
	}, func(w http.ResponseWriter) {
		w.Header().Set("X-Large", strings.Repeat("h", 1<<20))
		w.WriteHeader(200)
	})
	insert(t, d, "answers", "one")
	// When the requests arrived, not when the test took them: the test
	// may take the first late on a loaded machine, and the retry's wait
	// (2 s with a jitter of up to -20%) leaves 100 ms over 1.5 s.
	first := r.nextRequest(t).at
	st := waitStatus(t, d, "answers", h.ID, 30*time.Second, func(m map[string]any) bool { return m["attempt"] == 1.0 })
	if msg := st["status_message"].(string); msg != "answered 500" {
		t.Errorf("status after the NUL answer: %q", msg)
	}
	res := d.MustDo(t, 200, dt.Admin(), "GET", fmt.Sprintf("/api/webhooks/admin/answers/%d/attempts", h.ID), nil)
	var attempts []struct {
		Status   int    `json:"status"`
		Response string `json:"response"`
	}
	if err := json.Unmarshal(res.Body, &attempts); err != nil || len(attempts) != 1 || attempts[0].Status != 500 || attempts[0].Response != "bad\uFFFDanswer\uFFFD" {
		t.Fatalf("the attempts after the NUL answer: %s (%v)", res.Body, err)
	}
	retry := r.nextRequest(t).at // the retry, on the schedule
	if waited := retry.Sub(first); waited < 1500*time.Millisecond {
		t.Errorf("the retry came %v after the first attempt, before its schedule's 2s", waited)
	}
	st = waitStatus(t, d, "answers", h.ID, 30*time.Second, func(m map[string]any) bool { return m["attempt"] == 2.0 })
	if msg := st["status_message"].(string); !strings.Contains(msg, "headers are larger than 16384 bytes") {
		t.Errorf("status after the answer of 1 MiB of headers: %q", msg)
	}
	r.next(t) // and then delivered
	waitStatus(t, d, "answers", h.ID, 30*time.Second, func(m map[string]any) bool { return m["attempt"] == 0.0 && m["delivered"] == 1.0 })
}

// TestWebhookErrorsNameNoResolvedAddress: an attempt to a name that
// resolves only to refused addresses points at webhook_allow_networks, and
// one to a name that does not resolve says so; neither names an address
// (or why it was refused), so that the admins who read attempts learn
// nothing of where internal names point; nothing is dialled. Both said
// the former before: a mistyped host looked like an allow-list problem.
func TestWebhookErrorsNameNoResolvedAddress(t *testing.T) {
	t.Parallel()
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "internal.test":
			return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1"), netip.MustParseAddr("10.9.8.7")}, nil
		case "missing.test":
			return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.1.1.1:53", IsNotFound: true}
		}
		t.Errorf("resolved %q", host)
		return nil, errors.New("test: no resolving")
	}
	dial := func(_ context.Context, network, address string) (net.Conn, error) {
		t.Errorf("dialled %s %s", network, address)
		return nil, errors.New("test: no dialing")
	}
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, WebhookResolve: resolve, WebhookDial: dial}, func(c *config.Config) {
		c.WebhookRetrySchedule = []time.Duration{time.Hour}
	})
	d.CreateDatabase(t, "names", personSchema)
	for host, want := range map[string]string{
		"internal.test": "internal.test resolves only to addresses webhooks may not connect to (not public, and not in webhook_allow_networks; the server's log names them)",
		"missing.test":  "missing.test does not resolve: no such host",
	} {
		h := createHook(t, d, nil, "names", "", fmt.Sprintf(`{"url":"http://%s/hook"}`, host))
		insert(t, d, "names", "p-"+host)
		st := waitStatus(t, d, "names", h.ID, 30*time.Second, func(m map[string]any) bool { return m["attempt"] == 1.0 })
		if msg := st["status_message"].(string); msg != want {
			t.Errorf("%s: status message %q, want %q", host, msg, want)
		}
		for _, leak := range []string{"127.0.0.1", "10.9.8.7", "10.1.1.1", "loopback", "private"} {
			if b, _ := json.Marshal(st); strings.Contains(string(b), leak) {
				t.Errorf("%s: the status says %q: %s", host, leak, b)
			}
		}
	}
}

// TestForgedNotificationsCostLittle: a role that knows the name of
// Sluice's commits channel (it is secret, TestNotificationsArePrivate, but
// a superuser can read it) can send Sluice's notifications with any
// payload. A notification of a commit is only a hint: the deliverer reads
// the heads of the logs (at most every few milliseconds) and wakes the
// loops of the databases that moved, so a flood of forged ones does not
// make every loop read the log for each (it did: 200 webhooks turned each
// NOTIFY into about eight reads).
func TestForgedNotificationsCostLittle(t *testing.T) {
	t.Parallel()
	r := startGoReceiver(t)
	d := dt.Start(t, func(c *config.Config) { c.WebhookAllowNetworks = loopback })
	d.CreateDatabase(t, "flood", personSchema)
	const hooks = 10
	for range hooks {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/flood", fmt.Sprintf(`{"url":%q}`, r.srv.URL))
	}
	// Commits made through another replica reach the deliverer as
	// notifications, after the forged ones sent before them (its own
	// process's commits wake it directly).
	other := dt.Start(t, dt.WithDatabaseURL(d.DatabaseURL), func(c *config.Config) { c.WebhookAllowNetworks = loopback })
	delivered := func(name string) {
		t.Helper()
		if err := post(other, "flood", name); err != nil {
			t.Fatal(err)
		}
		for range hooks {
			if b := r.next(t); !strings.Contains(b, name) {
				t.Fatalf("a delivery of another commit: %s", b)
			}
		}
	}
	reads := func() float64 { // whichever replica delivers
		var n float64
		for _, r := range []*dt.Daemon{d, other} {
			n += dt.MetricValue(string(r.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_webhook_log_reads_total")
		}
		return n
	}
	delivered("first")
	before := reads()

	var info struct {
		Schema string `json:"postgres_schema"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/db/admin/flood", nil).Body, &info); err != nil {
		t.Fatal(err)
	}
	dbID := strings.TrimPrefix(info.Schema, "sluice_db_")
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	nobody := d.ConnectAsNewRole(t, "nobody")
	var channel string
	if err := admin.QueryRow(ctx, "SELECT value FROM sluice.settings WHERE key = 'commits_channel'").Scan(&channel); err != nil {
		t.Fatal(err)
	}
	const forged = 2000
	for i := range forged {
		payload := dbID
		if i%2 == 1 {
			payload = "0" // an access change, to every loop
		}
		if _, err := nobody.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
			t.Fatal(err)
		}
	}
	// Notifications arrive in order: once a commit made after them, on
	// the other replica, is delivered, they were all heard.
	delivered("second")
	n := reads() - before
	t.Logf("%d forged notifications and a commit: %.0f log reads", forged, n)
	if n > forged/20 {
		t.Errorf("%d forged notifications and a commit made the webhook loops read the log %.0f times", forged, n)
	}
}

// TestIdleWebhooksIgnoreUnrelatedAccessChanges: access changes that do
// not affect a webhook's creator (another user making and revoking its
// own tokens) do not start idle webhook loops over (they did, every one
// of them at each change, about ten statements each); a change that
// does affect it still pauses an idle webhook, without a commit.
func TestIdleWebhooksIgnoreUnrelatedAccessChanges(t *testing.T) {
	t.Parallel()
	r := startGoReceiver(t)
	d := dt.Start(t, func(c *config.Config) { c.WebhookAllowNetworks = loopback })
	d.CreateDatabase(t, "idle", personSchema)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/idle", `{"user":"rita","role":"admin"}`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"uma","organization":"admin","password":"uma-password"}`)
	const hooks = 10
	var rita hook
	for i := range hooks {
		auth := dt.Admin()
		if i == 0 {
			auth = dt.Basic("rita", "rita-password")
		}
		res := d.MustDo(t, 201, auth, "POST", "/api/webhooks/admin/idle", fmt.Sprintf(`{"url":%q}`, r.srv.URL))
		if i == 0 {
			if err := json.Unmarshal(res.Body, &rita); err != nil {
				t.Fatal(err)
			}
		}
	}
	delivered := func(name string) {
		t.Helper()
		insert(t, d, "idle", name)
		for range hooks {
			if b := r.next(t); !strings.Contains(b, name) {
				t.Fatalf("a delivery of another commit: %s", b)
			}
		}
	}
	starts := func() float64 {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_webhook_loop_starts_total")
	}
	delivered("first")
	before := starts()
	uma := dt.Basic("uma", "uma-password")
	const changes = 30
	for range changes {
		var tok struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal(d.MustDo(t, 201, uma, "POST", "/api/tokens", `{"name":"churn"}`).Body, &tok); err != nil {
			t.Fatal(err)
		}
		d.MustDo(t, 200, uma, "DELETE", fmt.Sprintf("/api/tokens/%d", tok.ID), nil)
	}
	// The heads and the access version are read together: once a commit
	// made after the changes is delivered, every loop has judged them.
	delivered("second")
	n := starts() - before
	t.Logf("%d token changes of another user: %.0f loop starts", 2*changes, n)
	if n > 0 {
		t.Errorf("%d access changes of another user started idle webhook loops over %.0f times", 2*changes, n)
	}
	// A change that affects rita's webhook pauses it, idle.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/idle", `{"user":"rita","role":"none"}`)
	waitStatus(t, d, "idle", rita.ID, 30*time.Second, func(m map[string]any) bool { return m["state"] == "revoked" })
}

// TestWebhookFilterIsBounded: a filter of more than 64 KiB of JSON is
// refused with a 400 naming filter and the limit, when a webhook is made
// and when it is changed (found by review: a filter of 16 MiB was taken,
// and every listing of the database's webhooks then returned 16 MB); one
// just within it is taken.
func TestWebhookFilterIsBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "filters", personSchema)
	// filter returns a filter of exactly n bytes.
	filter := func(n int) string {
		f := `{"name":{"eq":""}}`
		return `{"name":{"eq":"` + strings.Repeat("x", n-len(f)) + `"}}`
	}
	const limit = 64 << 10
	hook := func(f string) string {
		return fmt.Sprintf(`{"url":"https://example.com/hook","classes":["Person"],"filter":%s}`, f)
	}
	refused := func(res dt.Response, what string) {
		t.Helper()
		var e struct {
			Message string `json:"api:message"`
		}
		_ = json.Unmarshal(res.Body, &e)
		if res.Status != 400 || !strings.Contains(e.Message, "filter") || !strings.Contains(e.Message, "65536") {
			t.Errorf("%s: %d %.300s, want 400 naming filter and 65536", what, res.Status, res.Body)
		}
	}
	refused(d.Do(t, dt.Admin(), "POST", "/api/webhooks/admin/filters", hook(filter(limit+1))), "a webhook with a filter of 64 KiB and a byte")
	// Past the 512 KiB a webhook's settings may take, the body is
	// refused before it is read.
	if res := d.Do(t, dt.Admin(), "POST", "/api/webhooks/admin/filters", hook(filter(16<<20))); res.Status != 413 || !strings.Contains(string(res.Body), "the most this route takes (a webhook's settings)") {
		t.Errorf("a webhook with a filter of 16 MiB: %d %.300s, want 413 naming the route's bound", res.Status, res.Body)
	}
	h := createHook(t, d, nil, "filters", "", hook(filter(limit)))
	one := fmt.Sprintf("/api/webhooks/admin/filters/%d", h.ID)
	refused(d.Do(t, dt.Admin(), "PATCH", one, fmt.Sprintf(`{"filter":%s}`, filter(limit+1))), "a change to a filter of 64 KiB and a byte")
	st := status(t, d, "filters", h.ID)
	if f, _ := json.Marshal(st["filter"]); len(f) != limit {
		t.Errorf("after the refused change, the filter is %d bytes of JSON, want the %d it was made with", len(f), limit)
	}
}

// TestRetryingWebhooksHoldNoBody: a webhook waiting to retry holds neither
// the request's body nor the events and the log it was made from: they
// are made again from the recorded position when the retry is due (found
// by review: 20 webhooks retrying a commit of a 4 MiB document in an hour
// held 265 MiB of heap meanwhile).
func TestRetryingWebhooksHoldNoBody(t *testing.T) {
	r := startGoReceiver(t)
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookRetrySchedule = []time.Duration{time.Hour}
		c.WebhookAllowNetworks = loopback
		// Twenty deliveries of 4 MiB under -race can hold off a renewal
		// on a loaded machine past the default 10 s term (CI saw it
		// once): the deliverer then stops and starts again, and the
		// requests come later than the test waits. The lease is not
		// what this test checks.
		c.WebhookLeaseTTL = time.Minute
	})
	d.CreateDatabase(t, "large", personSchema)
	const hooks = 20
	var ids []int64
	for range hooks {
		ids = append(ids, createHook(t, d, nil, "large", "", fmt.Sprintf(`{"url":%q}`, r.srv.URL)).ID)
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	fail := func(w http.ResponseWriter) { w.WriteHeader(500) }
	for range hooks {
		r.answer(fail)
	}
	big := strings.Repeat("x", 4<<20)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/large", fmt.Sprintf(`{"@type":"Person","@id":"big","name":%q}`, big))
	big = ""
	// Twenty requests of 4 MiB under -race take minutes on a loaded
	// machine: what is checked is what the webhooks hold once they wait,
	// not how soon they get there.
	for range hooks {
		r.nextWithin(t, 5*time.Minute)
	}
	for _, id := range ids {
		waitStatus(t, d, "large", id, 5*time.Minute, func(m map[string]any) bool { return m["attempt"] == 1.0 })
	}
	// A failed attempt is recorded before its loop lets go of the request
	// and starts over: measured before every loop waits for its retry,
	// the heap holds the requests of those that did not yet.
	eventually.True(t, 5*time.Minute, "every webhook waits for its retry", func() bool {
		return loopsWaitingToRetry() == hooks
	})
	grown := int64(heap()) - int64(before)
	t.Logf("%d webhooks retrying a 4 MiB document in an hour: heap grew %.1f MiB", hooks, float64(grown)/(1<<20))
	// Each held about 12 MiB (the page read, the events, the body): 249
	// MiB in all. What is left (about 60 MiB) does not grow with the
	// webhooks: the Postgres connections that read the 4 MiB row keep
	// their buffers, one per connection of the pool.
	if grown > 120<<20 {
		t.Errorf("%d webhooks waiting to retry a 4 MiB document: the heap grew %.1f MiB", hooks, float64(grown)/(1<<20))
	}
}

// TestRetryingWebhooksReadOnlyTheAccessChangesThatConcernThem: a webhook
// waiting to retry does not follow the access log; when its retry comes
// it judges the access changes made meanwhile (up to the log's hour of
// retention), which any user makes (its tokens, the roles of its
// database). It reads only those that may concern its creator, one at a
// time, and holds none of the others (found by review: it read them all
// into memory at once, each retrying webhook on its own, about 118 MiB per
// webhook for 200,000 changes, past webhook_body_budget and any other
// bound). Here 4 retrying webhooks and 200,000 access changes of other
// users' tokens must cost the retries little memory.
func TestRetryingWebhooksReadOnlyTheAccessChangesThatConcernThem(t *testing.T) {
	const hooks, changes = 4, 200_000
	r := startGoReceiver(t)
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookRetrySchedule = []time.Duration{6 * time.Second, time.Second}
		c.WebhookAllowNetworks = loopback
	})
	d.CreateDatabase(t, "churn", personSchema)
	for i := range hooks {
		d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/churn", fmt.Sprintf(`{"url":%q}`, r.srv.URL+fmt.Sprintf("/h%d", i)))
	}
	fail := func(w http.ResponseWriter) { w.WriteHeader(500) }
	r.answer(fail, fail, fail, fail)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/churn", `{"@type":"Person","@id":"a","name":"a"}`)
	for range hooks {
		r.nextWithin(t, 5*time.Minute) // each first attempt fails: each webhook waits to retry
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Revocations of other users' tokens, as many users' churn writes
	// them: none concerns the webhooks' creator.
	if _, err := conn.Exec(ctx, fmt.Sprintf(`WITH v AS (UPDATE sluice.access_counter SET version = version + %[1]d RETURNING version)
		INSERT INTO sluice.access_changes (version, kind, user_id, token_id) SELECT v.version - %[1]d + g, 'token', 1000000 + g, 1000000000 + g
		FROM v, generate_series(1, %[1]d) g`, changes)); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range hooks {
		r.nextWithin(t, 5*time.Minute) // the retries
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d MiB between the access churn and the %d retries", alloc>>20, hooks)
	// The change feed of the process reads the changes whole once
	// (changefeed guards.sync; about 120 MiB of allocations here), and
	// read whole by each retry they cost about as much again per
	// webhook (over 600 MiB in all here). Read as they are now, the
	// retries allocate a few MiB whatever the churn.
	if alloc > 250<<20 {
		t.Errorf("the retries of %d webhooks allocated %d MiB for %d access changes none of them is concerned with", hooks, alloc>>20, changes)
	}
}

// loopsWaitingToRetry returns how many webhook loops of the process wait
// for the time of their next attempt (or, as they did before they let go
// of the request first, sleep for it).
func loopsWaitingToRetry() int {
	buf := make([]byte, 16<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "webhook.(*loop).waitRetry(") || strings.Contains(g, "webhook.sleep(") {
			n++
		}
	}
	return n
}

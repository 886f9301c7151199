package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

const personSchema = "type Person { name: String! age: Int }"

// post inserts Person/<name> through d; for goroutines (no t.Fatal).
func post(d *dt.Daemon, db, name string) error {
	req, err := http.NewRequest("POST", d.URL+"/api/document/admin/"+db, strings.NewReader(fmt.Sprintf(`{"@type":"Person","@id":%q,"name":%q}`, name, name)))
	if err != nil {
		return err
	}
	dt.Admin()(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("insert %s: status %d", name, resp.StatusCode)
	}
	return nil
}

// position parses a delivery's id.
func position(t *testing.T, id string) sluice.Position {
	t.Helper()
	p, err := sluice.ParsePosition(id)
	if err != nil {
		t.Fatalf("webhook-id %q: %v", id, err)
	}
	return p
}

// checkVerified fails the test for a delivery whose signature did not
// verify.
func checkVerified(t *testing.T, d delivery) {
	t.Helper()
	if !d.Verified {
		t.Fatalf("delivery %s to %s: the standardwebhooks package did not verify it: %s", d.ID, d.Path, d.Error)
	}
}

// TestWebhookDeliversEveryCommitInOrder: 1,000 commits made on two
// replicas at once reach a webhook per event and one per commit, every
// request signed (verified by the reference implementation), in commit
// order, none missing, none twice.
func TestWebhookDeliversEveryCommitInOrder(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	a := dt.Start(t, fastRetries)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL), fastRetries)
	a.CreateDatabase(t, "orders", personSchema)
	createHook(t, a, r, "orders", "/each", fmt.Sprintf(`{"url":%q,"description":"every event"}`, r.url("/each")))
	createHook(t, b, r, "orders", "/commits", fmt.Sprintf(`{"url":%q,"batch":"commit","classes":["Person"],"ops":["create"]}`, r.url("/commits")))
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, d := range []*dt.Daemon{a, b} {
		wg.Go(func() {
			for j := range n / 2 {
				if err := post(d, "orders", fmt.Sprintf("p%d-%03d", i, j)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := map[string][]delivery{}
	events := map[string]int{}
	for events["/each"] < n || events["/commits"] < n {
		d := r.next(2 * time.Minute)
		checkVerified(t, d)
		if d.Answered != 204 {
			t.Fatalf("delivery %s answered %d", d.ID, d.Answered)
		}
		got[d.Path] = append(got[d.Path], d)
		events[d.Path] += len(d.Events)
	}
	for path, ct := range map[string]string{"/each": "application/cloudevents+json", "/commits": "application/cloudevents-batch+json"} {
		ds := got[path]
		if len(ds) != n {
			t.Fatalf("%s: %d requests, want %d (one per event, and one per commit of one change)", path, len(ds), n)
		}
		subjects := map[string]bool{}
		var last sluice.Position
		for i, d := range ds {
			p := position(t, d.ID)
			if i > 0 && p.Seq != last.Seq+1 {
				t.Fatalf("%s: request %d is commit %d after commit %d: not in order, or one missing", path, i, p.Seq, last.Seq)
			}
			last = p
			if d.ContentType != ct || len(d.Events) != 1 || d.Events[0].ID != d.ID || d.Events[0].Type != "entity.create" {
				t.Fatalf("%s: request %s: content type %q, events %+v", path, d.ID, d.ContentType, d.Events)
			}
			subjects[d.Events[0].Subject] = true
		}
		if len(subjects) != n {
			t.Fatalf("%s: %d distinct documents, want %d", path, len(subjects), n)
		}
	}
	r.do(map[string]any{"cmd": "sync"})
	r.none()
}

// TestWebhookRetriesErrorsAndTimeouts: a 500, another, then no answer
// within webhook_timeout are retried, in that order, before the same
// request succeeds; the next commit follows only then. The attempts log
// shows each.
func TestWebhookRetriesErrorsAndTimeouts(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	a := dt.Start(t, fastRetries)
	a.CreateDatabase(t, "retry", personSchema)
	h := createHook(t, a, r, "retry", "/r", fmt.Sprintf(`{"url":%q}`, r.url("/r")))
	r.do(map[string]any{"cmd": "fail", "path": "/r", "status": 500, "count": 2})
	r.do(map[string]any{"cmd": "hang", "path": "/r", "count": 1})
	insert(t, a, "retry", "one")
	insert(t, a, "retry", "two")
	var first string
	for i, want := range []int{500, 500, 0, 204} {
		d := r.next(30 * time.Second)
		checkVerified(t, d)
		if i == 0 {
			first = d.ID
		}
		if d.ID != first || d.Answered != want || d.Events[0].Subject != "Person/one" {
			t.Fatalf("attempt %d: %s answered %d (%v), want %s answered %d", i+1, d.ID, d.Answered, d.Events, first, want)
		}
	}
	d := r.next(30 * time.Second)
	if d.Events[0].Subject != "Person/two" || d.Answered != 204 {
		t.Fatalf("after the retries: %s %v answered %d, want Person/two", d.ID, d.Events, d.Answered)
	}
	st := waitStatus(t, a, "retry", h.ID, 10*time.Second, func(m map[string]any) bool { return m["delivered"] == 2.0 })
	// The webhook's position is numbers alone; the event's id carries its
	// commit's tag.
	id := dt.Untag(d.ID)
	if st["status"] != "active" || st["failed"] != 3.0 || st["position"] != id && !strings.HasPrefix(st["position"].(string), strings.TrimSuffix(id, "0")) {
		t.Fatalf("status after the retries: %v", st)
	}
	var attempts []struct {
		MessageID string `json:"message_id"`
		Attempt   int    `json:"attempt"`
		Status    int    `json:"status"`
		Error     string `json:"error"`
	}
	res := a.MustDo(t, 200, dt.Admin(), "GET", fmt.Sprintf("/api/webhooks/admin/retry/%d/attempts?limit=5", h.ID), nil)
	if err := json.Unmarshal(res.Body, &attempts); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id      string
		attempt int
		status  int
		err     string
	}{{d.ID, 1, 204, ""}, {first, 4, 204, ""}, {first, 3, 0, "no answer within 1s (webhook_timeout)"}, {first, 2, 500, "answered 500"}, {first, 1, 500, "answered 500"}}
	if len(attempts) != len(want) {
		t.Fatalf("attempts log: %s", res.Body)
	}
	for i, w := range want {
		got := attempts[i]
		if got.MessageID != w.id || got.Attempt != w.attempt || got.Status != w.status || got.Error != w.err {
			t.Errorf("attempt log entry %d = %+v, want %+v", i, got, w)
		}
	}
}

// TestWebhookReceiverDownThenCatchUp: while the receiver is down, requests
// are retried with growing waits; once it is back, every commit made
// meanwhile arrives, in order.
func TestWebhookReceiverDownThenCatchUp(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	a := dt.Start(t, fastRetries, func(c *config.Config) {
		c.WebhookRetrySchedule = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
			400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second}
	})
	a.CreateDatabase(t, "down", personSchema)
	h := createHook(t, a, r, "down", "/d", fmt.Sprintf(`{"url":%q}`, r.url("/d")))
	r.do(map[string]any{"cmd": "down"})
	for i := range 20 {
		insert(t, a, "down", fmt.Sprintf("n%02d", i))
	}
	st := waitStatus(t, a, "down", h.ID, 30*time.Second, func(m map[string]any) bool { return m["attempt"].(float64) >= 3 })
	if st["status"] != "retrying" || st["next_attempt_at"] == nil || !strings.Contains(st["status_message"].(string), "refused") {
		t.Fatalf("while the receiver is down: %v", st)
	}
	r.do(map[string]any{"cmd": "up"})
	for i := range 20 {
		d := r.next(30 * time.Second)
		checkVerified(t, d)
		if want := fmt.Sprintf("Person/n%02d", i); d.Events[0].Subject != want || d.Answered != 204 {
			t.Fatalf("delivery %d after the receiver came back: %v answered %d, want %s", i, d.Events, d.Answered, want)
		}
	}
	waitStatus(t, a, "down", h.ID, 10*time.Second, func(m map[string]any) bool { return m["status"] == "active" && m["attempt"] == 0.0 })
}

// TestWebhookFailingKeepsPosition: when the retry schedule runs out the
// webhook is paused as failing, its position kept; resumed, it delivers
// the event that failed, then what followed.
func TestWebhookFailingKeepsPosition(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	a := dt.Start(t, fastRetries)
	a.CreateDatabase(t, "failing", personSchema)
	h := createHook(t, a, r, "failing", "/f", fmt.Sprintf(`{"url":%q}`, r.url("/f")))
	before := status(t, a, "failing", h.ID)["position"]
	r.do(map[string]any{"cmd": "fail", "path": "/f", "status": 503, "count": 5}) // the first attempt and 4 retries
	insert(t, a, "failing", "one")
	st := waitStatus(t, a, "failing", h.ID, 30*time.Second, func(m map[string]any) bool { return m["state"] == "failing" })
	if st["position"] != before || !strings.Contains(st["status_message"].(string), "failed 5 times") {
		t.Fatalf("failing: %v; want the position %v kept", st, before)
	}
	for range 5 {
		if d := r.next(10 * time.Second); d.Answered != 503 {
			t.Fatalf("answered %d, want 503", d.Answered)
		}
	}
	insert(t, a, "failing", "two")
	a.MustDo(t, 200, dt.Admin(), "POST", fmt.Sprintf("/api/webhooks/admin/failing/%d/resume", h.ID), nil)
	for _, want := range []string{"Person/one", "Person/two"} {
		d := r.next(30 * time.Second)
		checkVerified(t, d)
		if d.Events[0].Subject != want || d.Answered != 204 {
			t.Fatalf("after resuming: %v answered %d, want %s", d.Events, d.Answered, want)
		}
	}
}

// TestWebhookReplay moves a webhook back: it delivers again, in order,
// everything after the position given; positions that are not retained
// history are refused.
func TestWebhookReplay(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	a := dt.Start(t, fastRetries)
	a.CreateDatabase(t, "replay", personSchema)
	h := createHook(t, a, r, "replay", "/p", fmt.Sprintf(`{"url":%q,"batch":"commit"}`, r.url("/p")))
	var ids []string
	for i := range 5 {
		insert(t, a, "replay", fmt.Sprintf("r%d", i))
		d := r.next(30 * time.Second)
		checkVerified(t, d)
		ids = append(ids, d.ID)
	}
	path := fmt.Sprintf("/api/webhooks/admin/replay/%d/replay", h.ID)
	a.MustDo(t, 200, dt.Admin(), "POST", path, fmt.Sprintf(`{"after":%q}`, ids[1]))
	for i := 2; i < 5; i++ {
		d := r.next(30 * time.Second)
		checkVerified(t, d)
		if d.ID != ids[i] || d.Events[0].Subject != fmt.Sprintf("Person/r%d", i) {
			t.Fatalf("replayed %s %v, want %s", d.ID, d.Events, ids[i])
		}
	}
	p := position(t, ids[0])
	for body, want := range map[string]int{
		`{"after":"nonsense"}`: 400,
		`{}`:                   400,
		fmt.Sprintf(`{"after":"%s-%d-0"}`, p.Epoch, p.Seq+100): 400,
		fmt.Sprintf(`{"after":"zz-%d-0"}`, p.Seq):              410,
	} {
		if res := a.Do(t, dt.Admin(), "POST", path, body); res.Status != want {
			t.Errorf("replay %s: %d %s, want %d", body, res.Status, res.Body, want)
		}
	}
	// A position inside a commit past its last change names no event: it
	// is refused as streams refuse it, on every path that takes one (it was
	// read as the end of the commit).
	past := fmt.Sprintf(`{"after":"%s-%d-3"}`, p.Epoch, p.Seq)
	want := fmt.Sprintf("after %s-%d-3 names no event of admin/replay: commit %d has 1 changes, at indexes 0 to 0", p.Epoch, p.Seq, p.Seq)
	a.MustDo(t, 200, dt.Admin(), "POST", fmt.Sprintf("/api/webhooks/admin/replay/%d/pause", h.ID), nil)
	for _, c := range []struct{ path, body string }{
		{"/api/webhooks/admin/replay", fmt.Sprintf(`{"url":%q,"after":"%s-%d-3"}`, r.url("/p"), p.Epoch, p.Seq)},
		{path, past},
		{fmt.Sprintf("/api/webhooks/admin/replay/%d/resume", h.ID), past},
	} {
		if res := a.Do(t, dt.Admin(), "POST", c.path, c.body); res.Status != 400 || !strings.Contains(string(res.Body), want) {
			t.Errorf("POST %s %s: %d %s, want 400 naming %q", c.path, c.body, res.Status, res.Body, want)
		}
	}
}

// TestStatusMessageIsOfTheCurrentStatus: status_message says why a
// webhook is in its status: what failed while it retries, and nothing once
// it is active again, whether by a PATCH of its URL or a replay. Both left
// it active with the failed URL's error; a paused webhook keeps saying
// why it is.
func TestStatusMessageIsOfTheCurrentStatus(t *testing.T) {
	t.Parallel()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(bad.Close)
	good := startGoReceiver(t)
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
		c.WebhookRetrySchedule = []time.Duration{time.Hour} // it stays retrying
	})
	d.CreateDatabase(t, "stale", personSchema)
	h := createHook(t, d, nil, "stale", "", fmt.Sprintf(`{"url":%q}`, bad.URL))
	path := fmt.Sprintf("/api/webhooks/admin/stale/%d", h.ID)
	retrying := func(name string) map[string]any {
		t.Helper()
		insert(t, d, "stale", name)
		st := waitStatus(t, d, "stale", h.ID, 30*time.Second, func(m map[string]any) bool { return m["attempt"] == 1.0 })
		if st["status"] != "retrying" || st["status_message"] != "answered 503" {
			t.Fatalf("after a 503: status %v, status_message %q, want retrying and answered 503", st["status"], st["status_message"])
		}
		return st
	}
	answer := func(what string, res dt.Response) {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(res.Body, &m); err != nil {
			t.Fatal(err)
		}
		if m["status"] != "active" || m["attempt"] != 0.0 || m["status_message"] != "" {
			t.Errorf("%s answered status %v, attempt %v, status_message %q; want active, 0 and none", what, m["status"], m["attempt"], m["status_message"])
		}
	}

	retrying("one")
	answer("PATCH of the url", d.MustDo(t, 200, dt.Admin(), "PATCH", path, fmt.Sprintf(`{"url":%q}`, good.srv.URL)))
	good.next(t)
	if st := waitStatus(t, d, "stale", h.ID, 30*time.Second, func(m map[string]any) bool { return m["delivered"] == 1.0 }); st["status_message"] != "" {
		t.Errorf("delivered, with status_message %q", st["status_message"])
	}

	d.MustDo(t, 200, dt.Admin(), "PATCH", path, fmt.Sprintf(`{"url":%q}`, bad.URL))
	retrying("two")
	head := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/stale?type=Person", nil).Header.Get("Sluice-Position")
	answer("replay to the head", d.MustDo(t, 200, dt.Admin(), "POST", path+"/replay", fmt.Sprintf(`{"after":%q}`, head)))
	st := status(t, d, "stale", h.ID)
	if lag := st["lag"].(map[string]any)["commits"]; st["status"] != "active" || lag != 0.0 || st["status_message"] != "" {
		t.Errorf("after the replay: status %v, lag %v, status_message %q; want active, 0 and none", st["status"], lag, st["status_message"])
	}

	// A change of settings leaves a paused webhook paused, saying why.
	d.MustDo(t, 200, dt.Admin(), "POST", path+"/pause", nil)
	res := d.MustDo(t, 200, dt.Admin(), "PATCH", path, `{"description":"paused"}`)
	if !strings.Contains(string(res.Body), `"status_message":"paused by an admin"`) {
		t.Errorf("PATCH of a paused webhook: %s, want it still paused by an admin", res.Body)
	}
}

// TestWebhookPausedWhenCreatorLosesAccess: a webhook delivers with its
// creator's read access; when the role is revoked, the next commit is not
// delivered and the webhook is paused as revoked, saying why; resuming it
// is refused while the access is missing.
func TestWebhookPausedWhenCreatorLosesAccess(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	a := dt.Start(t, fastRetries)
	a.CreateDatabase(t, "guarded", personSchema)
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/guarded", `{"user":"rita","role":"admin"}`)
	rita := dt.Basic("rita", "rita-password")
	res := a.MustDo(t, 201, rita, "POST", "/api/webhooks/admin/guarded", fmt.Sprintf(`{"url":%q}`, r.url("/g")))
	var h hook
	if err := json.Unmarshal(res.Body, &h); err != nil {
		t.Fatal(err)
	}
	r.do(map[string]any{"cmd": "secret", "path": "/g", "secrets": []string{h.Secret}})
	seen := map[string]bool{}
	insert(t, a, "guarded", "one")
	if d := r.nextNew(seen, 30*time.Second); d.Events[0].Subject != "Person/one" {
		t.Fatalf("delivered %v", d.Events)
	}
	// Read is all a webhook needs.
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/guarded", `{"user":"rita","role":"read"}`)
	insert(t, a, "guarded", "two")
	if d := r.nextNew(seen, 30*time.Second); d.Events[0].Subject != "Person/two" {
		t.Fatalf("delivered %v", d.Events)
	}
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/guarded", `{"user":"rita","role":"none"}`)
	insert(t, a, "guarded", "three")
	st := waitStatus(t, a, "guarded", h.ID, 30*time.Second, func(m map[string]any) bool { return m["state"] == "revoked" })
	if msg := st["status_message"].(string); !strings.Contains(msg, "its creator rita lost the read access") || !strings.Contains(msg, "is now none") {
		t.Fatalf("revoked status message %q", msg)
	}
	r.do(map[string]any{"cmd": "sync"}) // every delivery made so far is reported before this
	r.noneNew(seen)                     // nothing of three; one or two again, at least once
	if res := a.Do(t, dt.Admin(), "POST", fmt.Sprintf("/api/webhooks/admin/guarded/%d/resume", h.ID), nil); res.Status != 409 {
		t.Fatalf("resume while the creator has no access: %d %s, want 409", res.Status, res.Body)
	}
}

// TestWebhookAPI checks what the API accepts and refuses: required and
// unknown fields, classes, ops, filters, batching, the cap, admins only,
// and that the secret is shown once.
func TestWebhookAPI(t *testing.T) {
	t.Parallel()
	a := dt.Start(t, func(c *config.Config) { c.MaxWebhooksPerDatabase = 2; c.WebhookAllowNetworks = loopback })
	a.CreateDatabase(t, "api", "type Person { name: String! age: Int owner: Person } type Pet { name: String! }")
	url := "http://127.0.0.1:9/hook"
	for body, want := range map[string]string{
		`{}`:                                                                     "url is required",
		`{"url":"` + url + `","colour":"red"}`:                                   `unknown field "colour"`,
		`{"url":"` + url + `","classes":[]}`:                                     "classes is an empty list",
		`{"url":"` + url + `","classes":["Nope"]}`:                               `classes[0]: "Nope" is not a document class`,
		`{"url":"` + url + `","ops":["insert"]}`:                                 `ops: unknown operation "insert"`,
		`{"url":"` + url + `","ops":[]}`:                                         "ops is an empty list",
		`{"url":"` + url + `","batch":"hour"}`:                                   `batch: "hour" is not a batching mode`,
		`{"url":"` + url + `","filter":{"age":{"gt":3}}}`:                        "filter needs exactly one class",
		`{"url":"` + url + `","classes":["Person"],"filter":{"age":{"gt":"x"}}}`: "filter.age.gt",
		`{"url":"` + url + `","classes":["Person"],"filter":{"owner":{"name":{"eq":"x"}}}}`: "filter.owner: a filter through a reference",
		`{"url":"` + url + `","after":"soon"}`:                                              "after: invalid stream position",
		// Each reason named: a NUL was refused as "want UTF-8 text of
		// at most 1024 bytes", of three bytes of valid UTF-8.
		`{"url":"` + url + `","description":"a\u0000b"}`:                          "description: a NUL character",
		`{"url":"` + url + `","description":"` + strings.Repeat("x", 1025) + `"}`: "description is 1025 bytes: at most 1024",
	} {
		res := a.Do(t, dt.Admin(), "POST", "/api/webhooks/admin/api", body)
		var e struct {
			Message string `json:"api:message"`
		}
		_ = json.Unmarshal(res.Body, &e)
		if res.Status != 400 || !strings.Contains(e.Message, want) {
			t.Errorf("create %s: %d %s, want 400 naming %q", body, res.Status, res.Body, want)
		}
	}
	res := a.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/api",
		`{"url":"`+url+`","classes":["Person"],"ops":["update","create"],"filter":{"age":{"ge":18}},"batch":"commit","description":"adults"}`)
	var created map[string]any
	if err := json.Unmarshal(res.Body, &created); err != nil {
		t.Fatal(err)
	}
	id := int64(created["id"].(float64))
	if !strings.HasPrefix(created["secret"].(string), "whsec_") || created["batch"] != "commit" || fmt.Sprint(created["ops"]) != "[create update]" ||
		created["api:status"] != "api:success" {
		t.Fatalf("created: %s", res.Body)
	}
	one := fmt.Sprintf("/api/webhooks/admin/api/%d", id)
	got := a.MustDo(t, 200, dt.Admin(), "GET", one, nil)
	if bytes.Contains(got.Body, []byte("secret\"")) || bytes.Contains(got.Body, []byte(created["secret"].(string))) {
		t.Fatalf("GET shows the secret: %s", got.Body)
	}
	if !bytes.Contains(got.Body, []byte(`"api:status":"api:success"`)) {
		t.Fatalf("GET without api:status: %s", got.Body)
	}
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/api", `{"url":"`+url+`"}`)
	if res := a.Do(t, dt.Admin(), "POST", "/api/webhooks/admin/api", `{"url":"`+url+`"}`); res.Status != 409 || !bytes.Contains(res.Body, []byte("max_webhooks_per_database")) {
		t.Errorf("past the cap: %d %s", res.Status, res.Body)
	}
	// Changes: a filter needs one class; the change keeps the rest.
	if res := a.Do(t, dt.Admin(), "PATCH", one, `{"classes":["Person","Pet"]}`); res.Status != 400 {
		t.Errorf("two classes with a filter: %d %s", res.Status, res.Body)
	}
	res = a.MustDo(t, 200, dt.Admin(), "PATCH", one, `{"filter":null,"classes":["Person","Pet"],"description":"all"}`)
	var changed map[string]any
	_ = json.Unmarshal(res.Body, &changed)
	if changed["filter"] != nil || changed["description"] != "all" || changed["batch"] != "commit" {
		t.Errorf("changed: %s", res.Body)
	}
	rot := a.MustDo(t, 200, dt.Admin(), "POST", one+"/rotate-secret", `{"grace":"1h"}`)
	if !bytes.Contains(rot.Body, []byte(`"secret":"whsec_`)) {
		t.Errorf("rotate: %s", rot.Body)
	}
	a.MustDo(t, 200, dt.Admin(), "POST", one+"/pause", nil)
	if st := status(t, a, "api", id); st["state"] != "paused" || st["old_secret_until"] == nil {
		t.Errorf("paused: %v", st)
	}
	// A rotation with no grace keeps no old secret, and its answer says
	// so as the webhook's status does (found by review: it answered the
	// time of the rotation).
	rot = a.MustDo(t, 200, dt.Admin(), "POST", one+"/rotate-secret", `{"grace":"0s"}`)
	var rotated map[string]any
	_ = json.Unmarshal(rot.Body, &rotated)
	if until, ok := rotated["old_secret_until"]; !ok || until != nil {
		t.Errorf("rotate with no grace: %s, want old_secret_until null", rot.Body)
	}
	if st := status(t, a, "api", id); st["old_secret_until"] != nil {
		t.Errorf("after a rotation with no grace: old_secret_until %v, want null", st["old_secret_until"])
	}
	// Only admins of the database manage its webhooks.
	a.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"wes","organization":"admin","password":"wes-password"}`)
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/api", `{"user":"wes","role":"write"}`)
	for _, m := range []string{"GET", "DELETE"} {
		if res := a.Do(t, dt.Basic("wes", "wes-password"), m, one, nil); res.Status != 403 {
			t.Errorf("%s by a writer: %d %s, want 403", m, res.Status, res.Body)
		}
	}
	a.MustDo(t, 200, dt.Admin(), "DELETE", one, nil)
	if res := a.Do(t, dt.Admin(), "GET", one, nil); res.Status != 404 {
		t.Errorf("deleted webhook: %d", res.Status)
	}
	if res := a.Do(t, dt.Admin(), "GET", "/api/webhooks/admin/api/x", nil); res.Status != 404 {
		t.Errorf("webhook x: %d", res.Status)
	}
}

// TestConcurrentChangesKeepEachOther: two PATCHes of different fields of
// one webhook at once each leave their field as they set it (found by
// review: each merged its request into a copy read before its write and
// wrote every setting back, so the later write undid the other's field,
// both answered 200). The requests are held up by a lock on the
// webhook's row until both are under way, so they always overlap. Two
// rotations at once each keep the other's secret too: the second keeps
// the first's as the previous one.
func TestConcurrentChangesKeepEachOther(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.WebhookAllowNetworks = loopback })
	d.CreateDatabase(t, "patches", personSchema)
	h := createHook(t, d, nil, "patches", "", `{"url":"http://127.0.0.1:9/old","description":"old"}`)
	one := fmt.Sprintf("/api/webhooks/admin/patches/%d", h.ID)
	ctx := context.Background()
	conn := func() *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, d.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	watcher, locker := conn(), conn()
	type request struct{ path, body string }
	// together sends the POST or PATCH requests at once, each held up by
	// a lock on the webhook's row until all of them wait for it, and
	// fails the test unless each is answered 200.
	together := func(method string, reqs ...request) {
		t.Helper()
		lock, err := locker.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Rollback(context.Background()) //nolint:errcheck // released below
		if _, err := lock.Exec(ctx, "SELECT 1 FROM sluice.webhooks WHERE id = $1 FOR UPDATE", h.ID); err != nil {
			t.Fatal(err)
		}
		errs := make([]error, len(reqs))
		var wg sync.WaitGroup
		for i, r := range reqs {
			wg.Go(func() { errs[i] = do(d, method, one+r.path, r.body) })
		}
		eventually.True(t, 30*time.Second, "the changes wait for the webhook's row", func() bool {
			var n int
			err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
				AND wait_event_type = 'Lock' AND query LIKE '%sluice.webhooks%'`).Scan(&n)
			return err == nil && n == len(reqs)
		})
		if err := lock.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}

	together("PATCH", request{"", `{"url":"http://127.0.0.1:9/new"}`}, request{"", `{"description":"new"}`})
	if st := status(t, d, "patches", h.ID); st["url"] != "http://127.0.0.1:9/new" || st["description"] != "new" {
		t.Errorf("after two PATCHes at once, of the url and of the description: url %v, description %v", st["url"], st["description"])
	}

	secrets := func() (cur, old []byte) {
		t.Helper()
		if err := watcher.QueryRow(ctx, "SELECT secret, old_secret FROM sluice.webhooks WHERE id = $1", h.ID).Scan(&cur, &old); err != nil {
			t.Fatal(err)
		}
		return cur, old
	}
	first, _ := secrets()
	together("POST", request{"/rotate-secret", `{"grace":"1h"}`}, request{"/rotate-secret", `{"grace":"1h"}`})
	if cur, old := secrets(); bytes.Equal(old, first) || bytes.Equal(old, cur) || old == nil {
		t.Errorf("after two rotations at once, the previous secret is the one made with the webhook (%t), or the current one (%t), or none: "+
			"want the first rotation's", bytes.Equal(old, first), bytes.Equal(old, cur))
	}
}

// do sends a request with body to path through d as the admin, and says
// unless it is answered 200; for goroutines (no t.Fatal).
func do(d *dt.Daemon, method, path, body string) error {
	req, err := http.NewRequest(method, d.URL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	dt.Admin()(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return nil
}

// TestWebhookRefusesPrivateAddresses: URLs naming loopback, link-local,
// private and other non-public addresses are refused when the webhook is
// made; a name that resolves to such an address is refused when it is
// dialled (DNS rebinding), and no connection is even attempted: the test's
// dial function fails the test if it is called. Nothing here needs the
// receiver, and no packet leaves the process.
func TestWebhookRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host != "rebind.test" {
			t.Errorf("resolved %q", host)
			return nil, errors.New("test: no resolving")
		}
		return []netip.Addr{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("::1")}, nil
	}
	dial := func(_ context.Context, network, address string) (net.Conn, error) {
		t.Errorf("dialled %s %s: a refused address reached the dialer", network, address)
		return nil, errors.New("test: no dialing")
	}
	a := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, WebhookResolve: resolve, WebhookDial: dial}, func(c *config.Config) {
		c.WebhookRetrySchedule = []time.Duration{time.Hour} // one retry, not soon
	})
	a.CreateDatabase(t, "ssrf", personSchema)
	for _, url := range []string{
		"http://10.0.0.1/hook", "http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:6363/api/db",
		"http://[::1]/", "http://localhost:9/", "http://api.localhost/", "http://0.0.0.0/", "http://[fd00::1]/",
		"http://100.64.0.1/", "http://192.168.1.1/", "http://172.16.0.1/", "http://[::ffff:10.0.0.1]/", "http://[64:ff9b::a00:1]/",
		"http://224.0.0.1/", "http://[fe80::1]/", "http://[64:ff9b::a00:1%25eth0]/hook", "http://[fe80::1%25eth0]/",
		"http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/hook", "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/",
	} {
		res := a.Do(t, dt.Admin(), "POST", "/api/webhooks/admin/ssrf", fmt.Sprintf(`{"url":%q}`, url))
		if res.Status != 400 || !bytes.Contains(res.Body, []byte("url: refused to connect to")) {
			t.Errorf("create with %s: %d %s, want 400 refusing the address", url, res.Status, res.Body)
		}
	}
	for _, url := range []string{"ftp://example.com/", "http://user:pw@example.com/", "/relative", "http://example.com/#x"} {
		if res := a.Do(t, dt.Admin(), "POST", "/api/webhooks/admin/ssrf", fmt.Sprintf(`{"url":%q}`, url)); res.Status != 400 || !bytes.Contains(res.Body, []byte("url")) {
			t.Errorf("create with %s: %d %s, want 400 naming url", url, res.Status, res.Body)
		}
	}
	h := createHook(t, a, nil, "ssrf", "", `{"url":"http://rebind.test/hook"}`)
	insert(t, a, "ssrf", "one")
	st := waitStatus(t, a, "ssrf", h.ID, 30*time.Second, func(m map[string]any) bool { return m["attempt"] == 1.0 })
	// The attempt says the name reaches nothing allowed, not where it
	// resolved (TestWebhookErrorsNameNoResolvedAddress).
	msg := st["status_message"].(string)
	for _, want := range []string{"rebind.test resolves only to addresses webhooks may not connect to", "webhook_allow_networks"} {
		if !strings.Contains(msg, want) {
			t.Errorf("status message %q does not say %q", msg, want)
		}
	}
}

// TestWebhookKill9HandsOver: the delivering replica, a process of its own,
// is killed with SIGKILL in the middle of a burst; the other replica takes
// the lease over once it expires and goes on from the recorded position:
// every commit arrives, in order, and the only duplicate possible is the
// request the killed replica had sent but not recorded.
func TestWebhookKill9HandsOver(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	bin, err := dt.SluiceBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.NewDatabase(t)
	p := dt.StartProc(t, bin, []string{"serve", "--listen", "127.0.0.1:0"}, []string{
		"SLUICE_DATABASE_URL=" + dbURL, "SLUICE_ADMIN_PASSWORD=" + dt.AdminPassword,
		"SLUICE_WEBHOOK_ALLOW_NETWORKS=127.0.0.0/8", "SLUICE_WEBHOOK_LEASE_TTL=2s", "SLUICE_WEBHOOK_TIMEOUT=1s",
		"SLUICE_WEBHOOK_RETRY_SCHEDULE=50ms,100ms,200ms,400ms",
	}, nil)
	first := &dt.Daemon{URL: "http://" + p.Addr}
	leader := func(d *dt.Daemon) bool {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_webhook_leader") == 1
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !leader(first) {
		if time.Now().After(deadline) {
			t.Fatal("the first replica did not take the deliverer lease within 30s")
		}
		<-tick.C
	}
	second := dt.Start(t, dt.WithDatabaseURL(dbURL), fastRetries)
	first.CreateDatabase(t, "burst", personSchema)
	createHook(t, first, r, "burst", "/k", fmt.Sprintf(`{"url":%q}`, r.url("/k")))
	const n = 300
	written := make(chan error, 1)
	go func() {
		for i := range n {
			if err := post(second, "burst", fmt.Sprintf("b%03d", i)); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	var got []delivery
	for len(got) < 50 {
		got = append(got, r.next(30*time.Second))
	}
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	subjects := map[string]bool{}
	for _, d := range got {
		subjects[d.Events[0].Subject] = true
	}
	for len(subjects) < n {
		d := r.next(time.Minute)
		got = append(got, d)
		subjects[d.Events[0].Subject] = true
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if !leader(second) {
		t.Error("the second replica does not report the lease")
	}
	var last sluice.Position
	dups := 0
	for i, d := range got {
		checkVerified(t, d)
		p := position(t, d.ID)
		switch {
		case i == 0:
		case p.Seq == last.Seq:
			dups++
			t.Logf("delivered twice: %s (%s), at %d of %d", d.ID, d.Events[0].Subject, i, len(got))
		case p.Seq != last.Seq+1:
			t.Fatalf("request %d is commit %d after commit %d: out of order or missing", i, p.Seq, last.Seq)
		}
		last = p
	}
	if dups > 1 {
		t.Fatalf("%d duplicates, want at most one (the request in flight when the replica died)", dups)
	}
	t.Logf("%d commits, %d requests, %d duplicate", n, len(got), dups)
}

// TestWebhookFilterAndCommitBatches: a filter selects the events whose
// document matches it; a commit batch carries a commit's selected events
// in one request, in change order, identified by its last one.
func TestWebhookFilterAndCommitBatches(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	a := dt.Start(t, fastRetries)
	a.CreateDatabase(t, "adults", personSchema)
	createHook(t, a, r, "adults", "/f", fmt.Sprintf(`{"url":%q,"classes":["Person"],"filter":{"age":{"ge":18}},"batch":"commit"}`, r.url("/f")))
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/adults",
		`[{"@type":"Person","@id":"ann","name":"Ann","age":40},{"@type":"Person","@id":"kid","name":"Kid","age":9},{"@type":"Person","@id":"bob","name":"Bob","age":18}]`)
	insert(t, a, "adults", "noage")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/adults", `{"@type":"Person","@id":"cy","name":"Cy","age":77}`)
	d := r.next(30 * time.Second)
	checkVerified(t, d)
	if len(d.Events) != 2 || d.Events[0].Subject != "Person/ann" || d.Events[1].Subject != "Person/bob" || d.ID != d.Events[1].ID {
		t.Fatalf("first commit's batch: id %s, events %+v; want ann and bob, identified by bob's", d.ID, d.Events)
	}
	d = r.next(30 * time.Second)
	if len(d.Events) != 1 || d.Events[0].Subject != "Person/cy" {
		t.Fatalf("then %+v, want cy alone (the commit without a matching document sends nothing)", d.Events)
	}
	var doc struct {
		Age int `json:"age"`
	}
	if err := json.Unmarshal(d.Events[0].Data, &doc); err != nil || doc.Age != 77 {
		t.Fatalf("data %s", d.Events[0].Data)
	}
}

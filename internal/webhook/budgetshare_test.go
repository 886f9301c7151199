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

// TestOneUsersWebhooksLeaveRoomForOthers: the webhooks that deliver as
// one user hold at most webhook_body_budget_per_user of
// webhook_body_budget, however many of them wait for slow receivers: the
// admin's three webhooks, whose receiver holds every request, send one
// request of 2.5 MiB at a time (a share of 4 MiB holds one), and carl's
// webhook delivers meanwhile (found by review: the admin's webhooks took
// 7.5 MiB of the 8, and carl's waited until they were answered). Once the
// receiver answers, the admin's other requests go too.
func TestOneUsersWebhooksLeaveRoomForOthers(t *testing.T) {
	t.Parallel()
	const share, size = 4 << 20, 5 << 19 // 2.5 MiB: one fits the share, three the budget
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	got := make(chan string, 100) // a request's path and body
	var mu sync.Mutex
	var held, most int64 // bytes of the admin's requests at the receiver
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		got <- req.URL.Path + " " + string(b)
		if strings.HasPrefix(req.URL.Path, "/admin") {
			mu.Lock()
			held += int64(len(b))
			most = max(most, held)
			mu.Unlock()
			<-release
			mu.Lock()
			held -= int64(len(b))
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(open) // before srv.Close, which waits for the handlers
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
		c.WebhookBodyBudget = 8 << 20
		c.WebhookBodyBudgetPerUser = share
		c.WebhookTimeout = 2 * time.Minute // the admin's requests are held
	})
	d.CreateDatabase(t, "share", personSchema)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"carl","organization":"admin","password":"carl-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/share", `{"user":"carl","role":"admin"}`)
	var before string // the position before the document
	for i := range 3 {
		res := d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/share", fmt.Sprintf(`{"url":"%s/admin/%d"}`, srv.URL, i))
		var h struct {
			Position string `json:"position"`
		}
		if err := json.Unmarshal(res.Body, &h); err != nil {
			t.Fatal(err)
		}
		before = h.Position
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/share",
		fmt.Sprintf(`{"@type":"Person","@id":"big","name":%q}`, strings.Repeat("x", size)))
	// The admin's webhooks settle: each sent its request (held), or waits
	// for room.
	arrived := 0
	eventually.True(t, 60*time.Second, "each of the admin's webhooks sent its request or waits for room", func() bool {
		for {
			select {
			case a := <-got:
				if path, body, _ := strings.Cut(a, " "); !strings.HasPrefix(path, "/admin/") || !strings.Contains(body, `"subject":"Person/big"`) {
					t.Fatalf("request %s %.200s, want an admin's webhook's of Person/big", path, body)
				}
				arrived++
				continue
			default:
			}
			waits := dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_webhook_body_budget_waits_total")
			return arrived+int(waits) >= 3
		}
	})
	// carl's webhook, made to deliver the same document, delivers it
	// while the admin's requests are held.
	d.MustDo(t, 201, dt.Basic("carl", "carl-password"), "POST", "/api/webhooks/admin/share", fmt.Sprintf(`{"url":"%s/carl","after":%q}`, srv.URL, before))
	for carl := false; !carl; {
		select {
		case a := <-got:
			path, body, _ := strings.Cut(a, " ")
			if !strings.Contains(body, `"subject":"Person/big"`) {
				t.Fatalf("request %s %.200s, want Person/big", path, body)
			}
			carl = path == "/carl"
			if !carl {
				arrived++
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("carl's webhook sent nothing within 30s while %d requests of the admin's webhooks were held", arrived)
		}
	}
	mu.Lock()
	admin := most
	mu.Unlock()
	if admin > share {
		t.Errorf("the admin's webhooks had %.1f MiB of requests at the receiver at once, more than their share of %d MiB", float64(admin)/(1<<20), share>>20)
	}
	// Answered, the admin's requests make room for the others.
	open()
	for ; arrived < 3; arrived++ {
		select {
		case a := <-got:
			if path, _, _ := strings.Cut(a, " "); !strings.HasPrefix(path, "/admin/") {
				t.Fatalf("request %s, want the admin's webhooks' last", path)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of the admin's 3 requests arrived within 60s of the answer", arrived)
		}
	}
}

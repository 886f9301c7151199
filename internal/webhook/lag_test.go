package webhook_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestWebhookLagOnOneClock: sluice_webhook_lag_seconds, on a replica whose
// clock is an hour ahead of Postgres', says how old the commit a webhook
// delivers is (well under a minute here), as the webhook's status does:
// it is measured on Postgres' clock from the commit to the read of the
// log that found it, then on the replica's monotonic clock, never the one
// against the other. It read an hour.
func TestWebhookLagOnOneClock(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for the handler
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, Now: ahead}, func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
		c.WebhookTimeout = 2 * time.Minute // the request is held
	})
	d.CreateDatabase(t, "lag", personSchema)
	h := createHook(t, d, nil, "lag", "", fmt.Sprintf(`{"url":%q}`, srv.URL))
	insert(t, d, "lag", "alice")
	// The gauge is set before the request is made: while the receiver
	// holds it, it is the age of the commit being delivered.
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("no webhook request within 60s")
	}
	body := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
	label := fmt.Sprintf(`webhook="%d"`, h.ID)
	if secs := dt.MetricValue(body, "sluice_webhook_lag_seconds", label); secs <= 0 || secs > 60 {
		t.Errorf("sluice_webhook_lag_seconds %v on a replica whose clock is an hour ahead; want the age of the commit being delivered, under a minute", secs)
	}
	lag := status(t, d, "lag", h.ID)["lag"].(map[string]any)
	if secs := lag["seconds"].(float64); lag["commits"] != 1.0 || secs <= 0 || secs > 60 {
		t.Errorf("the status's lag %v on a replica whose clock is an hour ahead; want 1 commit, under a minute", lag)
	}
}

// TestOldSecretSignsForItsGraceOnOneClock: after a rotation with a grace
// of 30 minutes, a replica whose clock is an hour ahead of Postgres' signs
// the next request with both secrets: the old secret's time left is read
// by Postgres' clock and counted on the replica's from the read (found by
// review: the end of the grace, by Postgres' clock, was compared with the
// replica's clock, and the old secret had stopped signing at once).
func TestOldSecretSignsForItsGraceOnOneClock(t *testing.T) {
	t.Parallel()
	r := startSlowReceiver(t, func(int) time.Duration { return 0 })
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, Now: ahead}, func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
	})
	d.CreateDatabase(t, "grace", personSchema)
	starts := func() float64 {
		return dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_webhook_loop_starts_total")
	}
	h := createHook(t, d, nil, "grace", "", fmt.Sprintf(`{"url":%q}`, r.srv.URL))
	eventually.True(t, 30*time.Second, "the webhook's loop starts", func() bool { return starts() >= 1 })
	d.MustDo(t, 200, dt.Admin(), "POST", fmt.Sprintf("/api/webhooks/admin/grace/%d/rotate-secret", h.ID), `{"grace":"30m"}`)
	// The rotation applies from the next request once the loop read it:
	// it starts over to.
	eventually.True(t, 30*time.Second, "the webhook's loop starts over with the rotated secrets", func() bool { return starts() >= 2 })
	insert(t, d, "grace", "alice")
	if a := r.next(t); strings.Count(a.signature, "v1,") != 2 {
		t.Errorf("the request after a rotation with 30m of grace, on a replica an hour ahead: signatures %q, want the new secret's and the old one's", a.signature)
	}
}

// TestRetryWaitOnOneClock: a failed delivery recorded by a replica whose
// clock is an hour ahead of Postgres' is retried, by the replica that
// takes the lease over with a clock on time, after the schedule's wait
// (a second), not an hour later: the time of the next attempt is set and
// read by Postgres' clock, and counted on the replica's monotonic clock
// from the read (found by review: the next attempt's time was the
// recording replica's clock, and the next replica waited for it by its
// own). The attempts' durations, measured on the replica's clock, are
// never below zero (they were an hour below).
func TestRetryWaitOnOneClock(t *testing.T) {
	t.Parallel()
	var accept atomic.Bool
	answered := make(chan int, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		code := http.StatusInternalServerError
		if accept.Load() {
			code = http.StatusNoContent
		}
		w.WriteHeader(code)
		select {
		case answered <- code:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	schedule := func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
		c.WebhookRetrySchedule = slices.Repeat([]time.Duration{time.Second}, 100)
	}
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	a := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, Now: ahead}, schedule)
	a.CreateDatabase(t, "retry", personSchema)
	h := createHook(t, a, nil, "retry", "", fmt.Sprintf(`{"url":%q}`, srv.URL))
	insert(t, a, "retry", "alice")
	waitStatus(t, a, "retry", h.ID, 60*time.Second, func(s map[string]any) bool { return s["attempt"].(float64) >= 1 })
	a.Stop(t)
	accept.Store(true)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL), schedule)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case code := <-answered:
			if code == http.StatusNoContent {
				st := waitStatus(t, b, "retry", h.ID, 30*time.Second, func(s map[string]any) bool { return s["delivered"].(float64) == 1 })
				// The attempts' durations are measured on one clock
				// too: the replica ahead's read an hour below zero.
				for _, at := range st["attempts"].([]any) {
					if ms := at.(map[string]any)["duration_ms"].(float64); ms < 0 {
						t.Errorf("attempt %v lasted %v ms", at, ms)
					}
				}
				return
			}
		case <-deadline:
			t.Fatalf("no retry within 30s of the lease's takeover, with a retry schedule of 1s; status %v", status(t, b, "retry", h.ID))
		}
	}
}

// TestRotateAnswersTheStoredGrace: a rotation's answer says until when
// the old secret signs as the webhook's status does, the time Postgres
// stored (its clock plus the grace), not the API process's clock plus the
// grace (found by review: the two differed by the skew between them).
func TestRotateAnswersTheStoredGrace(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.WebhookAllowNetworks = loopback })
	d.CreateDatabase(t, "rot", personSchema)
	h := createHook(t, d, nil, "rot", "", `{"url":"http://127.0.0.1:9/"}`)
	res := d.MustDo(t, 200, dt.Admin(), "POST", fmt.Sprintf("/api/webhooks/admin/rot/%d/rotate-secret", h.ID), `{"grace":"30m"}`)
	var rotated map[string]any
	if err := json.Unmarshal(res.Body, &rotated); err != nil {
		t.Fatal(err)
	}
	if st := status(t, d, "rot", h.ID); rotated["old_secret_until"] != st["old_secret_until"] {
		t.Errorf("rotate answered old_secret_until %v; the status says %v", rotated["old_secret_until"], st["old_secret_until"])
	}
}

// TestAttemptTimesOnOneClock: a delivery recorded by a replica whose clock
// is an hour ahead of Postgres' shows its attempt's at and the webhook's
// last_success_at by Postgres' clock, as created_at (found by review: both
// were the replica's clock, an hour after the webhook's other times).
func TestAttemptTimesOnOneClock(t *testing.T) {
	t.Parallel()
	r := startSlowReceiver(t, func(int) time.Duration { return 0 })
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, Now: ahead}, func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
	})
	d.CreateDatabase(t, "times", personSchema)
	h := createHook(t, d, nil, "times", "", fmt.Sprintf(`{"url":%q}`, r.srv.URL))
	insert(t, d, "times", "alice")
	st := waitStatus(t, d, "times", h.ID, 60*time.Second, func(s map[string]any) bool { return s["delivered"].(float64) == 1 })
	parse := func(name string, v any) time.Time {
		s, _ := v.(string)
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("%s %v: %v", name, v, err)
		}
		return at
	}
	created := parse("created_at", st["created_at"])
	near := func(name string, v any) {
		if at := parse(name, v); at.Sub(created).Abs() > time.Minute {
			t.Errorf("%s %v on a replica an hour ahead, created_at %v; want Postgres' time, within a minute of it", name, at, created)
		}
	}
	near("last_success_at", st["last_success_at"])
	attempts := st["attempts"].([]any)
	if len(attempts) != 1 {
		t.Fatalf("attempts %v, want the one delivery", attempts)
	}
	near("the attempt's at", attempts[0].(map[string]any)["at"])
}

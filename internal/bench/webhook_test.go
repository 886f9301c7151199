package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// webhookReceiver is a fast local receiver: it answers 204 at once and
// records, per event, when it arrived and the commit time its envelope
// carries.
type webhookReceiver struct {
	mu       sync.Mutex
	latency  []time.Duration
	arrivals chan struct{}
}

func (r *webhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(req.Body)
	var ev struct {
		Time time.Time `json:"time"`
	}
	if err := json.Unmarshal(body, &ev); err == nil {
		r.mu.Lock()
		r.latency = append(r.latency, now.Sub(ev.Time))
		r.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
	r.arrivals <- struct{}{}
}

// BenchmarkWebhooks measures one webhook (a request per event) delivering
// to a fast receiver on loopback: the rate at which it drains a backlog of
// 2,000 single-document commits (requests answered 2xx per second, each
// one only after the previous one's 2xx and recording it), and the time
// from commit to arrival of 500 commits made one at a time while it is
// caught up (p50 and p99, in ms; the commit time is Postgres's).
func BenchmarkWebhooks(b *testing.B) {
	recv := &webhookReceiver{arrivals: make(chan struct{}, 100000)}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	d := dt.Start(b, dt.WithDatabaseURL(newDatabase(b)), func(c *config.Config) {
		c.WebhookAllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	d.CreateDatabase(b, "bench", personSDL)
	post := poster(b, d, "Bearer "+adminToken(b, d))
	var h struct{ ID int64 }
	res := d.MustDo(b, 201, dt.Admin(), "POST", "/api/webhooks/admin/bench", fmt.Sprintf(`{"url":%q}`, srv.URL+"/hook"))
	if err := json.Unmarshal(res.Body, &h); err != nil {
		b.Fatal(err)
	}
	hook := fmt.Sprintf("/api/webhooks/admin/bench/%d", h.ID)
	wait := func(n int) {
		for range n {
			select {
			case <-recv.arrivals:
			case <-time.After(time.Minute):
				b.Fatal("no delivery within a minute")
			}
		}
	}
	i := 0
	for b.Loop() {
		const backlog = 2000
		d.MustDo(b, 200, dt.Admin(), "POST", hook+"/pause", nil)
		for range backlog {
			post(personJSON(i))
			i++
		}
		start := time.Now()
		d.MustDo(b, 200, dt.Admin(), "POST", hook+"/resume", nil)
		wait(backlog)
		b.ReportMetric(backlog/time.Since(start).Seconds(), "deliveries/s")

		recv.mu.Lock()
		recv.latency = recv.latency[:0]
		recv.mu.Unlock()
		const single = 500
		for range single {
			post(personJSON(i))
			i++
			wait(1)
		}
		recv.mu.Lock()
		lat := slices.Clone(recv.latency)
		recv.mu.Unlock()
		slices.Sort(lat)
		ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(ms(0.5), "p50-ms")
		b.ReportMetric(ms(0.99), "p99-ms")
	}
}

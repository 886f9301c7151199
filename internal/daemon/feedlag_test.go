package daemon_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestChangefeedLagOnOneClock: sluice_changefeed_lag_seconds, on a
// replica whose clock is an hour ahead of Postgres', still says how far
// behind the log the change feed is (well under a minute here): it is
// measured on Postgres' clock (the commit's time against the time of the
// read that found it) and on the replica's monotonic clock (from that
// read to the hand-over), never the one against the other. It read an
// hour.
func TestChangefeedLagOnOneClock(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-metrics"
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, Now: ahead},
		func(c *config.Config) { c.MetricsToken = token })
	d.CreateDatabase(t, "lag", "type Note { text: String! }")
	// With a live subscriber the change feed reads the commits (without
	// one it skips them, and measures nothing).
	s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/lag/Note"})
	s.Next() // connected
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/lag", `{"@type":"Note","text":"x"}`)
	if f := s.Event(); !strings.Contains(f.String(), "Note/") {
		t.Fatalf("event: %q", f)
	}
	// The feed sets the gauge after it hands the commit on, so the
	// event may come first.
	var lag float64
	eventually.True(t, 10*time.Second, "sluice_changefeed_lag_seconds set", func() bool {
		body := string(d.MustDo(t, 200, dt.Bearer(token), "GET", "/metrics", nil).Body)
		lag = dt.MetricValue(body, "sluice_changefeed_lag_seconds")
		return lag != 0
	})
	if lag < 0 || lag > 60 {
		t.Errorf("sluice_changefeed_lag_seconds %v on a replica whose clock is an hour ahead; want the feed's lag, under a minute", lag)
	}
}

// TestDeliveryLatencyOnOneClock: sluice_stream_delivery_latency_seconds,
// on a replica whose clock is an hour ahead of Postgres', says how long
// an event took from its commit to its stream (well under a minute
// here), for a live stream (the change feed's read) and a resumed one
// (its catch-up's read): it is measured on Postgres' clock from the
// commit to the read of the log that found it, then on the replica's
// monotonic clock. It was the replica's clock against the commit's
// time, Postgres': an hour.
func TestDeliveryLatencyOnOneClock(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-metrics"
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, Now: ahead},
		func(c *config.Config) { c.MetricsToken = token })
	d.CreateDatabase(t, "latency", "type Note { text: String! } type Other { text: String! }")
	const name = "sluice_stream_delivery_latency_seconds"
	// The stream observes the latency after it flushed the event, so
	// the event may come first.
	observed := func(n float64) (sum float64) {
		t.Helper()
		eventually.True(t, 10*time.Second, name+" observed", func() bool {
			body := string(d.MustDo(t, 200, dt.Bearer(token), "GET", "/metrics", nil).Body)
			sum = dt.MetricValue(body, name+"_sum")
			return dt.MetricValue(body, name+"_count") >= n
		})
		return sum
	}

	live := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/latency/Note"})
	live.Next() // connected
	pos := d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/latency", `{"@type":"Note","text":"live"}`).Header.Get("Sluice-Position")
	if f := live.Event(); !strings.Contains(f.String(), "live") {
		t.Fatalf("event: %q", f)
	}
	if sum := observed(1); sum < 0 || sum > 60 {
		t.Errorf("%s of a live stream on a replica whose clock is an hour ahead: %v, want under a minute", name, sum)
	}
	live.Close()

	// A stream of another type keeps the change feed reading the log:
	// once it has the commit after, the resumed stream's commit is
	// behind the feed, and read by its catch-up.
	other := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/latency/Other"})
	other.Next() // connected
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/latency", `{"@type":"Note","text":"caught up"}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/latency", `{"@type":"Other","text":"after"}`)
	if f := other.Event(); !strings.Contains(f.String(), "after") {
		t.Fatalf("event: %q", f)
	}
	observed(2)
	resumed := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/latency/Note", Header: []string{"Last-Event-ID", pos}})
	resumed.Next() // connected
	if f := resumed.Event(); !strings.Contains(f.String(), "caught up") {
		t.Fatalf("event: %q", f)
	}
	if sum := observed(3); sum < 0 || sum > 180 {
		t.Errorf("%s of two live streams and a resumed one on a replica whose clock is an hour ahead: %v in all, want under a minute each", name, sum)
	}
}

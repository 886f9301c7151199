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

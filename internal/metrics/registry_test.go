package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// series returns the labelled sluice_ series g gathers, as
// name{label=value,…}, sorted.
func series(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "sluice_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 0 {
				continue
			}
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out = append(out, mf.GetName()+"{"+strings.Join(ls, ",")+"}")
		}
	}
	slices.Sort(out)
	return out
}

// TestForgetDatabase: forgetting a database deletes its series from every
// vector of the daemon's registry, the commit counters' and the
// webhooks' included, and from a Stream's own on another registry; the
// series of other databases and those without a database label stay.
// The subscribers' series goes with its last subscription instead.
func TestForgetDatabase(t *testing.T) {
	t.Parallel()
	m := New()
	s := NewStream(m.Registry)
	w := NewWebhook(m.Registry)
	for _, db := range []string{"1", "2"} {
		m.Commits.WithLabelValues(db).Inc()
		m.Changes.WithLabelValues(db).Add(3)
		s.Published.WithLabelValues(db).Inc()
		s.Delivered.WithLabelValues("rest", db).Inc()
		s.LiveReads.WithLabelValues(db).Inc()
		w.Delivered.WithLabelValues("7"+db, db).Inc()
		w.LagCommits.WithLabelValues("7"+db, db).Set(2)
		s.Subscribers.WithLabelValues("rest", db).Inc()
	}
	m.HTTPRequests.WithLabelValues("GET", "/api/db", "200").Inc()

	if n := s.ForgetDatabase(1); n != 7 {
		t.Errorf("ForgetDatabase deleted %d series, want 7", n)
	}
	want := []string{
		"sluice_changes_total{database=2}",
		"sluice_commits_total{database=2}",
		"sluice_http_requests_total{code=200,method=GET,route=/api/db}",
		"sluice_live_query_reads_total{database=2}",
		"sluice_stream_events_delivered_total{database=2,transport=rest}",
		"sluice_stream_events_published_total{database=2}",
		"sluice_stream_subscribers{database=1,transport=rest}",
		"sluice_stream_subscribers{database=2,transport=rest}",
		"sluice_webhook_deliveries_total{database=2,webhook=72}",
		"sluice_webhook_lag_commits{database=2,webhook=72}",
	}
	if got := series(t, m.Registry); !slices.Equal(got, want) {
		t.Errorf("after forgetting database 1:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	s.Subscribers.WithLabelValues("rest", "1").Dec()
	if got := series(t, m.Registry); slices.Contains(got, "sluice_stream_subscribers{database=1,transport=rest}") {
		t.Errorf("the subscribers' series stays at 0: %v", got)
	}
	w.ForgetWebhook("72", "2")
	if got := series(t, m.Registry); slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "webhook=72") }) {
		t.Errorf("after ForgetWebhook: %v", got)
	}

	// A Stream on a registry of another kind forgets its own series.
	reg := prometheus.NewRegistry()
	own := NewStream(reg)
	own.Replays.WithLabelValues("1").Inc()
	own.Replays.WithLabelValues("2").Inc()
	own.ForgetDatabase(1)
	if got, want := series(t, reg), []string{"sluice_stream_replays_total{database=2}"}; !slices.Equal(got, want) {
		t.Errorf("a Stream on a prometheus.Registry, after forgetting database 1: %v, want %v", got, want)
	}
}

package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestDeletedDatabasesLeaveNoSeries: the metric series of a database
// (commits, changes, the streams' and live queries', its webhooks') go
// when it is deleted, and a webhook's when it is deleted, so that
// creating and deleting databases or webhooks, which users other than the
// super user may do, adds no series for good. The series of the
// databases and webhooks that stay are kept.
func TestDeletedDatabasesLeaveNoSeries(t *testing.T) {
	t.Parallel()
	delivered := make(chan struct{}, 100)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
		delivered <- struct{}{}
	}))
	t.Cleanup(rcv.Close)
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookAllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	// series returns the names of the sluice_ series whose labels hold
	// label, sorted, without duplicates.
	series := func(label string) []string {
		var names []string
		for l := range strings.SplitSeq(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "\n") {
			if name, labels, ok := strings.Cut(l, "{"); ok && strings.HasPrefix(name, "sluice_") && strings.Contains(labels, label) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return slices.Compact(names)
	}
	// Every kind of series by database that these requests make.
	want := []string{
		"sluice_changes_total", "sluice_commits_total",
		"sluice_live_query_reads_total", "sluice_live_query_results_total", "sluice_live_query_statements_total",
		"sluice_stream_events_delivered_total", "sluice_stream_events_published_total", "sluice_stream_subscribers",
		"sluice_webhook_deliveries_total", "sluice_webhook_events_total", "sluice_webhook_lag_commits", "sluice_webhook_lag_seconds",
	}
	type used struct {
		label, hook string // database="…", webhook="…"
		streams     []*dt.Stream
	}
	// use makes database name, follows it with a REST stream, a GraphQL
	// subscription and a live query, gives it a webhook, writes to it, and
	// waits until each has seen the write and every series is there.
	use := func(name string) used {
		t.Helper()
		d.CreateDatabase(t, name, "type Note { text: String }")
		var db struct {
			Schema string `json:"postgres_schema"`
		}
		if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/db/admin/"+name, nil).Body, &db); err != nil {
			t.Fatal(err)
		}
		u := used{label: fmt.Sprintf("database=%q", strings.TrimPrefix(db.Schema, "sluice_db_"))}
		gql := func(query string) dt.StreamRequest {
			b, _ := json.Marshal(map[string]string{"query": query})
			return dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/" + name, Body: string(b), Header: []string{"Accept", "text/event-stream"}}
		}
		for _, req := range []dt.StreamRequest{{Path: "/api/subscribe/admin/" + name + "/Note"}, gql("subscription { Note_added { text } }"), gql("query @live { Note { text } }")} {
			s := d.MustOpenStream(t, dt.Admin(), req)
			s.Next() // connected, or the live query's first result
			u.streams = append(u.streams, s)
		}
		var hook struct{ ID int64 }
		if err := json.Unmarshal(d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/"+name, fmt.Sprintf(`{"url":%q}`, rcv.URL)).Body, &hook); err != nil {
			t.Fatal(err)
		}
		u.hook = fmt.Sprintf("webhook=\"%d\"", hook.ID)
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/"+name, `{"@type":"Note","@id":"a","text":"a"}`)
		for _, s := range u.streams {
			s.Event()
		}
		select {
		case <-delivered:
		case <-time.After(dt.StreamWait):
			t.Fatalf("%s: no webhook request", name)
		}
		eventually.Nil(t, dt.StreamWait, name+"'s series", func() error {
			if got := series(u.label); !slices.Equal(got, want) {
				return fmt.Errorf("%v, want %v", got, want)
			}
			return nil
		})
		return u
	}

	kept := use("kept")
	for i := range 3 {
		name := fmt.Sprintf("gone%d", i)
		u := use(name)
		d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/db/admin/"+name, nil)
		for _, s := range u.streams {
			s.Ended()
		}
		eventually.Nil(t, dt.StreamWait, "no series of the deleted "+name, func() error {
			if got := series(u.label); len(got) > 0 {
				return fmt.Errorf("%v left", got)
			}
			return nil
		})
	}
	if got := series(kept.label); !slices.Equal(got, want) {
		t.Errorf("the series of the database kept: %v, want %v", got, want)
	}

	// A webhook deleted from a database that stays.
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/webhooks/admin/kept/"+strings.Trim(strings.TrimPrefix(kept.hook, "webhook="), `"`), nil)
	eventually.Nil(t, dt.StreamWait, "no series of the deleted webhook", func() error {
		if got := series(kept.hook); len(got) > 0 {
			return fmt.Errorf("%v left", got)
		}
		return nil
	})
	if got := series(kept.label); !slices.Contains(got, "sluice_commits_total") || slices.Contains(got, "sluice_webhook_deliveries_total") {
		t.Errorf("the series of the database kept, its webhook deleted: %v", got)
	}
}

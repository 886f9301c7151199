package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// cyclicFilter returns a filter of P, as a GraphQL variable's JSON: levels
// nested q (someHave or allHave) through friends, then inner.
func cyclicFilter(q string, levels int, inner string) string {
	return strings.Repeat(`{"friends":{"`+q+`":`, levels) + inner + strings.Repeat(`}}`, levels)
}

// cyclicDatabase creates admin/<name> with 4 documents P/0..P/3, each
// listing all 4 as friends, written in its commit "1"; open, when set, is
// called before the write.
func cyclicDatabase(t *testing.T, d *dt.Daemon, name string, open func()) {
	t.Helper()
	d.CreateDatabase(t, name, `type P { name: String friends: [P] }`)
	if open != nil {
		open()
	}
	var body strings.Builder
	for _, id := range []string{"0", "1", "2", "3"} {
		body.WriteString(`{"@type":"P","@id":"P/` + id + `","name":"p","friends":["P/0","P/1","P/2","P/3"]}` + "\n")
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/"+name, body.String(), "Content-Type", "application/x-ndjson")
}

// TestChangeSetFilterThroughCyclicReferences: a _ChangeSet(commit:) filter
// of 15 nested someHave (or allHave) levels through 4 documents that list
// each other. Its evaluation in Go explored every path, 4^15 per changed
// document: about 7 minutes of CPU per request, which went on after the
// client left. It now answers at once; the request's deadline is far
// above what it takes.
func TestChangeSetFilterThroughCyclicReferences(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	cyclicDatabase(t, d, "cyc", nil)
	client := &http.Client{Timeout: 30 * time.Second}
	for _, c := range []struct{ filter, want string }{
		{cyclicFilter("someHave", 15, `{"name":{"eq":"nomatch"}}`), `{"data":{"_ChangeSet":{"P_added":[]}}`},
		{cyclicFilter("allHave", 15, `{"name":{"eq":"p"}}`), `{"data":{"_ChangeSet":{"P_added":[{"_id":"P/0"},{"_id":"P/1"},{"_id":"P/2"},{"_id":"P/3"}]}}`},
	} {
		q, _ := json.Marshal(map[string]any{
			"query":     `query($f: P_Filter) { _ChangeSet(commit: "1") { P_added(filter: $f) { _id } } }`,
			"variables": map[string]any{"f": json.RawMessage(c.filter)},
		})
		req, err := http.NewRequestWithContext(context.Background(), "POST", d.URL+"/api/graphql/admin/cyc", strings.NewReader(string(q)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		dt.Admin()(req)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("_ChangeSet with %s: %v", c.filter, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(string(b), c.want) {
			t.Fatalf("_ChangeSet with %s: %d %s (%v), want %s", c.filter, resp.StatusCode, b, err, c.want)
		}
		t.Logf("%.40s…: %v", c.filter, time.Since(start))
	}
}

// TestSubscriptionFilterThroughCyclicReferences: the filter of
// TestChangeSetFilterThroughCyclicReferences on a subscription, which
// evaluated it on the stream's drain goroutine for each document added:
// the 4 events now arrive at once (Event waits dt.StreamWait).
func TestSubscriptionFilterThroughCyclicReferences(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	var st *dt.Stream
	cyclicDatabase(t, d, "cycsub", func() {
		body, _ := json.Marshal(map[string]any{
			"query":     `subscription($f: P_Filter) { P_added(filter: $f) { _id } }`,
			"variables": map[string]any{"f": json.RawMessage(cyclicFilter("allHave", 15, `{"name":{"eq":"p"}}`))},
		})
		st = d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/cycsub", Body: string(body),
			Header: []string{"Accept", "text/event-stream"}})
		if f := st.Next().String(); !strings.HasPrefix(f, ": connected") {
			t.Fatalf("first frame %q", f)
		}
	})
	for _, id := range []string{"P/0", "P/1", "P/2", "P/3"} {
		if f := st.Event(); !strings.Contains(f.String(), `"_id":"`+id+`"`) {
			t.Fatalf("event %q, want one for %s", f, id)
		}
	}
}

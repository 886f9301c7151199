package webhook_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestCommitBatchesHoldAtMostAMiB: a commit batch of events larger than 1
// MiB in all is sent in several requests, each body at most 1 MiB (as a
// receiver behind a proxy with a 1 MiB body limit, nginx's default,
// relies on), the events in order, none missing. Found by an acceptance
// review: the batch was sent once it had reached 1 MiB, so the event
// that crossed the bound went with it: four documents of 300,000 bytes
// in one commit made one request of 1.2 MB.
func TestCommitBatchesHoldAtMostAMiB(t *testing.T) {
	t.Parallel()
	type request struct {
		size int
		ids  []string
	}
	got := make(chan request, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var evs []struct {
			Subject string `json:"subject"`
		}
		if err := json.Unmarshal(b, &evs); err != nil {
			t.Errorf("a commit batch of %d bytes is not a JSON array: %v", len(b), err)
		}
		r := request{size: len(b)}
		for _, e := range evs {
			r.ids = append(r.ids, e.Subject)
		}
		got <- r
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	d := dt.Start(t, func(c *config.Config) { c.WebhookAllowNetworks = loopback })
	d.CreateDatabase(t, "batches", personSchema)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/batches", fmt.Sprintf(`{"url":"%s/b","batch":"commit"}`, srv.URL))
	var docs, want []string
	for i := range 4 {
		docs = append(docs, fmt.Sprintf(`{"@type":"Person","@id":"p%d","name":%q}`, i, strings.Repeat("x", 300_000)))
		want = append(want, fmt.Sprintf("Person/p%d", i))
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/batches", "["+strings.Join(docs, ",")+"]")
	var ids []string
	for len(ids) < len(want) {
		select {
		case r := <-got:
			if r.size > 1<<20 {
				t.Errorf("a commit batch of %d bytes (%d events), more than 1 MiB", r.size, len(r.ids))
			}
			ids = append(ids, r.ids...)
		case <-time.After(30 * time.Second):
			t.Fatalf("after 30 s the receiver got %v, want %v", ids, want)
		}
	}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Fatalf("the batches carried %v, want %v in order", ids, want)
	}
}

package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgembed"
)

// TestPostgresOutage stops the Postgres server under a daemon with writes
// and streams running: every request answers 503 api:Unavailable with
// Retry-After, open streams end with an error telling the client to
// reconnect, /readyz answers 503; once Postgres is back the daemon serves
// again and a stream resumed from its last event id misses nothing.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	// A cluster of this test's own, since it is stopped; short path for
	// the socket.
	dir, err := os.MkdirTemp("", "sluice-outage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := pgembed.Options{DataDir: filepath.Join(dir, "pg")}
	ctx := context.Background()
	pg, err := pgembed.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop(context.Background()) }) //nolint:errcheck // replaced below
	d := dt.Start(t, dt.WithDatabaseURL(pg.URL("postgres")))
	d.CreateDatabase(t, "o", "type Note { text: String! }")

	gql := dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/o", Body: `{"query":"subscription { Note_added { _id } }"}`, Header: []string{"Accept", "text/event-stream"}}
	rest := dt.StreamRequest{Path: "/api/subscribe/admin/o/Note"}
	streams := []kindStream{{"graphql-sse", d.MustOpenStream(t, dt.Admin(), gql), "sse"}, {"rest", d.MustOpenStream(t, dt.Admin(), rest), "rest"}}
	for _, k := range streams {
		k.s.Next()
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/o", `{"@type":"Note","@id":"a","text":"before"}`)
	var last []string // each stream's last event id
	for _, k := range streams {
		f := k.s.Event()
		if !strings.Contains(f.String(), "Note/a") {
			t.Fatalf("%s: %q", k.name, f)
		}
		last = append(last, f.Field("id"))
	}

	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	expectEnd(t, streams, "", "UNAVAILABLE", "Unavailable", time.Now())
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/api/document/admin/o", `{"@type":"Note","@id":"lost","text":"during"}`},
		{"GET", "/api/document/admin/o?type=Note", ""},
		{"GET", "/api/subscribe/admin/o/Note", ""},
	} {
		var body any
		if req.body != "" {
			body = req.body
		}
		r := d.Do(t, dt.Admin(), req.method, req.path, body)
		var e struct {
			Error map[string]string `json:"api:error"`
		}
		_ = json.Unmarshal(r.Body, &e)
		if r.Status != 503 || e.Error["@type"] != "api:Unavailable" || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s during the outage: %d %v %s", req.method, req.path, r.Status, r.Header, r.Body)
		}
	}
	waitReady(t, d, 503)

	if pg, err = pgembed.Start(ctx, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop(context.Background()) }) //nolint:errcheck
	waitReady(t, d, 200)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/o", `{"@type":"Note","@id":"b","text":"after"}`)
	for i, req := range []dt.StreamRequest{gql, rest} {
		req.Header = append(req.Header, "Last-Event-ID", last[i])
		s := d.MustOpenStream(t, dt.Admin(), req)
		s.Next()
		if f := s.Event(); !strings.Contains(f.String(), "Note/b") {
			t.Errorf("%s resumed after the outage: %q, want Note/b", streams[i].name, f)
		}
	}
}

// waitReady waits until /readyz answers status.
func waitReady(t *testing.T, d *dt.Daemon, status int) {
	t.Helper()
	eventually.True(t, 60*time.Second, fmt.Sprintf("/readyz answering %d", status), func() bool {
		r := d.Do(t, dt.NoAuth(), "GET", "/readyz", nil)
		if r.Status == 503 && status == 503 && r.Header.Get("Retry-After") == "" {
			t.Errorf("/readyz 503 without Retry-After")
		}
		return r.Status == status
	})
}

package daemon_test

import (
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestStreamCaps: past max_streams_per_user a user's new stream is
// answered 429, past max_streams any new stream 503, both with
// Retry-After and a message naming the key; a closed stream frees its
// place. The super user is exempt from the per-user cap.
func TestStreamCaps(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.MaxStreams, c.MaxStreamsPerUser = 3, 2 })
	d.CreateDatabase(t, "caps", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"ulla","organization":"admin","password":"ulla-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/caps", `{"user":"ulla","role":"read"}`)
	ulla := dt.Basic("ulla", "ulla-password")
	rest := dt.StreamRequest{Path: "/api/subscribe/admin/caps/Note"}
	gql := dt.StreamRequest{Path: "/api/graphql/admin/caps?query=" + url.QueryEscape("subscription { Note_added { text } }"), Header: []string{"Accept", "text/event-stream"}}

	first := d.MustOpenStream(t, ulla, rest)
	first.Next()
	d.MustOpenStream(t, ulla, gql).Next()
	for _, req := range []dt.StreamRequest{rest, gql} {
		s, resp := d.OpenStream(t, ulla, req)
		if s != nil {
			t.Fatalf("%s: a third stream of ulla was accepted", req.Path)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "max_streams_per_user") {
			t.Errorf("%s past the per-user cap: %d %v %s", req.Path, resp.StatusCode, resp.Header, b)
		}
	}
	d.MustOpenStream(t, dt.Admin(), rest).Next() // the super user is exempt, but counts
	s, resp := d.OpenStream(t, dt.Admin(), gql)
	if s != nil {
		t.Fatal("a fourth stream was accepted past max_streams")
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "max_streams") {
		t.Errorf("past the process cap: %d %v %s", resp.StatusCode, resp.Header, b)
	}

	// Closing a stream frees its place (once the server noticed).
	first.Close()
	eventually.True(t, 30*time.Second, "the closed stream's place freed", func() bool {
		s, resp := d.OpenStream(t, ulla, rest)
		if s == nil {
			resp.Body.Close()
		}
		return s != nil
	})
}

// TestStreamParameterBounds: every transport refuses the same heartbeat
// values with a 400.
func TestStreamParameterBounds(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "hb", "type Note { text: String }")
	sub := url.QueryEscape("subscription { Note_added { text } }")
	for _, hb := range []string{"1ns", "999ms", "0", "1000h", "3601", "soon"} {
		for _, c := range []struct {
			path   string
			accept string
		}{
			{"/api/subscribe/admin/hb/Note?heartbeat=" + hb, ""},
			{"/api/graphql/admin/hb?heartbeat=" + hb + "&query=" + sub, "text/event-stream"},
			{"/api/graphql/admin/hb?heartbeat=" + hb + "&query=" + sub, "application/x-ndjson"},
		} {
			if r := d.Do(t, dt.Admin(), "GET", c.path, nil, "Accept", c.accept); r.Status != 400 || !strings.Contains(string(r.Body), "heartbeat") {
				t.Errorf("GET %s (%s): %d %s, want 400 naming heartbeat", c.path, c.accept, r.Status, r.Body)
			}
		}
	}
}

package gqltransport_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestAcceptMediaRanges: a subscription whose Accept reaches an event
// stream through a media range or q-values (RFC 9110) gets that stream,
// as one naming its type does; a type refused with q=0 is not acceptable
// however a range takes it.
func TestAcceptMediaRanges(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	const path = "/api/graphql/admin/zoo"
	q := `subscription { Person_added { _id name } }`
	var streams []*stream
	for _, tc := range []struct {
		method, accept, ctype string
	}{
		{http.MethodPost, "text/*", "text/event-stream; charset=utf-8"},
		{http.MethodGet, "text/*", "text/event-stream; charset=utf-8"},
		{http.MethodPost, "text/*;q=0.5, application/json;q=0.1", "text/event-stream; charset=utf-8"},
		{http.MethodPost, "*/*;q=0.1, application/x-ndjson", "application/x-ndjson; charset=utf-8"},
	} {
		target, reqBody := path, body(q)
		if tc.method == http.MethodGet {
			target, reqBody = path+"?query="+url.QueryEscape(q), ""
		}
		s := mustOpen(t, d, dt.Admin(), tc.method, target, reqBody, nil, "Accept", tc.accept)
		if got := s.Header().Get("Content-Type"); got != tc.ctype {
			t.Fatalf("%s Accept: %s: Content-Type %q, want %q", tc.method, tc.accept, got, tc.ctype)
		}
		s.connected()
		streams = append(streams, s)
	}
	insert(t, d, "zoo", `{"@type":"Person","@id":"Person/alice","name":"Alice"}`)
	const data = `{"data":{"Person_added":{"_id":"Person/alice","name":"Alice"}}}`
	for _, s := range streams {
		if s.NDJSON() {
			f := s.Next()
			for f.String() == "null" { // a keep-alive
				f = s.Next()
			}
			if withoutEventPosition(t, f.String()) != data {
				t.Fatalf("NDJSON event %q", f)
			}
			continue
		}
		if _, got := s.nexts(1); got[0] != data {
			t.Fatalf("SSE event data %s, want %s", got[0], data)
		}
	}

	// text/event-stream;q=0 refuses the stream that text/* would take, and
	// the header accepts no JSON: 406, as for any Accept naming nothing
	// Sluice serves.
	r := d.Do(t, dt.Admin(), http.MethodPost, path, body(q), "Content-Type", "application/json", "Accept", "text/*, text/event-stream;q=0")
	if r.Status != http.StatusNotAcceptable || !strings.Contains(string(r.Body), `"errors"`) {
		t.Fatalf("text/event-stream refused: %d %s", r.Status, r.Body)
	}
}

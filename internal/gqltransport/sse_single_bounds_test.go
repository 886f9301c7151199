package gqltransport_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// singleAnswer is the answer to a single connection mode POST sent by
// postSingle.
type singleAnswer struct {
	status int
	body   string
	err    error
}

// postSingle POSTs query as operation id on reservation tok and returns
// its answer; it gives up at the context's deadline. It is safe to call
// from any goroutine (it does not fail the test).
func postSingle(ctx context.Context, d *dt.Daemon, db, tok, id, query string) singleAnswer {
	req, err := http.NewRequestWithContext(ctx, "POST", d.URL+"/api/graphql/admin/"+db,
		strings.NewReader(body(query, "extensions", map[string]any{"operationId": id})))
	if err != nil {
		return singleAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GraphQL-Event-Stream-Token", tok)
	dt.Admin()(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return singleAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return singleAnswer{status: resp.StatusCode, body: string(b), err: err}
}

// TestSingleLargeResultBeforeStream: a query POSTed before the
// reservation's stream opens, whose result is larger than what a stream
// queues (64 KiB), is answered 202 at once, and the stream opened after
// the answer delivers its whole result. Found by review: the POST waited
// for a stream to take the result before it answered, so a client that
// waits for its POSTs before it opens the stream never got an answer, and
// the reservation expired a minute later.
func TestSingleLargeResultBeforeStream(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	db := "singlelarge"
	d.CreateDatabase(t, db, "type Dog { name: String! }")
	name := strings.Repeat("n", 70<<10)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/"+db, `{"@type":"Dog","@id":"Dog/big","name":"`+name+`"}`)
	tok := reserve(t, d, dt.Admin(), db)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	a := postSingle(ctx, d, db, tok, "big", "{ Dog { name } }")
	if a.err != nil || a.status != 202 {
		t.Fatalf("POST before the stream: %d %q %v, want 202 at once", a.status, a.body, a.err)
	}
	// The POST is over: the connection it came on (the client's idle
	// one) serves the next request.
	req, _ := http.NewRequestWithContext(ctx, "GET", d.URL+"/api/ok", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a request after the POST: %v", err)
	}
	resp.Body.Close()
	st := mustOpen(t, d, dt.Admin(), "GET", "/api/graphql/admin/"+db+"?token="+tok, "", nil, "Accept", sse)
	st.connected()
	// A query sent now waits for the stream to take the first result
	// (it runs once at most 64 KiB are queued), then runs.
	if a := postSingle(ctx, d, db, tok, "small", "{ __typename }"); a.err != nil || a.status != 202 {
		t.Fatalf("second POST: %d %q %v, want 202", a.status, a.body, a.err)
	}
	for _, want := range []string{
		"event: next\ndata: {\"id\":\"big\",\"payload\":{\"data\":{\"Dog\":[{\"name\":\"" + name + "\"}]}}}",
		"event: complete\ndata: {\"id\":\"big\"}",
		"event: next\ndata: {\"id\":\"small\",\"payload\":{\"data\":{\"__typename\":\"Query\"}}}",
		"event: complete\ndata: {\"id\":\"small\"}",
	} {
		if f := withoutPosition(st.Event().String()); f != want {
			t.Fatalf("got  %q (%d bytes)\nwant %q (%d bytes)", f[max(0, len(f)-120):], len(f), want[max(0, len(want)-120):], len(want))
		}
	}
}

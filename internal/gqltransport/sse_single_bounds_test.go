package gqltransport_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// singleAnswer is the answer to a single connection mode POST sent by
// postSingle.
type singleAnswer struct {
	status int
	body   string
	err    error
}

// postSingle POSTs query as operation id on reservation tok, as the
// admin, and returns its answer; it gives up at the context's deadline.
// It is safe to call from any goroutine (it does not fail the test).
func postSingle(ctx context.Context, d *dt.Daemon, db, tok, id, query string) singleAnswer {
	return postSingleAs(ctx, d, dt.Admin(), db, tok, id, query)
}

// postSingleAs is postSingle with the credentials of as.
func postSingleAs(ctx context.Context, d *dt.Daemon, as dt.Auth, db, tok, id, query string) singleAnswer {
	req, err := http.NewRequestWithContext(ctx, "POST", d.URL+"/api/graphql/admin/"+db,
		strings.NewReader(body(query, "extensions", map[string]any{"operationId": id})))
	if err != nil {
		return singleAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GraphQL-Event-Stream-Token", tok)
	as(req)
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

// TestSingleOperationsAreCapped: a reservation runs at most
// graphql_ws_max_operations operations at once, those waiting their turn
// among them; past it a POST is answered 429 at once, naming the key,
// before its body is read. Found by review: every POST behind a query
// waiting for the stream waited too, holding its request, its variables
// and its connection, without limit until the stream took the results or
// the reservation ended.
func TestSingleOperationsAreCapped(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLWSMaxOperations = 3 })
	db := "singlecap"
	d.CreateDatabase(t, db, "type Dog { name: String! }")
	name := strings.Repeat("n", 70<<10)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/"+db, `{"@type":"Dog","@id":"Dog/big","name":"`+name+`"}`)
	tok := reserve(t, d, dt.Admin(), db)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// No stream takes this result: the queries after it wait their turn.
	if a := postSingle(ctx, d, db, tok, "big", "{ Dog { name } }"); a.err != nil || a.status != 202 {
		t.Fatalf("first POST: %d %q %v", a.status, a.body, a.err)
	}
	answers := make(chan singleAnswer, 6)
	for i := range 6 {
		go func() { answers <- postSingle(ctx, d, db, tok, fmt.Sprint("q", i), "{ __typename }") }()
	}
	for refused := 0; refused < 3; {
		a := <-answers
		if a.err != nil || a.status != 429 || !strings.Contains(a.body, "graphql_ws_max_operations") {
			t.Fatalf("a POST past the cap: %d %q %v, want 429 naming graphql_ws_max_operations", a.status, a.body, a.err)
		}
		refused++
	}
	// Refused before its body is read: a body that is no JSON is not
	// looked at.
	r := d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/"+db, "not json", "Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", tok)
	if r.Status != 429 {
		t.Fatalf("a POST past the cap with a bad body: %d %s", r.Status, r.Body)
	}
	// Once the stream takes the results, the waiting ones run, and the
	// reservation takes operations again.
	st := mustOpen(t, d, dt.Admin(), "GET", "/api/graphql/admin/"+db+"?token="+tok, "", nil, "Accept", sse)
	st.connected()
	for range 3 {
		if a := <-answers; a.err != nil || a.status != 202 {
			t.Fatalf("a waiting POST: %d %q %v, want 202", a.status, a.body, a.err)
		}
	}
	if a := postSingle(ctx, d, db, tok, "after", "{ __typename }"); a.err != nil || a.status != 202 {
		t.Fatalf("a POST once the others ran: %d %q %v, want 202", a.status, a.body, a.err)
	}
}

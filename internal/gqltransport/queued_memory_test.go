package gqltransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// largeVariables returns the variables {"x":[…]} of n ids of width
// characters each, as JSON.
func largeVariables(n, width int) []byte {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%0*d", width, i)
	}
	b, _ := json.Marshal(map[string]any{"x": ids})
	return b
}

// emptyFilters returns the variables {"x":[{},…]} of n empty filters, as
// JSON: 3 bytes a value, which holds 64 decoded.
func emptyFilters(n int) []byte {
	return []byte(`{"x":[` + strings.Repeat(`{},`, n-1) + `{}]}`)
}

// filtersQuery takes large variables, filters $x, and runs quickly: the
// field that reads them is skipped.
const filtersQuery = `query($x: [Dog_Filter!]) { __typename Dog(filter: {_or: $x}) @skip(if: true) { name } }`

// idsQuery takes large variables, ids $x, and runs quickly: the field
// that reads them is skipped.
const idsQuery = `query($x: [ID!]) { __typename Dog(ids: $x) @skip(if: true) { name } }`

// queuedMemoryFixture is a daemon whose database admin/<db> holds 200
// dogs with 1 KB names: { Dog { name } } answers about 200 KB.
func queuedMemoryFixture(t *testing.T, db string) *dt.Daemon {
	t.Helper()
	d := dt.Start(t)
	d.CreateDatabase(t, db, "type Dog { name: String! }")
	var docs []string
	for i := range 200 {
		docs = append(docs, fmt.Sprintf(`{"@type":"Dog","@id":"Dog/d%d","name":"%s"}`, i, strings.Repeat("x", 1000)))
	}
	insert(t, d, db, "["+strings.Join(docs, ",")+"]")
	return d
}

// TestSocketThatDoesNotReadHoldsFewVariables: a socket sends 60 queries
// answered with about 200 KB each, then 30 queries whose variables are
// 45,000 empty filters (135 KB, decoded to several MB), and reads
// nothing. Once the results fill the connection, the socket reads
// its next message only when the query before it has its turn: one
// query's variables wait, decoded, besides those of the one running. The
// heap grows by a few MB (found by review: every message was read, its
// variables decoded and its operation started at once, up to
// graphql_ws_max_operations, 100: 95 such messages held about 670 MB,
// and 99 of 1 MB of ids about 400 MB, until the socket closed; here
// the heap grew by 25 MB). Not parallel: it measures the process's
// heap.
func TestSocketThatDoesNotReadHoldsFewVariables(t *testing.T) {
	const queries, large = 60, 30
	d := queuedMemoryFixture(t, "wsvars")
	c := mustConnect(t, d, "wsvars")
	c.lasting(5 * time.Minute) // minutes under load
	c.barrier("b")
	vars := emptyFilters(45000)
	before := heapNow()

	var sent atomic.Bool
	go func() {
		for i := range queries + large {
			payload := `{"query":"{ Dog { name } }"}`
			if i >= queries {
				payload = fmt.Sprintf(`{"query":%q,"variables":%s}`, filtersQuery, vars)
			}
			if c.c.Write(c.tx, websocket.MessageText, []byte(fmt.Sprintf(`{"id":"q%d","type":"subscribe","payload":%s}`, i, payload))) != nil {
				return
			}
		}
		sent.Store(true)
	}()
	// Nothing announces that the daemon is done with what it read: wait
	// until each of the socket's goroutines waits, and either its reader
	// waits for a query's turn before it reads on or the client sent
	// everything.
	eventually.True(t, wait, "the socket's goroutines wait", func() bool {
		return socketWaits(false) && (socketWaits(true) || sent.Load())
	})
	after := heapNow()
	t.Logf("%d queries of %d KB of variables on a socket that does not read: heap %d -> %d KiB, goroutines %d -> %d",
		large, len(vars)>>10, before.heap>>10, after.heap>>10, before.goroutines, after.goroutines)
	if grew := after.heap - before.heap; grew > 12<<20 {
		t.Errorf("the heap grew by %d MiB, want a few", grew>>20)
	}

	// Read: every query is answered.
	answered := 0
	for answered < queries+large {
		m := c.read()
		switch {
		case strings.Contains(m, `"type":"complete"`), strings.Contains(m, `"type":"error"`):
			answered++
		case strings.Contains(m, `"type":"next"`):
		default:
			t.Fatalf("unexpected message %.300s", m)
		}
	}
}

// TestSingleReservationThatIsNotReadHoldsFewVariables: a single
// connection mode reservation whose stream is not open takes a query
// answered with about 200 KB, then 10 POSTs at once of a query whose
// variables are 45,000 ids of 40 characters (about 1.9 MB). One of them
// reads its body and waits its turn; the others wait with their bodies
// unread. The heap grows by a few MB; once the stream opens, every POST
// is answered 202. Found by review: each POST read and decoded its body
// and waited its turn with it, up to graphql_ws_max_operations (100) of
// them: 30 POSTs of 8 MiB held 682 MB until the reservation expired;
// here the heap grew by 35 MB). Not parallel: it measures the process's
// heap.
func TestSingleReservationThatIsNotReadHoldsFewVariables(t *testing.T) {
	const posts = 10
	db := "singlevars"
	d := queuedMemoryFixture(t, db)
	tok := reserve(t, d, dt.Admin(), db)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if a := postSingle(ctx, d, db, tok, "big", "{ Dog { name } }"); a.err != nil || a.status != 202 {
		t.Fatalf("the first POST: %d %q %v", a.status, a.body, a.err)
	}
	vars := largeVariables(45000, 40)
	// The client's bodies are in this process's heap too: made before it
	// is measured.
	bodies := make([]string, posts)
	for i := range bodies {
		bodies[i] = body(idsQuery, "variables", json.RawMessage(vars), "extensions", map[string]any{"operationId": fmt.Sprint("v", i)})
	}
	vars = nil
	before := heapNow()
	answers := make(chan singleAnswer, posts)
	for i := range posts {
		go func() {
			req, err := http.NewRequestWithContext(ctx, "POST", d.URL+"/api/graphql/admin/"+db, strings.NewReader(bodies[i]))
			if err != nil {
				answers <- singleAnswer{err: err}
				return
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GraphQL-Event-Stream-Token", tok)
			dt.Admin()(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- singleAnswer{err: err}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			answers <- singleAnswer{status: resp.StatusCode, body: string(body), err: err}
		}()
	}
	// Nothing announces that the daemon is done with what it read: wait
	// until every POST waits, for its turn or to read its body.
	eventually.True(t, wait, "the POSTs wait", func() bool {
		return waitingGoroutines("gqltransport.(*transport).singleOperation(") == posts && singleReadsNothing()
	})
	after := heapNow()
	t.Logf("%d POSTs of %d KB on a reservation not read: heap %d -> %d KiB, goroutines %d -> %d",
		posts, len(bodies[0])>>10, before.heap>>10, after.heap>>10, before.goroutines, after.goroutines)
	if grew := after.heap - before.heap; grew > 24<<20 {
		t.Errorf("the heap grew by %d MiB, want a few", grew>>20)
	}

	st := mustOpen(t, d, dt.Admin(), "GET", "/api/graphql/admin/"+db+"?token="+tok, "", nil, "Accept", sse)
	st.connected()
	for range posts {
		if a := <-answers; a.err != nil || a.status != 202 {
			t.Fatalf("a waiting POST: %d %.300q %v, want 202", a.status, a.body, a.err)
		}
	}
}

// singleReadsNothing reports whether no single connection mode POST is
// reading, decoding or preparing its operation.
func singleReadsNothing() bool {
	buf := make([]byte, 64<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "gqltransport.(*transport).singleOperation(") && (strings.Contains(g, "readParams") || strings.Contains(g, "prepare")) {
			return false
		}
	}
	return true
}

// TestSocketOperationsAreChargedToTheParamsBudget: a query on a socket is
// charged what its parameters hold, as a plain request is
// (graphql_request_bytes), while it waits and runs: past the budget it is
// refused with an error naming the setting, and the socket goes on. A
// user's many sockets, each holding a query waiting and one running, are
// bounded so.
func TestSocketOperationsAreChargedToTheParamsBudget(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLRequestBytes = 100_000 })
	d.CreateDatabase(t, "wsbudget", "type Dog { name: String! }")
	c := mustConnect(t, d, "wsbudget")
	vars := largeVariables(2000, 8) // 2,000 values: 160 KB and more as charged
	c.send(`{"id":"big","type":"subscribe","payload":{"query":` + strconv.Quote(idsQuery) + `,"variables":` + string(vars) + `}}`)
	if got := c.read(); !strings.Contains(got, `"id":"big","type":"error"`) || !strings.Contains(got, "graphql_request_bytes") {
		t.Fatalf("a query past the budget: %s, want an error naming graphql_request_bytes", got)
	}
	c.barrier("small") // a small one runs, on the same socket
}

// TestStreamOperationsAreChargedToTheParamsBudget: a query sent over an
// event stream (SSE, NDJSON, multipart) or on a single connection mode
// reservation is charged what its parameters hold, as a plain request and
// a socket's query are (graphql_request_bytes), while it waits and runs:
// past the budget it is refused before it runs, 503 with Retry-After,
// naming the setting. Found by review: only plain requests and sockets
// were charged, so Accept: text/event-stream took a user's concurrent
// queries of 8 MiB of variables past the budget (the 1.5 GB that sixty
// plain ones held before it).
func TestStreamOperationsAreChargedToTheParamsBudget(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLRequestBytes = 100_000 })
	db := "streambudget"
	d.CreateDatabase(t, db, "type Dog { name: String! }")
	path := "/api/graphql/admin/" + db
	big := json.RawMessage(largeVariables(2000, 8)) // 2,000 values: 160 KB and more as charged
	small := json.RawMessage(largeVariables(1, 8))
	refused := func(what string, r dt.Response) {
		t.Helper()
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "graphql_request_bytes") {
			t.Errorf("%s past the budget: %d %.300s (Retry-After %q), want 503 naming graphql_request_bytes", what, r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}
	for _, accept := range []string{sse, ndjson, "multipart/mixed;subscriptionSpec=1.0"} {
		refused(accept, d.Do(t, dt.Admin(), http.MethodPost, path, body(idsQuery, "variables", big), "Content-Type", "application/json", "Accept", accept))
		if r := d.Do(t, dt.Admin(), http.MethodPost, path, body(idsQuery, "variables", small), "Content-Type", "application/json", "Accept", accept); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"__typename":"Query"`) {
			t.Errorf("%s within the budget: %d %.300s", accept, r.Status, r.Body)
		}
	}
	tok := reserve(t, d, dt.Admin(), db)
	refused("single connection mode", d.Do(t, dt.Admin(), http.MethodPost, path, body(idsQuery, "variables", big, "extensions", map[string]any{"operationId": "big"}),
		"Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", tok))
	d.MustDo(t, http.StatusAccepted, dt.Admin(), http.MethodPost, path, body(idsQuery, "variables", small, "extensions", map[string]any{"operationId": "small"}),
		"Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", tok)
}

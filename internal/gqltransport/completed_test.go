package gqltransport_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// backlogFixture is a daemon whose database admin/<db> got 40 commits of
// 50 dogs with 1 KB names (2,000 events of about 1 KB) after the
// position it returns.
func backlogFixture(t *testing.T, db string) (*dt.Daemon, string) {
	t.Helper()
	d := dt.Start(t)
	d.CreateDatabase(t, db, "type Dog { name: String! }")
	pos := d.MustDo(t, http.StatusOK, dt.Admin(), "GET", "/api/document/admin/"+db+"?type=Dog", nil).Header.Get("Sluice-Position")
	name := strings.Repeat("n", 1000)
	for i := range 40 {
		var docs []string
		for j := range 50 {
			docs = append(docs, fmt.Sprintf(`{"@type":"Dog","@id":"Dog/d%d-%d","name":"%s"}`, i, j, name))
		}
		insert(t, d, db, "["+strings.Join(docs, ",")+"]")
	}
	return d, pos
}

// TestSocketCompletedSubscriptionSendsNothingMore: a client completes
// eight subscriptions resumed from before a backlog of 2,000 events, once
// each has sent some, then runs a query: nothing of them comes after the
// query's answer. graphql-transport-ws says no further event of an
// operation the client completed is sent, and the client may have given
// its id to a new operation already (found by review: each went on
// writing batches of up to 64 pieces of its backlog, thousands of events
// in all after the answer).
func TestSocketCompletedSubscriptionSendsNothingMore(t *testing.T) {
	t.Parallel()
	const subs = 8
	d, pos := backlogFixture(t, "wsafter")
	c := mustConnect(t, d, "wsafter")
	c.lasting(5 * time.Minute) // minutes under load
	for i := range subs {
		c.send(fmt.Sprintf(`{"id":"x%d","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }","extensions":{"lastEventId":"%s"}}}`, i, pos))
	}
	started := map[string]bool{}
	for len(started) < subs {
		started[c.read()[:len(`{"id":"x0"`)]] = true
	}
	for i := range subs {
		c.send(fmt.Sprintf(`{"id":"x%d","type":"complete"}`, i))
	}
	c.send(`{"id":"b","type":"subscribe","payload":{"query":"{ __typename }"}}`)
	answered, after := false, 0
	for {
		m := c.read()
		switch {
		case m == `{"id":"b","type":"complete"}`:
			answered = true
			c.send(`{"id":"b2","type":"subscribe","payload":{"query":"{ __typename }"}}`)
		case m == `{"id":"b2","type":"complete"}`:
			if after > 0 {
				t.Fatalf("%d messages of the completed subscriptions after the answer to the query sent after their complete", after)
			}
			return
		case answered && strings.HasPrefix(m, `{"id":"x`):
			after++
		}
	}
}

// TestSingleDeletedSubscriptionSendsNothingMore: single connection mode's
// DELETE of eight subscriptions resumed from before a backlog of 2,000
// events, once each has sent some, then a query: nothing of them comes
// on the stream after the query's result (found by review: thousands of
// their events did, as on a socket).
func TestSingleDeletedSubscriptionSendsNothingMore(t *testing.T) {
	t.Parallel()
	const subs = 8
	d, pos := backlogFixture(t, "singleafter")
	path := "/api/graphql/admin/singleafter"
	tok := reserve(t, d, dt.Admin(), "singleafter")
	st := mustOpen(t, d, dt.Admin(), "GET", path+"?token="+tok, "", nil, "Accept", sse)
	st.connected()
	header := []string{"Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", tok}
	for i := range subs {
		d.MustDo(t, 202, dt.Admin(), "POST", path, body("subscription { Dog_added { name } }", "extensions", map[string]any{"operationId": fmt.Sprint("x", i), "lastEventId": pos}), header...)
	}
	started := map[string]bool{}
	for len(started) < subs {
		f := st.Event().String()
		started[f[:len("event: next\ndata: {\"id\":\"x0\"")]] = true
	}
	for i := range subs {
		d.MustDo(t, 200, dt.Admin(), "DELETE", path+"?operationId=x"+fmt.Sprint(i), nil, header...)
	}
	// The query's POST is answered once its result is queued, which
	// waits for the stream, read below.
	query := func(id string) <-chan int {
		status := make(chan int, 1)
		req, _ := http.NewRequest("POST", d.URL+path, strings.NewReader(body("{ __typename }", "extensions", map[string]any{"operationId": id})))
		for i := 0; i < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		req.Header.Set("Authorization", basicAuth("admin", dt.AdminPassword))
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				status <- 0
				return
			}
			resp.Body.Close()
			status <- resp.StatusCode
		}()
		return status
	}
	statuses := []<-chan int{query("b")}
	answered, after := false, 0
	for {
		f := st.Event().String()
		switch {
		case f == "event: complete\ndata: {\"id\":\"b\"}":
			answered = true
			statuses = append(statuses, query("b2"))
		case f == "event: complete\ndata: {\"id\":\"b2\"}":
			for _, s := range statuses {
				if got := <-s; got != 202 {
					t.Fatalf("a query's POST: %d, want 202", got)
				}
			}
			if after > 0 {
				t.Fatalf("%d events of the deleted subscriptions after the result of the query sent after their DELETE", after)
			}
			return
		case answered && strings.HasPrefix(f, "event: next\ndata: {\"id\":\"x"):
			after++
		}
	}
}

// TestSocketQueryAfterCompletedSubscriptionsIsAnswered: on three sockets in turn,
// a client completes eight subscriptions resumed from before a backlog of
// 2,000 events whose selection follows a reference, once each has sent
// some, then runs a query: the query is answered (found by review: a
// stream completed amid a batch stopped at its next read of the
// referenced documents, which its ended context failed, leaving the
// events of the batch queued without waking the connection's writer; past
// 64 KiB the query waited for room that never came, on about half the
// sockets, until another operation of the socket sent something).
func TestSocketQueryAfterCompletedSubscriptionsIsAnswered(t *testing.T) {
	t.Parallel()
	const sockets, subs = 3, 8
	d := dt.Start(t)
	d.CreateDatabase(t, "wsstranded", "type Owner { name: String! } type Dog { name: String! owner: Owner }")
	insert(t, d, "wsstranded", `{"@type":"Owner","@id":"Owner/o","name":"o"}`)
	pos := d.MustDo(t, http.StatusOK, dt.Admin(), "GET", "/api/document/admin/wsstranded?type=Dog", nil).Header.Get("Sluice-Position")
	name := strings.Repeat("n", 1000)
	for i := range 40 {
		var docs []string
		for j := range 50 {
			docs = append(docs, fmt.Sprintf(`{"@type":"Dog","@id":"Dog/d%d-%d","name":"%s","owner":"Owner/o"}`, i, j, name))
		}
		insert(t, d, "wsstranded", "["+strings.Join(docs, ",")+"]")
	}
	for k := range sockets {
		c := mustConnect(t, d, "wsstranded")
		c.lasting(5 * time.Minute) // minutes under load
		for i := range subs {
			c.send(fmt.Sprintf(`{"id":"x%d","type":"subscribe","payload":{"query":"subscription { Dog_added { name owner { name } } }","extensions":{"lastEventId":"%s"}}}`, i, pos))
		}
		started := map[string]bool{}
		for len(started) < subs {
			started[c.read()[:len(`{"id":"x0"`)]] = true
		}
		for i := range subs {
			c.send(fmt.Sprintf(`{"id":"x%d","type":"complete"}`, i))
		}
		c.send(`{"id":"b","type":"subscribe","payload":{"query":"{ __typename }"}}`)
		c.lasting(wait)
		for {
			_, b, err := c.c.Read(c.tx)
			if err != nil {
				t.Fatalf("socket %d: the query sent after the complete messages: %v", k, err)
			}
			if string(b) == `{"id":"b","type":"complete"}` {
				break
			}
		}
	}
}

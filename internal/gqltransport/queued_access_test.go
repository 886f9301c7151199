package gqltransport_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// queuedFixture is a daemon whose database admin/<db> holds 500 people
// with 4 KB names (bigQuery answers about 2 MB) and Person/victim, whose
// ssn is private; eve is its admin.
func queuedFixture(t *testing.T, db, role string) *dt.Daemon {
	t.Helper()
	d := dt.Start(t)
	d.CreateDatabase(t, db, "type Person { name: String! ssn: String @private }")
	var docs []string
	for i := range 500 {
		docs = append(docs, fmt.Sprintf(`{"@type":"Person","@id":"Person/p%d","name":"%s"}`, i, strings.Repeat("x", 4000)))
	}
	docs = append(docs, `{"@type":"Person","@id":"Person/victim","name":"victim","ssn":"before"}`)
	insert(t, d, db, "["+strings.Join(docs, ",")+"]")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"eve","organization":"admin","password":"eve-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"eve","role":"`+role+`"}`)
	return d
}

const (
	bigQuery    = `{ Person(limit: 500) { name } }`
	victimQuery = `{ Person(id: "Person/victim") { name ssn } }`
)

// accessChanges are the changes after which eve may no longer read the
// victim's ssn: her role taken away, or narrowed to read (the ssn is
// private). In the last, she read when she connected and became admin
// after: her connection's place among the streams, taken as a reader,
// holds on, and only the queued query's own role was narrowed.
var accessChanges = []struct {
	name, from, role string
	// ends: the change ends eve's connection.
	ends bool
}{
	{"revoked", "admin", "none", true},
	{"narrowed", "admin", "read", true},
	{"narrowedBack", "read", "read", false},
}

// waitingGoroutines reports how many goroutines of the process wait
// (their state is a select or a channel operation) with a frame whose
// function name contains fn. The tests that count them are not parallel:
// they count every daemon's of the process.
func waitingGoroutines(fn string) int {
	buf := make([]byte, 64<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if strings.Contains(g, fn) && (strings.Contains(head, "[select") || strings.Contains(head, "[chan")) {
			n++
		}
	}
	return n
}

// TestSocketQueuedQueryAfterAccessChange: eve, admin of a database, sends
// queries with large results on a socket and reads nothing, then a query
// of the victim's private ssn, which waits its turn. Her role is then
// taken away (or narrowed to read) and the ssn written again. When she
// reads, no message holds what was written after the change, and the
// socket closes with 4403. Found by review: the queued query ran with the
// role of when it arrived, once she read, and answered the ssn written
// after the change; only then did the socket close.
func TestSocketQueuedQueryAfterAccessChange(t *testing.T) {
	for _, change := range accessChanges {
		t.Run(change.name, func(t *testing.T) {
			db := "wsq" + strings.ToLower(change.name)
			d := queuedFixture(t, db, change.from)
			c := connectAsEve(t, d, db)
			d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"eve","role":"admin"}`)
			for i := range 8 {
				c.send(fmt.Sprintf(`{"id":"big%d","type":"subscribe","payload":{"query":%q}}`, i, bigQuery))
			}
			c.send(fmt.Sprintf(`{"id":"victim","type":"subscribe","payload":{"query":%q}}`, victimQuery))
			// The results fill the connection: a query waits for room.
			eventually.True(t, wait, "a query waits for the socket's writer", func() bool {
				return waitingGoroutines("gqltransport.(*muxOut).turn(") > 0
			})
			d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"eve","role":"`+change.role+`"}`)
			written := "WRITTEN-AFTER-" + strings.ToUpper(change.name)
			d.MustDo(t, 200, dt.Admin(), "PATCH", "/api/document/admin/"+db+"?id=Person/victim", `{"ssn":"`+written+`"}`, "Content-Type", "application/merge-patch+json")
			for {
				_, b, err := c.c.Read(c.tx)
				if !change.ends && err == nil && strings.Contains(string(b), `"id":"victim"`) {
					// Her socket stays: the victim query is refused, as
					// narrowed once its turn came or, read after the
					// change (the socket reads one operation ahead of
					// the one running), as one that does not validate
					// for a reader.
					narrowed := `{"id":"victim","type":"error","payload":[{"message":"the role of eve on admin/` + db + ` was narrowed to read while this operation waited its turn","extensions":{"code":"FORBIDDEN"}}]}`
					invalid := `{"id":"victim","type":"error","payload":[{"message":"Cannot query field \"ssn\" on type \"Person\".","locations":[{"line":1,"column":38}],"extensions":{"code":"GRAPHQL_VALIDATION_FAILED"}}]}`
					if string(b) != narrowed && string(b) != invalid {
						t.Fatalf("got  %.300s\nwant %s\n  or %s", b, narrowed, invalid)
					}
					break
				}
				if err != nil {
					var ce websocket.CloseError
					if !errors.As(err, &ce) || ce.Code != 4403 {
						t.Fatalf("the socket ended with %v, want a close with 4403", err)
					}
					break
				}
				if strings.Contains(string(b), written) {
					t.Fatalf("a message holds what was written after the access change: %.300s", b)
				}
				if strings.Contains(string(b), `"id":"victim","type":"next"`) {
					t.Errorf("the victim query ran after the access change: %.300s", b)
				}
			}
		})
	}
}

// TestSingleQueuedQueryAfterAccessChange: as
// TestSocketQueuedQueryAfterAccessChange, in single connection mode: eve
// opens her reservation's stream and reads nothing, POSTs queries with
// large results, then the victim query, which waits its turn; her role
// is taken away (or narrowed) and the ssn written again. When she reads,
// the stream holds nothing written after the change, and the victim's
// POST is refused. Found by review: the queued query ran with the role of
// its POST once she read, and its result held the ssn written after the
// change.
func TestSingleQueuedQueryAfterAccessChange(t *testing.T) {
	for _, change := range accessChanges {
		t.Run(change.name, func(t *testing.T) {
			db := "sq" + strings.ToLower(change.name)
			d := queuedFixture(t, db, change.from)
			eve := dt.Basic("eve", "eve-password")
			tok := reserve(t, d, eve, db)
			gate := make(chan struct{})
			st := mustOpen(t, d, eve, "GET", "/api/graphql/admin/"+db, "", gate, "Accept", sse, "X-GraphQL-Event-Stream-Token", tok)
			st.connected()
			d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"eve","role":"admin"}`)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			post := func(id, query string) singleAnswer {
				return postSingleAs(ctx, d, eve, db, tok, id, query)
			}
			// The big queries, one after the other, until one waits for
			// room on the stream.
			go func() {
				for i := range 8 {
					if a := post(fmt.Sprint("big", i), bigQuery); a.status != 202 {
						return
					}
				}
			}()
			eventually.True(t, wait, "a query waits for the stream", func() bool {
				return waitingGoroutines("gqltransport.(*muxOut).turn(") > 0
			})
			victim := make(chan singleAnswer, 1)
			go func() { victim <- post("victim", victimQuery) }()
			eventually.True(t, wait, "the victim query waits", func() bool {
				return waitingGoroutines("gqltransport.(*transport).singleOperation(") == 2
			})
			d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"eve","role":"`+change.role+`"}`)
			written := "WRITTEN-AFTER-" + strings.ToUpper(change.name)
			d.MustDo(t, 200, dt.Admin(), "PATCH", "/api/document/admin/"+db+"?id=Person/victim", `{"ssn":"`+written+`"}`, "Content-Type", "application/merge-patch+json")
			close(gate)
			if !change.ends {
				// Her stream stays: the victim's POST is refused.
				a := <-victim
				if want := "the role of eve on admin/" + db + " was narrowed to read while this operation waited its turn"; a.err != nil || a.status != 403 || !strings.Contains(a.body, want) {
					t.Fatalf("the victim's POST: %d %.300s %v, want 403 %q", a.status, a.body, a.err, want)
				}
				return
			}
			for _, f := range st.Ended() {
				if strings.Contains(f.String(), written) {
					t.Fatalf("the stream sent what was written after the access change: %.300s", f.String())
				}
			}
			if a := <-victim; a.err != nil || a.status == 202 || strings.Contains(a.body, written) {
				t.Fatalf("the victim's POST: %d %.300s %v, want it refused", a.status, a.body, a.err)
			}
		})
	}
}

// TestSocketQueryJudgedWhenItsTurnComes: eve reads a database when she
// opens her socket and is then made its admin; her subscription's events
// fill the socket, which she does not read, and a query of the victim's
// private ssn, sent as admin, waits its turn. Her role is narrowed back
// to read, which leaves her socket open (it was opened as a reader), and
// the ssn written again: when she reads, the query is refused as
// narrowed, and nothing written after the change is sent. Found by
// review: the query ran with the role it was sent with.
func TestSocketQueryJudgedWhenItsTurnComes(t *testing.T) {
	db := "wsjudged"
	d := queuedFixture(t, db, "read")
	c := connectAsEve(t, d, db)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"eve","role":"admin"}`)
	fillSocket(t, d, db, c)
	c.send(fmt.Sprintf(`{"id":"victim","type":"subscribe","payload":{"query":%q}}`, victimQuery))
	eventually.True(t, wait, "the query waits its turn", func() bool {
		return waitingGoroutines("gqltransport.(*muxOut).turn(") > 0
	})
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/"+db, `{"user":"eve","role":"read"}`)
	d.MustDo(t, 200, dt.Admin(), "PATCH", "/api/document/admin/"+db+"?id=Person/victim", `{"ssn":"WRITTEN-AFTER-NARROWING"}`, "Content-Type", "application/merge-patch+json")
	for {
		m := c.read()
		if strings.Contains(m, "WRITTEN-AFTER-NARROWING") {
			t.Fatalf("a message holds what was written after the access change: %.300s", m)
		}
		if strings.Contains(m, `"id":"victim"`) {
			if want := `{"id":"victim","type":"error","payload":[{"message":"the role of eve on admin/` + db + ` was narrowed to read while this operation waited its turn","extensions":{"code":"FORBIDDEN"}}]}`; m != want {
				t.Fatalf("got  %.300s\nwant %s", m, want)
			}
			return
		}
	}
}

// fillSocket subscribes c (which then reads nothing) to people added to
// admin/<db> and adds 16 MB of them, until the events fill the socket and
// the subscription waits for room: a query sent then waits its turn.
func fillSocket(t *testing.T, d *dt.Daemon, db string, c *wsConn) {
	t.Helper()
	c.send(`{"id":"s","type":"subscribe","payload":{"query":"subscription { Person_added { name } }"}}`)
	c.barrier("b")
	for batch := range 8 {
		var docs []string
		for i := range 500 {
			docs = append(docs, fmt.Sprintf(`{"@type":"Person","@id":"Person/b%d-%d","name":"%s"}`, batch, i, strings.Repeat("y", 4000)))
		}
		insert(t, d, db, "["+strings.Join(docs, ",")+"]")
	}
	eventually.True(t, wait, "the subscription waits for the socket's writer", func() bool {
		return waitingGoroutines("gqltransport.(*muxOut).wait(") > 0
	})
}

// TestSocketCompleteOfAWaitingQuery: a client whose socket is full sends
// a query, which waits its turn, then completes it: the query is stopped
// while it waits, not run once the client reads, and the socket reads
// on. Found by review: the socket read its next message only once the
// query had its turn, so the complete (and a ping) waited behind it, and
// the query ran.
func TestSocketCompleteOfAWaitingQuery(t *testing.T) {
	db := "wscomplete"
	d := queuedFixture(t, db, "admin")
	c := connectAsEve(t, d, db)
	fillSocket(t, d, db, c)
	c.send(fmt.Sprintf(`{"id":"q","type":"subscribe","payload":{"query":%q}}`, victimQuery))
	eventually.True(t, wait, "the query waits its turn", func() bool {
		return waitingGoroutines("gqltransport.(*muxOut).turn(") > 0
	})
	c.send(`{"id":"q","type":"complete"}`)
	// Well within the socket's own deadline (wait, from its dial), at
	// which the client closes it and the query stops waiting anyway.
	eventually.True(t, 15*time.Second, "the query stops waiting, the client reading nothing", func() bool {
		return waitingGoroutines("gqltransport.(*muxOut).turn(") == 0
	})
	c.send(`{"id":"s","type":"complete"}`)
	c.send(`{"id":"after","type":"subscribe","payload":{"query":"{ __typename }"}}`)
	for {
		m := c.read()
		if strings.Contains(m, `"id":"q"`) {
			t.Fatalf("the completed query answered: %.300s", m)
		}
		if m == `{"id":"after","type":"complete"}` {
			return
		}
	}
}

// connectAsEve opens a socket to admin/<db> and initialises it as eve
// (credentials in the connection_init payload), reading results of up to
// 64 MiB.
func connectAsEve(t *testing.T, d *dt.Daemon, db string) *wsConn {
	t.Helper()
	c, _, err := dialWS(t, d, "/api/graphql/admin/"+db, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.c.SetReadLimit(64 << 20)
	c.send(`{"type":"connection_init","payload":{"Authorization":"` + basicAuth("eve", "eve-password") + `"}}`)
	c.expect(`{"type":"connection_ack"}`)
	return c
}

package gqltransport_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestOperationIDsAreBounded: an operation id of a connection is at most
// 128 bytes: a graphql-ws subscribe with a longer one closes the socket
// with 4400 naming the bound, a single connection mode POST is a 400
// naming it; one of 128 bytes runs. Found by review: an id could be as
// large as a message (1 MiB) or a body, and each operation kept it
// JSON-encoded (a 1 MB id of '<' as 6.85 MB) and repeated it in every
// message it sent.
func TestOperationIDsAreBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	db := "opids"
	d.CreateDatabase(t, db, "type Dog { name: String! }")
	longest, tooLong := strings.Repeat("i", 128), strings.Repeat("i", 129)

	t.Run("graphql-ws", func(t *testing.T) {
		c := mustConnect(t, d, db)
		c.barrier(longest)
		c.send(`{"id":"` + tooLong + `","type":"subscribe","payload":{"query":"subscription { Dog_added { name } }"}}`)
		c.expectClose(4400, "Invalid message: an operation id is at most 128 bytes")
	})
	t.Run("single connection mode", func(t *testing.T) {
		tok := reserve(t, d, dt.Admin(), db)
		post := func(status int, id string) string {
			t.Helper()
			r := d.MustDo(t, status, dt.Admin(), "POST", "/api/graphql/admin/"+db, body("subscription { Dog_added { name } }", "extensions", map[string]any{"operationId": id}),
				"Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", tok)
			return string(r.Body)
		}
		post(202, longest)
		if got := post(400, tooLong); !strings.Contains(got, "extensions.operationId is 129 bytes: an operation id is at most 128 bytes") {
			t.Fatalf("a POST with a 129-byte operation id: %s", got)
		}
	})
}

// TestStreamVariablesAreBounded: the variables of a subscription or live
// query are at most 384 KiB as JSON, on every transport: larger ones are
// refused before the operation starts, naming the bound (a 400 over
// HTTP, an error message with BAD_USER_INPUT for that operation on
// graphql-ws, as a subscription that does not validate), and ones of
// exactly 384 KiB run; a query or mutation, answered once, is not
// bounded by it. A filter of 1,000 ids (the most a filter takes) of the
// longest (a 63-byte class name and a 255-byte key) fits. Found by
// review: a subscription kept its variables for its whole life, and
// nothing bounded them below a body (8 MiB) or a graphql-ws message (1
// MiB): four SSE subscriptions of 7 MiB of variables held about 50 MiB
// each, and one user may open 1,000 streams.
func TestStreamVariablesAreBounded(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	db := "opvars"
	class := "Long" + strings.Repeat("g", 59) // 63 bytes, the longest class name
	d.CreateDatabase(t, db, "type Dog { name: String! }\ntype "+class+" { name: String! }")
	path := "/api/graphql/admin/" + db
	const bound = 384 << 10
	const sub = `subscription($v: String) { Dog_added(filter: {name: {eq: $v}}) { name } }`
	const live = `query($v: String) @live { Dog(filter: {name: {eq: $v}}) { name } }`
	const query = `query($v: String) { Dog(filter: {name: {eq: $v}}) { name } }`
	// {"v":"…"} is 8 bytes and its string.
	atBound := map[string]any{"v": strings.Repeat("a", bound-8)}
	overBound := map[string]any{"v": strings.Repeat("a", bound-7)}
	const refusal = "the variables are 393217 bytes as JSON, more than 393216 (the limit of a subscription or live query"

	t.Run("SSE, NDJSON, multipart", func(t *testing.T) {
		multipart := "multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json;q=0.9"
		for _, accept := range []string{sse, ndjson, multipart} {
			for _, q := range []string{sub, live} {
				s, resp := d.OpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: path, Body: body(q, "variables", overBound), Header: []string{"Accept", accept}})
				if s != nil {
					t.Errorf("%s %.30s: variables over the bound opened a stream", accept, q)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 400 || !strings.Contains(string(b), refusal) {
					t.Fatalf("%s %.30s: variables over the bound: %d %s", accept, q, resp.StatusCode, b)
				}
			}
		}
		for _, q := range []string{sub, live} {
			mustOpen(t, d, dt.Admin(), "POST", path, body(q, "variables", atBound), nil, "Accept", sse).connected()
		}
		// A query is answered once: not bounded.
		r := d.MustDo(t, 200, dt.Admin(), "POST", path, body(query, "variables", overBound), "Content-Type", "application/json")
		if string(r.Body) == "" || strings.Contains(string(r.Body), `"errors"`) {
			t.Fatalf("a query with variables over the bound: %s", r.Body)
		}
	})
	t.Run("graphql-ws", func(t *testing.T) {
		c := mustConnect(t, d, db)
		for i, q := range []string{sub, live} {
			id := fmt.Sprint("over", i)
			c.send(`{"id":"` + id + `","type":"subscribe","payload":` + body(q, "variables", overBound) + `}`)
			if got := c.read(); !strings.HasPrefix(got, `{"id":"`+id+`","type":"error","payload":[{"message":"`+refusal) || !strings.Contains(got, `"code":"BAD_USER_INPUT"`) {
				t.Fatalf("variables over the bound: %.300s", got)
			}
		}
		// Ones at the bound run: the barrier's answer comes first.
		c.send(`{"id":"at","type":"subscribe","payload":` + body(sub, "variables", atBound) + `}`)
		c.barrier("b")
		c.send(`{"id":"q","type":"subscribe","payload":` + body(query, "variables", overBound) + `}`)
		if got := withoutPosition(c.read()); got != `{"id":"q","type":"next","payload":{"data":{"Dog":[]}}}` {
			t.Fatalf("a query with variables over the bound: %s", got)
		}
		c.expect(`{"id":"q","type":"complete"}`)
	})
	t.Run("single connection mode", func(t *testing.T) {
		tok := reserve(t, d, dt.Admin(), db)
		post := func(status int, q string, vars map[string]any, id string) string {
			t.Helper()
			r := d.MustDo(t, status, dt.Admin(), "POST", path, body(q, "variables", vars, "extensions", map[string]any{"operationId": id}),
				"Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", tok)
			return string(r.Body)
		}
		for i, q := range []string{sub, live} {
			if got := post(400, q, overBound, fmt.Sprint("over", i)); !strings.Contains(got, refusal) {
				t.Fatalf("variables over the bound: %.300s", got)
			}
		}
		post(202, sub, atBound, "at")
		post(202, query, overBound, "q")
	})
	t.Run("1,000 of the longest ids", func(t *testing.T) {
		ids := make([]string, 1000)
		for i := range ids {
			ids[i] = class + "/" + fmt.Sprintf("%04d", i) + strings.Repeat("k", 251)
		}
		mustOpen(t, d, dt.Admin(), "POST", path, body(`subscription($ids: [ID!]) { `+class+`_added(filter: {_ids: $ids}) { name } }`, "variables", map[string]any{"ids": ids}), nil, "Accept", sse).connected()
	})
}

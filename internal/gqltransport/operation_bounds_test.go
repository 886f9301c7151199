package gqltransport_test

import (
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

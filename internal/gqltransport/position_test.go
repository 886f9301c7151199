package gqltransport_test

import (
	"encoding/json"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestQueriesCarryTheirPosition: a query's result carries, in
// extensions.position, the position it reflects (the newest commit it
// saw), over every transport: JSON, SSE and NDJSON (a finite operation
// on a stream), Apollo multipart and graphql-ws. A query with several
// fields reads them all in one snapshot, and a database without commits
// answers commit 0.
func TestQueriesCarryTheirPosition(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "pos", "type Dog { name: String! owner: Dog }")
	q := body(`{ Dog { name } }`)
	var epoch string
	check := func(transport, payload string, seq string) {
		t.Helper()
		var r struct {
			Extensions struct {
				Position string `json:"position"`
			} `json:"extensions"`
		}
		if err := json.Unmarshal([]byte(payload), &r); err != nil {
			t.Fatalf("%s: %v in %s", transport, err, payload)
		}
		if epoch == "" {
			epoch, _, _ = strings.Cut(r.Extensions.Position, "-")
		}
		// Tagged with the newest commit read, but before any.
		if want := epoch + "-" + seq + "-2147483647"; dt.Untag(r.Extensions.Position) != want || (seq == "0") != (r.Extensions.Position == want) {
			t.Errorf("%s: position %q, want %q: %s", transport, r.Extensions.Position, want, payload)
		}
	}
	check("JSON, no commits", string(d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/pos", q, "Content-Type", "application/json").Body), "0")
	insertDog(t, d, "pos", "a")
	insertDog(t, d, "pos", "b")

	check("JSON", string(d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/pos", q, "Content-Type", "application/json").Body), "2")
	check("JSON, two fields and a reference", string(d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/pos",
		body(`{ a: Dog(limit: 1) { name owner { name } } b: Dog { name } }`), "Content-Type", "application/json").Body), "2")
	check("GET", string(d.MustDo(t, 200, dt.Admin(), "GET", "/api/graphql/admin/pos?query=%7BDog%7Bname%7D%7D", nil).Body), "2")
	for _, accept := range []string{sse, ndjson} {
		st := mustOpen(t, d, dt.Admin(), "POST", "/api/graphql/admin/pos", q, nil, "Accept", accept)
		f := st.Event()
		data := f.Field("data")
		if st.NDJSON() {
			data = f.String()
		}
		check(accept, data, "2")
	}
	accept := "multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json;q=0.9"
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/pos", q, "Accept", accept, "Content-Type", "application/json")
	_, part, _ := strings.Cut(string(r.Body), `{"payload":`)
	part, _, _ = strings.Cut(part, "}\r\n--graphql--")
	check("multipart", part, "2")

	c := mustConnect(t, d, "pos")
	c.send(`{"id":"q","type":"subscribe","payload":` + q + `}`)
	var m struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal([]byte(c.read()), &m); err != nil {
		t.Fatal(err)
	}
	check("graphql-ws", string(m.Payload), "2")
}

package gqltransport_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestLiveQueryAccess: a reader's live query sees the fields of its role
// only: selecting a protected one is refused, and a change of one changes
// nothing it is sent; an access change made on the other daemon ends the
// stream with an error; a live query counts in the stream caps.
func TestLiveQueryAccess(t *testing.T) {
	t.Parallel()
	d1 := dt.Start(t, func(c *config.Config) { c.MaxStreamsPerUser = 1 })
	d1.CreateDatabase(t, "acc", staffSDL)
	d2 := dt.Start(t, dt.WithDatabaseURL(d1.DatabaseURL))
	w := &writer{t: t, d: d2, db: "acc"}
	w.insert(`{"@type":"Person","@id":"Person/a","name":"Ann","team":"x","ssn":"1"}`)
	d1.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d1.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/acc", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	open := func(q string) *stream {
		return mustOpen(t, d1, rita, http.MethodPost, "/api/graphql/admin/acc", body(q), nil, "Accept", sse)
	}

	bad := open(`subscription { Person { name ssn } }`)
	if fs := bad.Ended(); len(fs) != 2 || !strings.Contains(fs[0].String(), `Cannot query field \"ssn\" on type \"Person\"`) {
		t.Fatalf("a protected field: %q", fs)
	}
	s := open(`subscription { Person(filter: {team: {eq: "x"}}) { _id name } }`)
	s.connected()
	s.expect(1, `{"Person":[{"_id":"Person/a","name":"Ann"}]}`)
	// A second live query is past max_streams_per_user.
	if _, resp := d1.OpenStream(t, rita, dt.StreamRequest{Method: http.MethodPost, Path: "/api/graphql/admin/acc",
		Body: body(`subscription { Person { name } }`), Header: []string{"Accept", sse}}); resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a live query past the cap: %v", resp)
	}

	w.replace(`{"@type":"Person","@id":"Person/a","name":"Ann","team":"x","ssn":"2"}`) // only the protected field
	seq := w.replace(`{"@type":"Person","@id":"Person/a","name":"Anna","team":"x","ssn":"2"}`)
	s.expect(seq, `{"Person":[{"_id":"Person/a","name":"Anna"}]}`)

	d2.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/acc", `{"user":"rita","role":"none"}`)
	fs := s.Ended()
	if len(fs) != 2 || !strings.Contains(fs[0].String(), `the access of rita to admin/acc was revoked`) || !strings.Contains(fs[0].String(), `"code":"FORBIDDEN"`) ||
		fs[1].String() != "event: complete\ndata:" {
		t.Fatalf("after the revocation: %q", fs)
	}
}

// TestLiveQueryLimits: a live query's result is bounded as a query's
// (graphql_max_result_rows here): one that starts over the bound gets the
// query's error, and one whose result grows past it ends with that error.
// Heartbeats keep a quiet live query alive.
func TestLiveQueryLimits(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.GraphQLMaxResultRows = 2 })
	d.CreateDatabase(t, "lim", staffSDL)
	w := &writer{t: t, d: d, db: "lim"}
	w.insert(person("a", "Ann", "x", ""))
	w.insert(person("b", "Bob", "x", ""))
	s := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/lim?heartbeat=1s", body(`subscription { Person { name } }`), nil, "Accept", sse)
	s.connected()
	s.expect(2, `{"Person":[{"name":"Ann"},{"name":"Bob"}]}`)
	if f := s.Next(); !f.IsPing() {
		t.Fatalf("a quiet live query got %q, want a heartbeat", f)
	}
	w.insert(person("c", "Cat", "x", ""))
	fs := s.Ended()
	if len(fs) != 2 || !strings.Contains(fs[0].String(), `"limit":"graphql_max_result_rows"`) || fs[1].String() != "event: complete\ndata:" {
		t.Fatalf("a result grown past the bound: %q", fs)
	}
	over := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/lim", body(`subscription { Person { name } }`), nil, "Accept", sse)
	fs = over.Ended()
	if len(fs) != 3 || fs[0].String() != ": connected" || !strings.Contains(fs[1].String(), `"limit":"graphql_max_result_rows"`) {
		t.Fatalf("a live query over the bound: %q", fs)
	}
}

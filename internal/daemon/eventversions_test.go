package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestEventVersionsOfChangesWithinACommit: a commit that changes a
// document twice (two fields of one GraphQL mutation, two UPDATEs of one
// SQL transaction, a delete and then an insert of one id) gives its
// version only to the document's last change in it, in events as in
// /api/history (TestVersionsOfChangesWithinACommit): the earlier change's
// state was never the document's as a read answers it, and an If-Match of
// the commit's version made from it would hold over the later change.
// Streams gave every change the commit's version: the per-document
// subscription events, _ChangeSet (subscribed and queried) and the
// CloudEvents of the REST stream and of webhooks. Now the earlier change
// has none (an empty _version; no "version" attribute) and the last the
// version a read answers now. Commits whose images pass the change feed's
// piece (64 KiB) are read and streamed in pieces, the earlier change in a
// piece of its own: they must know that the rest of the commit changes
// the document again.
func TestEventVersionsOfChangesWithinACommit(t *testing.T) {
	t.Parallel()
	hooked := make(chan []byte, 100)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNoContent)
		hooked <- b
	}))
	t.Cleanup(rcv.Close)
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookAllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	d.CreateDatabase(t, "twice", "type X { v: Int t: String }")
	big := strings.Repeat("x", 40<<10) // a change's images: 80 KiB
	var docs []string
	for _, id := range []string{"api", "sql", "re", "bigapi", "bigsql", "bigre"} {
		text := ""
		if strings.HasPrefix(id, "big") {
			text = big
		}
		docs = append(docs, fmt.Sprintf(`{"@type":"X","@id":"%s","v":1,"t":%q}`, id, text))
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/twice", "["+strings.Join(docs, ",")+"]")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/twice", fmt.Sprintf(`{"url":%q}`, rcv.URL))
	gql := func(query string) *dt.Stream {
		b, _ := json.Marshal(map[string]string{"query": query})
		st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/twice", Body: string(b), Header: []string{"Accept", "text/event-stream"}})
		st.Next() // : connected
		return st
	}
	updated := gql(`subscription { X_updated { _id v _version } }`)
	deleted := gql(`subscription { X_deleted { _id _version } }`)
	changeSets := gql(`subscription { _ChangeSet { X_added { _id v _version } X_updated { _id v _version } X_deleted { _id _version } } }`)
	rest := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/twice/X"})
	rest.Next() // : connected

	// The commits, and the changes each makes: which document, how, and
	// whether a later change of the commit changes it again.
	type change struct {
		id, op     string
		v          int // after it (0 for a delete)
		superseded bool
	}
	// mutation runs m, of $a and $b (the text of the big fields: a query
	// holds at most 64 KiB).
	mutation := func(m string) func() {
		return func() {
			var decl []string
			vars := map[string]string{}
			for _, v := range []string{"a", "b"} {
				if strings.Contains(m, "$"+v) {
					decl, vars[v] = append(decl, "$"+v+": String"), big+v
				}
			}
			q := "mutation { " + m + " }"
			if len(decl) > 0 {
				q = "mutation(" + strings.Join(decl, ", ") + ") { " + m + " }"
			}
			body, _ := json.Marshal(map[string]any{"query": q, "variables": vars})
			var a gqlAnswer
			r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/twice", body, "Content-Type", "application/json")
			if err := json.Unmarshal(r.Body, &a); err != nil || len(a.Errors) > 0 {
				t.Fatalf("mutation { %s }: %.300s", m, r.Body)
			}
		}
	}
	w := newSQLWriter(t, d, "twice")
	x := w.table("X")
	sql := func(stmts ...string) func() { return func() { sqlExec(t, w.url, stmts...) } }
	twice := func(id string) []change {
		return []change{{"X/" + id, "update", 300, true}, {"X/" + id, "update", 400, false}}
	}
	readded := func(id string) []change {
		return []change{{"X/" + id, "delete", 0, true}, {"X/" + id, "create", 500, false}}
	}
	commits := []struct {
		name    string
		write   func()
		changes []change
	}{
		{"two fields of a mutation", mutation(`a: X_update(documents: [{_id: "X/api", v: 300}]) b: X_update(documents: [{_id: "X/api", v: 400}])`), twice("api")},
		{"two UPDATEs of a SQL transaction", sql("UPDATE "+x+" SET v = 300 WHERE _id = 'X/sql'", "UPDATE "+x+" SET v = 400 WHERE _id = 'X/sql'"), twice("sql")},
		{"a delete, then an insert of the id", mutation(`a: _deleteDocuments(ids: ["X/re"]) b: X_insert(documents: [{_id: "X/re", v: 500}])`), readded("re")},
		{"two fields of a mutation, in pieces", mutation(`a: X_update(documents: [{_id: "X/bigapi", v: 300, t: $a}]) b: X_update(documents: [{_id: "X/bigapi", v: 400, t: $b}])`), twice("bigapi")},
		{"two UPDATEs of a SQL transaction, in pieces", sql("UPDATE "+x+" SET v = 300, t = t || 'a' WHERE _id = 'X/bigsql'", "UPDATE "+x+" SET v = 400, t = t || 'b' WHERE _id = 'X/bigsql'"), twice("bigsql")},
		{"a delete, then an insert of the id, in pieces", mutation(`a: _deleteDocuments(ids: ["X/bigre"]) b: X_insert(documents: [{_id: "X/bigre", v: 500, t: $a}])`), readded("bigre")},
	}
	seqs := make([]string, len(commits))
	for i, c := range commits {
		c.write()
		pos := headPositionOf(t, d, "twice", "X") // <epoch>-<seq>-2147483647-<tag>
		seqs[i] = strings.Split(pos, "-")[1]
	}
	var now struct {
		X []struct {
			ID      string `json:"_id"`
			Version string `json:"_version"`
		}
	}
	if err := json.Unmarshal([]byte(gqlData(t, d, dt.Admin(), "twice", `{ X { _id _version } }`)), &now); err != nil || len(now.X) != 6 {
		t.Fatalf("the documents now: %+v (%v)", now, err)
	}
	current := map[string]string{}
	for _, doc := range now.X {
		current[doc.ID] = doc.Version
	}
	// want returns the version an event of ch must carry.
	want := func(ch change) string {
		if ch.superseded {
			return ""
		}
		return current[ch.id]
	}

	type gqlDoc struct {
		ID      string `json:"_id"`
		V       int
		Version *string `json:"_version"`
	}
	check := func(what string, ch change, id string, v int, version *string) {
		t.Helper()
		switch {
		case id != ch.id || v != ch.v:
			t.Errorf("%s: %s v=%d, want %s v=%d", what, id, v, ch.id, ch.v)
		case version == nil:
			t.Errorf("%s: %s has no _version, want %q", what, id, want(ch))
		case *version != want(ch):
			t.Errorf("%s: %s %s v=%d: _version %q, want %q (superseded: %v)", what, id, ch.op, v, *version, want(ch), ch.superseded)
		}
	}
	for i, c := range commits {
		for _, ch := range c.changes {
			var st *dt.Stream
			switch ch.op {
			case "update":
				st = updated
			case "delete":
				st = deleted
			default:
				continue
			}
			var ev struct{ Data map[string]gqlDoc }
			data := st.Event().Field("data")
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("%s: %s", c.name, data)
			}
			doc := ev.Data["X_"+ch.op+"d"]
			check(c.name+": X_"+ch.op+"d event", ch, doc.ID, doc.V, doc.Version)
		}
		type changeSet struct {
			ChangeSet map[string][]gqlDoc `json:"_ChangeSet"`
		}
		checkSet := func(what string, set changeSet) {
			t.Helper()
			seen := map[string]int{}
			for _, ch := range c.changes {
				field := map[string]string{"create": "X_added", "update": "X_updated", "delete": "X_deleted"}[ch.op]
				docs := set.ChangeSet[field]
				if seen[field] >= len(docs) {
					t.Errorf("%s: no %s %s of %s: %+v", what, field, ch.id, c.name, set)
					continue
				}
				doc := docs[seen[field]]
				seen[field]++
				check(what+" "+field, ch, doc.ID, doc.V, doc.Version)
			}
		}
		var ev struct{ Data changeSet }
		data := changeSets.Event().Field("data")
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%s: %s", c.name, data)
		}
		checkSet(c.name+": the _ChangeSet event", ev.Data)
		var set changeSet
		q := `{ _ChangeSet(commit: "` + seqs[i] + `") { X_added { _id v _version } X_updated { _id v _version } X_deleted { _id _version } } }`
		if err := json.Unmarshal([]byte(gqlData(t, d, dt.Admin(), "twice", q)), &set); err != nil {
			t.Fatal(err)
		}
		checkSet(c.name+": _ChangeSet(commit: "+seqs[i]+")", set)

		// A CloudEvent leaves out "version" when the change has none.
		cloudEvent := func(what string, ch change, b []byte) {
			t.Helper()
			var e struct {
				Type, Subject string
				Version       *string
				Data          struct{ V int }
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("%s: %.200s: %v", what, b, err)
			}
			if e.Type != "entity."+ch.op {
				t.Errorf("%s: %s of %s, want entity.%s", what, e.Type, e.Subject, ch.op)
			}
			v := e.Data.V
			if ch.op == "delete" {
				v = 0 // the image before it
			}
			if e.Version == nil && ch.superseded {
				e.Version = new(string) // absent: no version, as wanted
			} else if e.Version != nil && *e.Version == "" {
				t.Errorf("%s: %s has \"version\":\"\"; a change without a version leaves it out", what, e.Subject)
			}
			check(what, ch, e.Subject, v, e.Version)
		}
		for _, ch := range c.changes {
			cloudEvent(c.name+": REST stream", ch, []byte(rest.Event().Field("data")))
			select {
			case b := <-hooked:
				cloudEvent(c.name+": webhook", ch, b)
			case <-time.After(dt.StreamWait):
				t.Fatalf("%s: no webhook request for %s %s", c.name, ch.op, ch.id)
			}
		}
	}
}

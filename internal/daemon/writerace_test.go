package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestWritesRacingADeleteAndRecreate: a document that exists before and
// after a commit that deletes and re-creates it (one GraphQL request,
// _deleteDocuments then X_insert, which docs/graphql.md calls sound) was
// answered as missing by a write that waited for that commit's row lock
// (a review's find): its SELECT … FOR UPDATE found the row it waited for
// deleted, and its snapshot did not show the new one. A PATCH or DELETE
// answered 404 (the DELETE deleting nothing), a PUT 404, and one with
// If-Match of the new version 412 naming no version. Now each writes
// over the re-created document.
func TestWritesRacingADeleteAndRecreate(t *testing.T) {
	t.Parallel()
	for _, w := range []struct{ name, method, path, body, ifMatch, after string }{
		{"patch", "PATCH", "/api/document/admin/rdr?id=Rvx/p", `{"age":3}`, "", `"age":3`},
		{"delete", "DELETE", "/api/document/admin/rdr?id=Rvx/p", "", "", ""},
		{"replace", "PUT", "/api/document/admin/rdr", `{"@type":"Rvx","@id":"p","name":"P3"}`, "", `"name":"P3"`},
		{"conditional", "PUT", "/api/document/admin/rdr?create=true", `{"@type":"Rvx","@id":"p","name":"P4"}`, "*", `"name":"P4"`},
	} {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			d, r := raceADeleteAndRecreate(t, w.method, w.path, w.body, w.ifMatch)
			if r.Status != 200 {
				t.Fatalf("%s of a document that existed throughout answered %d %s", w.method, r.Status, r.Body)
			}
			got := d.Do(t, dt.Admin(), "GET", "/api/document/admin/rdr?id=Rvx/p", nil)
			switch {
			case w.after == "" && got.Status != 404:
				t.Errorf("after the DELETE: %d %s", got.Status, got.Body)
			case w.after != "" && (got.Status != 200 || !strings.Contains(string(got.Body), w.after)):
				t.Errorf("after the %s: %d %s, want %s", w.method, got.Status, got.Body, w.after)
			}
		})
	}
}

// raceADeleteAndRecreate answers a write (method, path, body, If-Match) made while
// a commit that deletes and re-creates Rvx/p waits for its row, queued
// behind it.
func raceADeleteAndRecreate(t *testing.T, method, path, body, ifMatch string) (*dt.Daemon, dt.Response) {
	ctx := context.Background()
	d := dt.Start(t)
	d.CreateDatabase(t, "rdr", "type Rvx { name: String! age: Int }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/rdr", `{"@type":"Rvx","@id":"p","name":"P","age":1}`)
	var schema string
	if err := queryString(d.DatabaseURL, `SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'Rvx' AND n.nspname LIKE 'sluice_db_%'`, &schema); err != nil {
		t.Fatal(err)
	}
	holder := holdInTransaction(ctx, t, d.DatabaseURL, fmt.Sprintf(`SELECT 1 FROM %q."Rvx" WHERE _id = 'Rvx/p' FOR UPDATE`, schema))
	// n writes wait for the row, each for more than a second: past
	// batchLockWait (100 ms), so each waits alone, outside its batch.
	waiting := func(n int) func() bool {
		return func() bool {
			var got string
			err := queryString(d.DatabaseURL, `SELECT count(*)::text FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
				AND query LIKE '%Rvx%FOR UPDATE%' AND query NOT LIKE '%pg_stat_activity%' AND clock_timestamp() - query_start > interval '1 s'`, &got)
			return err == nil && got == fmt.Sprint(n)
		}
	}
	gq, _ := json.Marshal(map[string]string{"query": `mutation { _deleteDocuments(ids: ["Rvx/p"]) Rvx_insert(documents: [{_id: "p", name: "P2", age: 2}]) }`})
	recreated := make(chan dt.Response, 1)
	go func() {
		recreated <- d.Do(t, dt.Admin(), "POST", "/api/graphql/admin/rdr", gq, "Content-Type", "application/json")
	}()
	eventually.True(t, 30*time.Second, "the delete and re-create waits for the row", waiting(1))
	written := make(chan dt.Response, 1)
	go func() {
		ct := "application/json"
		if method == "PATCH" {
			ct = "application/merge-patch+json"
		}
		headers := []string{"Content-Type", ct}
		if ifMatch != "" {
			headers = append(headers, "If-Match", ifMatch)
		}
		written <- d.Do(t, dt.Admin(), method, path, body, headers...)
	}()
	eventually.True(t, 30*time.Second, "the write waits for the row too", waiting(2))
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if r := <-recreated; r.Status != 200 || strings.Contains(string(r.Body), "errors") {
		t.Fatalf("delete and re-create: %d %s", r.Status, r.Body)
	}
	return d, <-written
}

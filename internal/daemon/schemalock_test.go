package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestSQLTransactionCannotStallSchemaChanges: a Postgres role granted
// SQL access to a class table holds it in a long transaction (just a
// SELECT). A schema change, then a deletion of the database, wait for
// its lock at most lock_timeout at a time, trying again until
// statement_timeout, and then answer 503 with Retry-After (the holder's
// session named in the log, not to the client), nothing changed;
// meanwhile an API read of the class, which queues behind their pending
// ACCESS EXCLUSIVE lock, is answered. Unbounded, the change waited
// statement_timeout (30 s) and the read with it. A change whose holder
// ends while it tries again goes through.
func TestSQLTransactionCannotStallSchemaChanges(t *testing.T) {
	t.Parallel()
	// Changes try again for statement_timeout: 6 s here, for a quick 503.
	d, logs := startLogged(t, func(c *config.Config) { c.StatementTimeout = 6 * time.Second })
	d.CreateDatabase(t, "ddlheld", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/ddlheld", `{"@type":"Note","@id":"Note/a","text":"a"}`)
	w := newSQLWriter(t, d, "ddlheld")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder := holdInTransaction(ctx, t, w.url, "SELECT * FROM "+w.table("Note"))
	var sluiceRole string
	if err := queryString(d.DatabaseURL, "SELECT value FROM sluice.settings WHERE key = 'writer_role'", &sluiceRole); err != nil {
		t.Fatal(err)
	}
	const changed = "type Note { text: String n: Int }"
	for _, req := range []struct{ method, path, body, waits string }{
		{"PUT", "/api/schema/admin/ddlheld", changed, "LOCK TABLE%"},
		{"DELETE", "/api/db/admin/ddlheld", "", "DROP TABLE%"},
	} {
		answered := make(chan dt.Response, 1)
		go func() { answered <- d.Do(t, dt.Admin(), req.method, req.path, req.body) }()
		eventually.True(t, 10*time.Second, req.method+" waits for the holder's lock", func() bool {
			var n string
			err := queryString(d.DatabaseURL, fmt.Sprintf("SELECT count(*)::text FROM pg_stat_activity WHERE usename = %s AND wait_event_type = 'Lock' AND query LIKE %s",
				quote(sluiceRole), quote(req.waits)), &n)
			return err == nil && n != "0"
		})
		read := make(chan dt.Response, 1)
		go func() { read <- d.Do(t, dt.Admin(), "GET", "/api/document/admin/ddlheld?type=Note", nil) }()
		deadline := time.After(20 * time.Second)
		for range 2 {
			select {
			case r := <-read:
				if r.Status != 200 || !strings.Contains(string(r.Body), "Note/a") {
					t.Fatalf("the read while %s waited: %d %s", req.method, r.Status, r.Body)
				}
				read = nil
			case r := <-answered:
				const want = "that other transactions hold"
				if r.Status != 503 || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), want) || strings.Contains(string(r.Body), "pid ") {
					t.Fatalf("%s %s behind the SQL transaction: %d (Retry-After %q) %s; want 503 saying %q, naming no session",
						req.method, req.path, r.Status, r.Header.Get("Retry-After"), r.Body, want)
				}
				answered = nil
			case <-deadline:
				t.Fatalf("%s behind the SQL transaction, or the read behind it, still waits after 20 s", req.method)
			}
		}
	}
	// Nothing of either was applied.
	var cols string
	if err := queryString(d.DatabaseURL, fmt.Sprintf("SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
		quote(w.table("Note"))), &cols); err != nil || strings.Contains(cols, ",n") || cols == "" {
		t.Fatalf("the table's columns after the refused changes: %q (%v)", cols, err)
	}
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}

	// A holder that ends while the change tries again: the change goes
	// through (it gave up at the first lock_timeout, answering 503).
	for _, stmt := range []string{"BEGIN", "SELECT * FROM " + w.table("Note")} {
		if _, err := holder.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	const again = "the schema change waits for locks other sessions hold; trying again"
	before := len(logs.find(again))
	answered := make(chan dt.Response, 1)
	go func() { answered <- d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/ddlheld", changed) }()
	eventually.True(t, 20*time.Second, "the change tries again", func() bool { return len(logs.find(again)) > before })
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	r := <-answered
	if r.Status != 200 || !strings.Contains(string(r.Body), `"schema_version":2`) {
		t.Fatalf("the change whose holder ended while it tried again: %d %s", r.Status, r.Body)
	}
}

// TestSchemaChangeLetsGoWhileTheCounterIsHeld: another session holds the
// database's commit counter (as a prune of a long backlog does). A
// schema change, which locks the tables and then the counter, lets go of
// the tables too between its tries, so the database's reads go on while
// it waits; once the counter is free it goes through. (Its tries asked
// for the counter alone, the tables held all along: every read waited
// until the change gave up.)
func TestSchemaChangeLetsGoWhileTheCounterIsHeld(t *testing.T) {
	t.Parallel()
	d, logs := startLogged(t, func(c *config.Config) { c.StatementTimeout = 20 * time.Second })
	d.CreateDatabase(t, "counterheld", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/counterheld", `{"@type":"Note","@id":"Note/a","text":"a"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder := holdInTransaction(ctx, t, d.DatabaseURL, `SELECT FROM sluice.commit_counters WHERE db_id =
		(SELECT id FROM sluice.databases WHERE org = 'admin' AND name = 'counterheld') FOR UPDATE`)
	const again = "the schema change waits for locks other sessions hold; trying again"
	changed := make(chan dt.Response, 1)
	go func() {
		changed <- d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/counterheld", "type Note { text: String n: Int }")
	}()
	eventually.True(t, 30*time.Second, "the change tries again", func() bool { return len(logs.find(again)) > 0 })
	read := make(chan dt.Response, 1)
	go func() { read <- d.Do(t, dt.Admin(), "GET", "/api/document/admin/counterheld?type=Note", nil) }()
	select {
	case r := <-read:
		if r.Status != 200 || !strings.Contains(string(r.Body), "Note/a") {
			t.Fatalf("the read while the change waited for the counter: %d %s", r.Status, r.Body)
		}
	case r := <-changed:
		t.Fatalf("the change answered (%d %s) before a read made while it tried again: it held the tables all along", r.Status, r.Body)
	}
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if r := <-changed; r.Status != 200 {
		t.Fatalf("the change once the counter was let go: %d %s", r.Status, r.Body)
	}
}

// TestDeletionWaitsForTheSystemCounter: a database's deletion waits for
// its own locks at most lock_timeout at a time, but its commit of
// _system's document waits for _system's counter as any write does (the
// 2 s bound outlived the deletion's own steps: a prune of _system made
// the deletion answer a 409 "conflicted with a concurrent write").
func TestDeletionWaitsForTheSystemCounter(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "gone", "type Note { text: String }")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder := holdInTransaction(ctx, t, d.DatabaseURL, `SELECT FROM sluice.commit_counters WHERE db_id =
		(SELECT id FROM sluice.databases WHERE name = '_system') FOR NO KEY UPDATE`)
	deleted := make(chan dt.Response, 1)
	go func() { deleted <- d.Do(t, dt.Admin(), "DELETE", "/api/db/admin/gone", "") }()
	// The deletion's commit waits for _system's counter, for longer than
	// lock_timeout.
	eventually.True(t, 30*time.Second, "the deletion waits 3 s for _system's counter", func() bool {
		select {
		case r := <-deleted:
			t.Fatalf("the deletion answered while _system's counter was held: %d %s", r.Status, r.Body)
		default:
		}
		var n string
		err := queryString(d.DatabaseURL, `SELECT count(*)::text FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE '%commit_counters%' AND clock_timestamp() - query_start > interval '3 s'`, &n)
		return err == nil && n != "0"
	})
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if r := <-deleted; r.Status != 200 {
		t.Fatalf("the deletion once _system's counter was let go: %d %s", r.Status, r.Body)
	}
}

// holdInTransaction connects to url, begins a transaction and runs
// stmt in it, which takes the locks the test holds until it commits on
// the connection returned (closed when the test ends).
func holdInTransaction(ctx context.Context, t *testing.T, url, stmt string) *pgx.Conn {
	t.Helper()
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(context.WithoutCancel(ctx)) })
	for _, s := range []string{"BEGIN", stmt} {
		if _, err := holder.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return holder
}

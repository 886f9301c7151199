package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestSchemaChangeExpectsTheVersionPreviewed is the console's "Preview,
// then Apply (force)" raced by another admin on another replica: A
// previews dropping Product.note (one change, schema version 1); B then
// adds class Invoice and a document of it; A's apply, sent with If-Match:
// "1" (the version previewed), answers 412 naming versions 1 and 2 and
// drops nothing, Invoice's document included (without If-Match support
// it applied at version 2 and dropped class Invoice with its documents,
// a loss A never saw). A dry run with the stale version is refused alike;
// previewed again, the change applies with If-Match: "2".
func TestSchemaChangeExpectsTheVersionPreviewed(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "shop", "type Product { name: String note: String }")
	a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/shop", `{"@type":"Product","@id":"Product/p1","name":"Pen","note":"blue"}`)
	const dropNote = "type Product { name: String }"

	type preview struct {
		SchemaVersion int `json:"schema_version"`
		Changes       []struct {
			Change string `json:"change"`
		} `json:"changes"`
		ForceNeeded bool `json:"force_needed"`
	}
	dryRun := func(header ...string) preview {
		t.Helper()
		r := a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/shop?dry_run=true", dropNote, header...)
		var p preview
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
		return p
	}
	if p := dryRun(); !p.ForceNeeded || len(p.Changes) != 1 || p.SchemaVersion != 1 {
		t.Fatalf("A's preview: %+v, want one change needing force at schema version 1", p)
	}
	if r := a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/schema/admin/shop", nil); r.Header.Get("ETag") != `"1"` {
		t.Errorf("GET /api/schema's ETag: %q, want \"1\"", r.Header.Get("ETag"))
	}

	b.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/shop", "type Product { name: String note: String }\ntype Invoice { total: Int }")
	b.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/shop", `{"@type":"Invoice","@id":"Invoice/i1","total":12}`)

	r := a.Do(t, dt.Admin(), http.MethodPut, "/api/schema/admin/shop?force=true", dropNote, "If-Match", `"1"`)
	if r.Status != http.StatusPreconditionFailed || !strings.Contains(string(r.Body), "at version 2, not version 1") {
		t.Fatalf("A's apply of the version-1 preview: %d %s, want 412 naming versions 2 and 1", r.Status, r.Body)
	}
	a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/document/admin/shop?id=Invoice/i1", nil)
	if r := a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/document/admin/shop?id=Product/p1", nil); !strings.Contains(string(r.Body), `"note":"blue"`) {
		t.Errorf("Product/p1 after the refused apply: %s", r.Body)
	}
	if r := a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/db/admin/shop", nil); !strings.Contains(string(r.Body), `"schema_version":2`) {
		t.Errorf("the refused apply changed the schema: %s", r.Body)
	}
	if r := a.Do(t, dt.Admin(), http.MethodPut, "/api/schema/admin/shop?dry_run=true", dropNote, "If-Match", `"1"`); r.Status != http.StatusPreconditionFailed {
		t.Errorf("a dry run expecting version 1 at version 2: %d %s, want 412", r.Status, r.Body)
	}
	for _, tag := range []string{`W/"2"`, `2`, `"2-read"`, `*`, `"02"`} {
		if r := a.Do(t, dt.Admin(), http.MethodPut, "/api/schema/admin/shop?force=true", dropNote, "If-Match", tag); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "not a schema version") {
			t.Errorf("If-Match: %s: %d %s, want 400", tag, r.Status, r.Body)
		}
	}

	if p := dryRun("If-Match", `"2"`); len(p.Changes) != 2 || p.SchemaVersion != 2 {
		t.Fatalf("A's second preview: %+v, want two changes at schema version 2", p)
	}
	r = a.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/shop?force=true", dropNote, "If-Match", `"2"`)
	if !strings.Contains(string(r.Body), `"schema_version":3`) || r.Header.Get("ETag") != `"3"` {
		t.Fatalf("A's apply of the version-2 preview: %s (ETag %q), want version 3", r.Body, r.Header.Get("ETag"))
	}
	if r := a.Do(t, dt.Admin(), http.MethodGet, "/api/document/admin/shop?id=Invoice/i1", nil); r.Status == http.StatusOK {
		t.Errorf("Invoice/i1 after the change that drops its class: %s", r.Body)
	}
}

// TestSchemaExpectationCheckedUnderTheLock: a schema change that
// expects version 1 reads version 1, then waits for the database's
// counter row, which another session holds while it moves the schema
// version on (what another replica's change commits, with no table of
// this database changed). Once it has the lock it finds version 2 and
// answers 412 naming it, changing nothing; without the check under the
// lock it answered 409 "changed concurrently; retry".
func TestSchemaExpectationCheckedUnderTheLock(t *testing.T) {
	t.Parallel()
	d, logs := startLogged(t, func(c *config.Config) { c.StatementTimeout = 20 * time.Second })
	d.CreateDatabase(t, "moved", "type Note { text: String }")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const db = `(SELECT id FROM sluice.databases WHERE org = 'admin' AND name = 'moved')`
	holder := holdInTransaction(ctx, t, d.DatabaseURL, `SELECT FROM sluice.commit_counters WHERE db_id = `+db+` FOR UPDATE`)
	changed := make(chan dt.Response, 1)
	go func() {
		changed <- d.Do(t, dt.Admin(), http.MethodPut, "/api/schema/admin/moved?force=true", "type Note { n: Int }", "If-Match", `"1"`)
	}()
	const again = "the schema change waits for locks other sessions hold; trying again"
	eventually.True(t, 30*time.Second, "the change waits for the counter", func() bool { return len(logs.find(again)) > 0 })
	for _, s := range []string{`UPDATE sluice.commit_counters SET schema_version = 2 WHERE db_id = ` + db, "COMMIT"} {
		if _, err := holder.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if r := <-changed; r.Status != http.StatusPreconditionFailed || !strings.Contains(string(r.Body), "at version 2, not version 1") {
		t.Fatalf("the change that expected version 1 and locked version 2: %d %s, want 412", r.Status, r.Body)
	}
}

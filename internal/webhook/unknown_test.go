package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestWebhookFilterOnAValueSluiceCannotRead: a row holding a Float NaN
// (written in SQL as Sluice's own role, the checks skipped, as rows from
// before the checks may) is deleted in SQL: the change's image leaves the
// NaN out, though a read compares it (NaN > 0). A webhook of deletes
// filtered by f > 0 cannot tell whether the event matches: it is paused
// failing before it, never skipping it, its status naming f; before, it
// took f for null, skipped the event and went on. A webhook filtered by
// tag, which reads, is sent the event.
func TestWebhookFilterOnAValueSluiceCannotRead(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	a := dt.Start(t, fastRetries)
	a.CreateDatabase(t, "nanhook", "type P { f: Float tag: String }")
	docs := "/api/document/admin/nanhook"
	a.MustDo(t, 200, dt.Admin(), "POST", docs, `[{"@type":"P","@id":"a","f":1,"tag":"x"},{"@type":"P","@id":"b","f":2,"tag":"y"}]`)
	var info struct {
		Schema string `json:"postgres_schema"`
	}
	if err := json.Unmarshal(a.MustDo(t, 200, dt.Admin(), "GET", "/api/db/admin/nanhook", nil).Body, &info); err != nil || info.Schema == "" {
		t.Fatalf("no postgres_schema (%v)", err)
	}
	table := pgx.Identifier{info.Schema, "P"}.Sanitize()
	sql := func(stmts ...string) {
		t.Helper()
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, a.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, s := range stmts {
				if _, err := tx.Exec(ctx, s); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	sql("SET LOCAL sluice.writer = 'on'", "UPDATE "+table+" SET f = 'NaN' WHERE _id = 'P/a'")

	onF := createHook(t, a, r, "nanhook", "/f", fmt.Sprintf(`{"url":%q,"classes":["P"],"ops":["delete"],"filter":{"f":{"gt":0}}}`, r.url("/f")))
	createHook(t, a, r, "nanhook", "/tag", fmt.Sprintf(`{"url":%q,"classes":["P"],"ops":["delete"],"filter":{"tag":{"eq":"x"}}}`, r.url("/tag")))
	sql("DELETE FROM " + table + " WHERE _id = 'P/a'") // recorded as a commit: not Sluice's writer
	// The API deletes P/b (f 2 > 0): a filter taking the unknown f for
	// missing would go on to it.
	a.MustDo(t, 200, dt.Admin(), "DELETE", docs+"?id=P/b", nil)

	d := r.next(30 * time.Second)
	if len(d.Events) != 1 || d.Events[0].Subject != "P/a" || !strings.HasSuffix(d.Path, "/tag") {
		t.Fatalf("first delivery: %s %+v, want P/a's delete to /tag", d.Path, d.Events)
	}
	st := waitStatus(t, a, "nanhook", onF.ID, 30*time.Second, func(m map[string]any) bool { return m["state"] != "active" })
	if msg, _ := st["status_message"].(string); st["state"] != "failing" || !strings.Contains(msg, "the filter tests f, whose value in this change's document Sluice cannot read") {
		t.Fatalf("the webhook filtered by f: %v, want failing, naming f", st)
	}
	r.none() // nothing to /f: neither P/a nor P/b
}

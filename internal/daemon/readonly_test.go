package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestReadOnlyPostgresAnswers503: when Postgres takes no writes
// (default_transaction_read_only on, as managed services set it when the
// disk is nearly full), a write answers 503 api:Unavailable with
// Retry-After and a message that says why, not 500 "internal error";
// reads go on, and so does /readyz.
func TestReadOnlyPostgresAnswers503(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "ro", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/ro", `{"@type":"Note","@id":"a","text":"a"}`)

	ctx := context.Background()
	pg, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	var name string
	if err := pg.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	// The setting applies to the sessions that start after it: the
	// daemon's are ended, and it opens new ones.
	for _, sql := range []string{
		"ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " SET default_transaction_read_only = on",
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
	} {
		if _, err := pg.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	// The first requests may meet a connection that was ended (503, the
	// server unavailable): the answer that counts is the read-only one.
	var last dt.Response
	eventually.Nil(t, dt.StreamWait, "a write refused as read-only", func() error {
		last = d.Do(t, dt.Admin(), "POST", "/api/document/admin/ro", `{"@type":"Note","@id":"b","text":"b"}`)
		if !strings.Contains(string(last.Body), "read-only") {
			return fmt.Errorf("%d %s", last.Status, last.Body)
		}
		return nil
	})
	var e struct {
		Message string `json:"api:message"`
	}
	if err := json.Unmarshal(last.Body, &e); err != nil {
		t.Fatal(err)
	}
	if last.Status != 503 || last.Header.Get("Retry-After") == "" || !strings.Contains(e.Message, "default_transaction_read_only") {
		t.Errorf("a write to a read-only Postgres: %d Retry-After %q %s", last.Status, last.Header.Get("Retry-After"), last.Body)
	}
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/ro?type=Note", nil); !strings.Contains(string(r.Body), `"Note/a"`) {
		t.Errorf("a read of a read-only Postgres: %s", r.Body)
	}
	eventually.True(t, dt.StreamWait, "/readyz answers 200", func() bool { return d.Do(t, dt.NoAuth(), "GET", "/readyz", nil).Status == 200 })
}

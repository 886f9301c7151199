package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestOlderReplicaCaptureIsRepaired: during a rolling upgrade an older
// replica (simulated here as it acts: it makes a database's capture
// triggers again from its own, older spec, without the ref: item of a
// reference field, and records them as "capture/1") lets a role granted
// DML store a reference to no document. A running daemon makes the
// triggers again within its repair period, without a restart, and the
// same write is refused again.
func TestOlderReplicaCaptureIsRepaired(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "people", "type Person { name: String friend: Person }")
	w := newSQLWriter(t, d, "people")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	trigger := func() string {
		t.Helper()
		var def string
		if err := conn.QueryRow(ctx, `SELECT pg_get_triggerdef(oid) FROM pg_trigger
			WHERE tgrelid = $1::regclass AND tgname = 'sluice_capture'`, w.table("Person")).Scan(&def); err != nil {
			t.Fatal(err)
		}
		return def
	}
	garbage := func() error { return sqlTx(w.url, "INSERT INTO "+w.table("Person")+" (friend) VALUES ('garbage')") }
	if err := garbage(); err == nil {
		t.Fatal("a SQL write of a reference to no Person passed the daemon's triggers")
	}

	// What an older binary does at start: its triggers, its record.
	def := trigger()
	if !strings.Contains(def, ", 'ref:friend:Person')") {
		t.Fatalf("trigger without ref: %s", def)
	}
	older := strings.Replace(strings.Replace(def, ", 'ref:friend:Person')", ")", 1), "CREATE TRIGGER", "CREATE OR REPLACE TRIGGER", 1)
	// As Sluice's role does (sluice.writer): its event trigger refuses
	// other sessions' triggers on class tables.
	sqlExec(t, d.DatabaseURL, "SET LOCAL sluice.writer = on", older, `UPDATE sluice.databases
		SET capture = replace(regexp_replace(capture, '^capture/[0-9]+ ', 'capture/1 '), ' ref:friend:Person', '')
		WHERE capture LIKE '%ref:friend:Person%'`)
	if err := garbage(); err != nil {
		t.Fatalf("the older triggers refused a reference to no Person: %v", err)
	}
	eventually.True(t, 30*time.Second, "the daemon makes the capture triggers again", func() bool {
		return strings.Contains(trigger(), "'ref:friend:Person'")
	})
	if err := garbage(); err == nil {
		t.Fatal("a SQL write of a reference to no Person passed the repaired triggers")
	}
}

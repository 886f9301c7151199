package daemon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestSQLBulkWriteNumbersChangesFromTheEnd: the capture trigger numbers
// each row a SQL statement writes after the commit's changes so far
// (sluice.next_change). It took max(idx) over the commit's change rows,
// which Postgres reads whole when its statistics say a commit holds about
// one change (the usual log: writes of one document), so a statement of n
// rows read n²/2 index entries: a 200,000-row INSERT ran for more than 18
// minutes. The next number is now read from the end of the commit's index
// range, one entry a row. The index entries the statement reads are
// counted from Postgres's statistics of the change rows' index.
func TestSQLBulkWriteNumbersChangesFromTheEnd(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "bulk", "type Note { text: String }")
	// A log of commits of one change each, analyzed: what makes Postgres
	// expect one change row per commit.
	for i := range 1500 {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/bulk", fmt.Sprintf(`{"@type":"Note","@id":"n%d","text":"one"}`, i))
	}
	sqlExec(t, d.DatabaseURL, "ANALYZE sluice.changes")
	w := newSQLWriter(t, d, "bulk")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	read := func() int64 {
		t.Helper()
		conn, err := pgx.Connect(ctx, d.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var n int64
		if err := conn.QueryRow(ctx, "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE schemaname = 'sluice' AND indexrelname = 'changes_pkey'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := read()
	const rows = 3000
	conn, err := pgx.Connect(ctx, w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s (_id, text) SELECT 'Note/b' || g, 'bulk' FROM generate_series(1, %d) g", w.table("Note"), rows)); err != nil {
		t.Fatal(err)
	}
	// The writer's statistics reach the others when its backend next goes
	// idle, at most once a second unless forced: forced here, and flushed
	// before the answer to this statement.
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	// The daemon reads the commit's change rows too (its feed): a few
	// entries a row at most, against rows²/2 = 4,500,000 before.
	if got := read() - before; got > 20*rows {
		t.Fatalf("a %d-row INSERT read %d entries of the change rows' index, want at most %d", rows, got, 20*rows)
	}
	// One commit numbering its changes 0 to rows-1.
	var n, first, last int
	admin, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if err := admin.QueryRow(ctx, `SELECT count(DISTINCT idx), min(idx), max(idx) FROM sluice.changes
		WHERE commit_uid = (SELECT max(uid) FROM sluice.commits)`).Scan(&n, &first, &last); err != nil {
		t.Fatal(err)
	}
	if n != rows || first != 0 || last != rows-1 {
		t.Fatalf("the INSERT's commit holds %d changes numbered %d to %d, want %d numbered 0 to %d", n, first, last, rows, rows-1)
	}
	checkCaptureConsistent(t, d.DatabaseURL)
}

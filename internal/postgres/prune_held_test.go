package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestPruneSkipsAHeldDatabase: another session holds one database's
// counter row, which its prune locks, for as long as it likes (as a SQL
// role's transaction that had its commit written early does). The prune
// waits for it at most lock_timeout, then skips that database for this
// run, with an error naming it and the session it waited for; the
// databases after it are pruned in the same run. Without the bound, the
// prune (statement_timeout off) waited for as long as the session held
// the row, and the databases after it with it.
func TestPruneSkipsAHeldDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := migratedDB(ctx, t)
	s, err := schema.Parse("type Note { text: String! }")
	if err != nil {
		t.Fatal(err)
	}
	// Pruned in the order of their ids: a, then b (held), then c.
	a := &sluice.Database{Org: "o", Name: "a"}
	b := &sluice.Database{Org: "o", Name: "b"}
	c := &sluice.Database{Org: "o", Name: "c"}
	createDatabases(t, db, s, a, b, c)
	for _, d := range []*sluice.Database{a, b, c} {
		commitN(t, db, d, s, 3)
	}

	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // ends with the connection
	if _, err := tx.Exec(ctx, "SELECT 1 FROM sluice.commit_counters WHERE db_id = $1 FOR UPDATE", b.ID); err != nil {
		t.Fatal(err)
	}

	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil)
		done <- result{n, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Prune still waits for b's counter row after 15 s")
	}
	holderPid := fmt.Sprintf("pid %d ", holder.PgConn().PID())
	if r.err == nil || !strings.Contains(r.err.Error(), "database o/b: skipped for this run") || !strings.Contains(r.err.Error(), holderPid) {
		t.Errorf("Prune's error %v, want one skipping o/b and naming %q", r.err, holderPid)
	}
	if r.n != 2+2 {
		t.Errorf("pruned %d commits, want 4 (2 of a, 2 of c)", r.n)
	}
	for _, w := range []struct {
		d      *sluice.Database
		pruned int64
	}{{a, 2}, {b, 0}, {c, 2}} {
		h, err := db.History(ctx, w.d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if h.PrunedSeq != w.pruned {
			t.Errorf("%s pruned through %d, want %d", w.d.Name, h.PrunedSeq, w.pruned)
		}
	}

	// Once the holder ends, the next run prunes b.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil); err != nil || n != 2 {
		t.Fatalf("the next run pruned %d commits (%v), want b's 2", n, err)
	}
}

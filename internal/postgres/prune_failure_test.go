package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestPruneGoesOnPastAFailingDatabase: a database whose pruning fails
// (here another session holds its counter row, and the prune waiting for
// it is cancelled, as an operator or a lock_timeout would) does not stop
// the others: the databases after it are pruned in the same run, and the
// error names the one that failed.
func TestPruneGoesOnPastAFailingDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := migratedDB(ctx, t)
	s, err := schema.Parse("type Note { text: String! }")
	if err != nil {
		t.Fatal(err)
	}
	// Pruned in the order of their ids: a, then b (which fails), then c.
	a := &sluice.Database{Org: "o", Name: "a"}
	b := &sluice.Database{Org: "o", Name: "b"}
	c := &sluice.Database{Org: "o", Name: "c"}
	_, err = db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, "o"); err != nil {
			return err
		}
		for _, d := range []*sluice.Database{a, b, c} {
			if err := tx.CreateDatabase(ctx, d, s); err != nil {
				return err
			}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*sluice.Database{a, b, c} {
		commitN(t, db, d, s, 3)
	}

	// Another session holds b's counter row, which its prune locks.
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
	watcher, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(ctx)
	var pid int32
	eventually.True(t, 20*time.Second, "the prune of b waits for its counter row", func() bool {
		err := watcher.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%commit_counters%'`).Scan(&pid)
		return err == nil
	})
	if _, err := watcher.Exec(ctx, "SELECT pg_cancel_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Prune did not return once b's prune was cancelled")
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "database o/b: ") {
		t.Errorf("Prune's error %v, want one naming o/b", r.err)
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
}

package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestPruneCommitsEachBatch: a database's backlog is pruned in
// transactions of a bounded size, each committed on its own. Every one of
// them holds the database's counter row, which each write of the
// database updates: pruned in one transaction, a backlog of millions of
// commits (the first prune after the retention was shortened, or after
// a long-lived subscriber left) held every write of the database for as
// long as its DELETE ran, with statement_timeout off. Here the third
// batch cannot delete (a session holds one of its change rows) and
// gives up at lock_timeout: the two batches before it stay pruned, and
// the counter says so.
func TestPruneCommitsEachBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	// Each commit of commitN is two rows (itself and its one change):
	// two commits a batch.
	db, err := postgres.Open(ctx, url, slog.New(slog.DiscardHandler), postgres.PruneBatchForTest(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := schema.Parse("type Note { text: String! }")
	if err != nil {
		t.Fatal(err)
	}
	d := &sluice.Database{Org: "o", Name: "a"}
	createDatabases(t, db, s, d)
	commitN(t, db, d, s, 7) // commits 1 to 7; 7, the newest, is kept

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
	if _, err := tx.Exec(ctx, `SELECT 1 FROM sluice.changes WHERE commit_uid =
		(SELECT uid FROM sluice.commits WHERE db_id = $1 AND seq = 5) FOR KEY SHARE`, d.ID); err != nil {
		t.Fatal(err)
	}

	n, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil)
	if err == nil || !strings.Contains(err.Error(), "database o/a: skipped for this run") {
		t.Errorf("Prune's error %v, want one skipping o/a", err)
	}
	if n != 4 {
		t.Errorf("pruned %d commits, want 4 (the first two batches)", n)
	}
	h, err := db.History(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h.PrunedSeq != 4 {
		t.Errorf("pruned through %d, want 4", h.PrunedSeq)
	}
	left, err := db.CommitsAfter(ctx, d, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, c := range left {
		seqs = append(seqs, c.Seq)
	}
	if len(seqs) != 3 || seqs[0] != 5 {
		t.Errorf("commits %v left, want 5 to 7", seqs)
	}

	// Once the holder ends, the next run prunes the rest but the newest.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil); err != nil || n != 2 {
		t.Fatalf("the next run pruned %d commits (%v), want 2", n, err)
	}
	if h, err := db.History(ctx, d.ID); err != nil || h.PrunedSeq != 6 {
		t.Fatalf("pruned through %d (%v), want 6", h.PrunedSeq, err)
	}
}

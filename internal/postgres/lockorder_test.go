package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestGroupCommitDoesNotWaitForALockHeldElsewhere: another transaction
// holds Note/c (a large write still reading its body, another process's
// batch, a SQL client); a grouped write of Note/c waits for it, and a
// grouped write of Note/z, queued meanwhile, commits while Note/c is
// still held. The write of Note/c led a batch that waited in Postgres for
// it, and every grouped write of the database queued behind. It commits
// once Note/c is free, after Note/z.
func TestGroupCommitDoesNotWaitForALockHeldElsewhere(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	// A statement_timeout past the test's deadline: the default, 30 s, is
	// the deadline too, and would end the wait as the test gives up.
	db, d, s, hook := openNotesAt(t, pgtest.NewDatabase(t), StatementTimeout(4*wait))
	insertNotes(t, db, d, s, "c", "z")
	holder, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(ctx, fmt.Sprintf("SELECT FROM %s WHERE _id = 'Note/c' FOR UPDATE", classTable(d, "Note"))); err != nil {
		t.Fatal(err)
	}
	replace := func(key string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Group: true, Meta: CommitMeta{Message: key},
				Documents: func(ctx context.Context, w *Writer) error { return w.Replace(ctx, notes(key), false) }})
			done <- err
		}()
		return done
	}
	c := replace("c")
	eventually.True(t, wait, "the write of Note/c waits for it", func() bool {
		var n int
		err := db.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
		return err == nil && n == 1
	})
	z := replace("z")
	select {
	case err := <-z:
		if err != nil {
			t.Fatalf("the write of Note/z: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("the write of Note/z waited for Note/c, held by another transaction")
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c:
		if err != nil {
			t.Fatalf("the write of Note/c: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("the write of Note/c did not commit once Note/c was free")
	}
	var got []string
	hook.mu.Lock()
	for _, c := range hook.commits {
		got = append(got, c.Message)
	}
	hook.mu.Unlock()
	if len(got) != 4 || got[2] != "z" || got[3] != "c" {
		t.Fatalf("commits %q, want the two inserts, then z, then c", got)
	}
}

package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// TestOneStatementSnapshotIsConsistent: a read of one statement, which
// reads the commit counter in the statement itself instead of a
// transaction of its own, answers exactly the position of what it read,
// while commits land concurrently (each commit adds one document, so a
// read at commit k sees k documents), keeps its statement's order, and
// answers position 0 of an empty result; a read prepared for another
// schema version is refused, and one of a database that is gone fails.
func TestOneStatementSnapshotIsConsistent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := noteDatabase(t, db, "one")
	read := func() ([]postgres.QueryDoc, sluice.Position, error) {
		snap := db.Snapshot(d)
		snap.OneStatement()
		defer snap.Close()
		docs, err := db.QueryDocuments(postgres.WithSnapshot(ctx, snap), d, s,
			postgres.DocQuery{Class: "Note", Classes: []string{"Note"}, Limit: -1, Fields: []string{"text"}})
		pos, ok := snap.Position()
		if err == nil && !ok {
			t.Fatal("a read that answered has no position")
		}
		return docs, pos, err
	}
	docs, pos, err := read()
	if err != nil || len(docs) != 0 || pos.Seq != 0 || pos.Epoch != d.Epoch {
		t.Fatalf("empty: %d documents at %v, %v", len(docs), pos, err)
	}

	const commits = 60
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range commits {
			doc := &sluice.Document{ID: fmt.Sprintf("Note/%03d", i), Type: "Note", Fields: map[string]any{"text": "x"}}
			if _, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
				Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Insert(ctx, []*sluice.Document{doc}) }}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for {
		docs, pos, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(docs)) != pos.Seq {
			t.Fatalf("a read at commit %d saw %d documents", pos.Seq, len(docs))
		}
		ids := make([]string, len(docs))
		for i, qd := range docs {
			ids[i] = qd.Doc.ID
		}
		if !slices.IsSorted(ids) {
			t.Fatalf("documents out of the statement's order: %v", ids)
		}
		if pos.Seq == commits {
			break
		}
	}
	wg.Wait()

	stale := *d
	stale.SchemaVersion++
	snap := db.Snapshot(&stale)
	snap.OneStatement()
	_, err = db.QueryDocuments(postgres.WithSnapshot(ctx, snap), &stale, s,
		postgres.DocQuery{Class: "Note", Classes: []string{"Note"}, Limit: -1, Fields: []string{"text"}})
	snap.Close()
	if !errors.Is(err, postgres.ErrSchemaChanged) {
		t.Fatalf("a read prepared for another schema version: %v", err)
	}

	gone := *d
	gone.ID = -1
	snap = db.Snapshot(&gone)
	snap.OneStatement()
	_, err = db.QueryDocuments(postgres.WithSnapshot(ctx, snap), &gone, s,
		postgres.DocQuery{Class: "Note", Classes: []string{"Note"}, Limit: -1, Fields: []string{"text"}})
	snap.Close()
	// Its tables are gone too: the statement fails, as a read racing a
	// deletion does (before a transaction, the counter's read failed).
	if c := sluice.ErrorCode(err); c != sluice.CodeNotFound && c != sluice.CodeConflict {
		t.Fatalf("a database that is gone: %v", err)
	}
}

package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/pgtest"
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

// readPosition reads database d's notes in a snapshot of one statement
// (its counter read in the statement) or of a transaction (its counter
// read first), and returns the position the snapshot reflects.
func readPosition(t *testing.T, db *postgres.DB, d *sluice.Database, s *sluice.Schema, one bool) sluice.Position {
	t.Helper()
	ctx := context.Background()
	snap := db.Snapshot(d)
	if one {
		snap.OneStatement()
	}
	defer snap.Close()
	if _, err := db.QueryDocuments(postgres.WithSnapshot(ctx, snap), d, s,
		postgres.DocQuery{Class: "Note", Classes: []string{"Note"}, Limit: -1, Fields: []string{"text"}}); err != nil {
		t.Fatal(err)
	}
	pos, ok := snap.Position()
	if !ok {
		t.Fatal("a read that answered has no position")
	}
	return pos
}

// TestSnapshotPositionIsTagged: the position a snapshot reflects carries
// the tag of its newest commit (the position of the commit's end, as the
// write answered it), whether the snapshot is of one statement or a
// transaction, read from the counter row, which the commit's statement
// stamps; before any commit it has none, nor after a commit that left
// the row unstamped (an older binary's, running beside this one). Before,
// a read's position was numbers alone, and a resume from it after a
// failover that replaced the commit went on unchecked.
func TestSnapshotPositionIsTagged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := noteDatabase(t, db, "tagged")
	for _, one := range []bool{true, false} {
		if pos := readPosition(t, db, d, s, one); pos.Seq != 0 || pos.Tag != "" {
			t.Fatalf("before any commit (one statement: %v): %v, want commit 0 without a tag", one, pos)
		}
	}
	c, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			return w.Insert(ctx, []*sluice.Document{{ID: "Note/a", Type: "Note", Fields: map[string]any{"text": "x"}}})
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, one := range []bool{true, false} {
		if pos := readPosition(t, db, d, s, one); pos != c.End() || pos.Tag == "" {
			t.Fatalf("after commit %d (one statement: %v): %v, want %v, tagged", c.Seq, one, pos, c.End())
		}
	}
	// A binary of earlier migrations advances the counter alone.
	if err := db.ExecDBForTest(ctx, "UPDATE sluice.commit_counters SET last_seq = last_seq + 1 WHERE db_id = $1", d.ID); err != nil {
		t.Fatal(err)
	}
	for _, one := range []bool{true, false} {
		if pos := readPosition(t, db, d, s, one); pos.Seq != 2 || pos.Tag != "" {
			t.Fatalf("after an unstamped commit 2 (one statement: %v): %v, want commit 2 without a tag", one, pos)
		}
	}
}

// TestSnapshotPositionOfASQLWriteIsTagged: a commit of a SQL write
// (another role's transaction, committed to the log by the capture
// trigger) stamps the counter row as Sluice's own commits do, so the
// position a read after it reflects is the commit's end as the log reads
// it, tagged, in both snapshot forms; and after an API commit, as that
// one's. Before, a SQL write's commit left the stamp of the commit
// before it.
func TestSnapshotPositionOfASQLWriteIsTagged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dbURL := migratedDB(ctx, t)
	d, s := noteDatabase(t, db, "sqltagged")
	tbl := "sluice_db_" + strconv.FormatInt(d.ID, 10) + `."Note"`
	sqlWrite := func() {
		t.Helper()
		if err := pgxExec(ctx, dbURL, "INSERT INTO "+tbl+" (text) VALUES ('a')", "INSERT INTO "+tbl+" (text) VALUES ('b')"); err != nil {
			t.Fatal(err)
		}
	}
	check := func(seq int64) {
		t.Helper()
		cs, _, err := db.ReadLog(ctx, d, sluice.Position{Epoch: d.Epoch, Seq: seq - 1, Index: sluice.WholeCommit}, sluice.Stamp{}, 1, 1<<20)
		if err != nil || len(cs) != 1 || cs[0].Seq != seq {
			t.Fatalf("the log after commit %d: %d commits, %v", seq-1, len(cs), err)
		}
		for _, one := range []bool{true, false} {
			if pos := readPosition(t, db, d, s, one); pos != cs[0].End() || pos.Tag == "" {
				t.Fatalf("after commit %d by %s (one statement: %v): %v, want %v, tagged", seq, cs[0].User, one, pos, cs[0].End())
			}
		}
	}
	sqlWrite()
	check(1)
	if _, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			return w.Insert(ctx, []*sluice.Document{{ID: "Note/api", Type: "Note", Fields: map[string]any{"text": "x"}}})
		}}); err != nil {
		t.Fatal(err)
	}
	check(2)
	sqlWrite()
	check(3)
}

// TestMigrationStampsCounters: migration 34 copies the stamp of each
// database's newest commit to its counter row, so that a read right
// after the upgrade reflects the commit's tagged position; a database
// without commits stays without one.
func TestMigrationStampsCounters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	db, err := postgres.Open(ctx, dbURL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.MigrateToForTest(ctx, 33); err != nil {
		t.Fatal(err)
	}
	d, s := noteDatabase(t, db, "stamped")
	empty := &sluice.Database{Org: "o", Name: "empty"}
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.CreateDatabase(ctx, empty, s, postgres.Creator{})
	}}); err != nil {
		t.Fatal(err)
	}
	tbl := "sluice_db_" + strconv.FormatInt(d.ID, 10) + `."Note"`
	for _, text := range []string{"a", "b"} {
		if err := pgxExec(ctx, dbURL, "INSERT INTO "+tbl+" (text) VALUES ('"+text+"')"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cs, _, err := db.ReadLog(ctx, d, sluice.Position{Epoch: d.Epoch, Seq: 1, Index: sluice.WholeCommit}, sluice.Stamp{}, 1, 1<<20)
	if err != nil || len(cs) != 1 || cs[0].Seq != 2 {
		t.Fatalf("the log after commit 1: %d commits, %v", len(cs), err)
	}
	for _, one := range []bool{true, false} {
		if pos := readPosition(t, db, d, s, one); pos != cs[0].End() || pos.Tag == "" {
			t.Fatalf("after the upgrade (one statement: %v): %v, want %v, tagged", one, pos, cs[0].End())
		}
		if pos := readPosition(t, db, empty, s, one); pos.Seq != 0 || pos.Tag != "" {
			t.Fatalf("a database without commits after the upgrade (one statement: %v): %v, want commit 0 without a tag", one, pos)
		}
	}
}

package postgres_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// TestDocumentChangeAfterReadsOnRunByRun: the first change of a document
// at or after a position is found however many runs of the log lie
// before it, from the change the position names on, whether the log's
// row lists its ids (an update) or not (an insertion); none is found
// when the log holds none, after reading it to its newest commit.
func TestDocumentChangeAfterReadsOnRunByRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Each commit of commitN is one row of the log: runs of two commits.
	db, err := postgres.Open(ctx, pgtest.NewDatabase(t), slog.New(slog.DiscardHandler), postgres.HistoryScanRowsForTest(2))
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
	commitN(t, db, d, s, 7) // commits 1 to 7 add Note/na to Note/ng
	if _, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			return w.Replace(ctx, []*sluice.Document{{ID: "Note/nb", Type: "Note", Fields: map[string]any{"text": "y"}}}, false)
		}}); err != nil { // commit 8 updates Note/nb
		t.Fatal(err)
	}
	at := func(seq int64, index int) sluice.Position {
		return sluice.Position{Epoch: d.Epoch, Seq: seq, Index: index}
	}
	for _, c := range []struct {
		id    string
		from  sluice.Position
		op    sluice.Op
		found bool
	}{
		{"Note/na", at(1, 0), sluice.OpAdded, true},
		{"Note/na", at(1, sluice.WholeCommit), 0, false},
		{"Note/ne", at(1, sluice.WholeCommit), sluice.OpAdded, true},
		{"Note/nb", at(2, sluice.WholeCommit), sluice.OpUpdated, true},
		{"Note/nz", at(0, sluice.WholeCommit), 0, false},
	} {
		op, found, err := db.DocumentChangeAfter(ctx, d, c.id, c.from)
		if err != nil || op != c.op || found != c.found {
			t.Errorf("%s after %s: %v %v %v, want %v %v", c.id, c.from, op, found, err, c.op, c.found)
		}
	}
}

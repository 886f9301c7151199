package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// bigCommit makes commit 1 of 3 small ones, then commit 2 of n documents
// in rows of 250, then commit 3 of one document.
func bigCommit(t *testing.T, db *postgres.DB, n int) *sluice.Database {
	t.Helper()
	ctx := context.Background()
	d, s := noteDatabase(t, db, "big")
	write := func(ids []string) {
		_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
			Documents: func(ctx context.Context, w *postgres.Writer) error {
				for start := 0; start < len(ids); start += 250 {
					var docs []*sluice.Document
					for _, id := range ids[start:min(start+250, len(ids))] {
						docs = append(docs, &sluice.Document{ID: id, Type: "Note", Fields: map[string]any{"text": "text of " + id}})
					}
					if err := w.Insert(ctx, docs); err != nil {
						return err
					}
				}
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
	write([]string{"Note/a", "Note/b", "Note/c"})
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("Note/%05d", i))
	}
	write(ids)
	write([]string{"Note/z"})
	return d
}

// TestReadLogInPieces reads a large commit in pieces of a bounded size,
// from the start and from positions inside it: every change comes once, in
// order, and a piece is marked Partial exactly when more of its commit
// follows.
func TestReadLogInPieces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d := bigCommit(t, db, 1000)
	for _, from := range []sluice.Position{
		{Seq: 0, Index: sluice.WholeCommit},
		{Seq: 1, Index: 1},
		{Seq: 2, Index: 0},
		{Seq: 2, Index: 249},
		{Seq: 2, Index: 250},
		{Seq: 2, Index: 777},
		{Seq: 2, Index: 999},
	} {
		var got []sluice.Position
		after := from
		reads := 0
		for {
			cs, more, err := db.ReadLog(ctx, d, after, sluice.Stamp{}, 256, 16<<10)
			if err != nil {
				t.Fatal(err)
			}
			reads++
			var size int
			for i, c := range cs {
				if c.AccessVersion < 0 || c.NumChanges == 0 {
					t.Fatalf("commit %+v", c)
				}
				if c.Partial != (c.Changes[len(c.Changes)-1].Index < c.NumChanges-1) || c.Partial && i != len(cs)-1 {
					t.Fatalf("from %v: commit %d piece %d..%d of %d marked Partial %v", from, c.Seq, c.Changes[0].Index, c.Changes[len(c.Changes)-1].Index, c.NumChanges, c.Partial)
				}
				for _, ch := range c.Changes {
					got = append(got, c.Position(ch.Index))
					size += len(ch.After)
				}
				after = c.Position(sluice.WholeCommit)
				if c.Partial {
					after = c.Position(c.Changes[len(c.Changes)-1].Index)
				}
			}
			if size > 16<<10+250*64 {
				t.Fatalf("a read of %d bytes of images, budget 16 KiB (plus one row)", size)
			}
			if !more {
				break
			}
		}
		// Every change after from, once, in order.
		var want []sluice.Position
		for _, c := range []struct {
			seq int64
			n   int
		}{{1, 3}, {2, 1000}, {3, 1}} {
			for i := range c.n {
				p := sluice.Position{Epoch: d.Epoch, Seq: c.seq, Index: i}
				if from.Index == sluice.WholeCommit && p.Seq > from.Seq || from.Index != sluice.WholeCommit && from.Less(p) {
					want = append(want, p)
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("from %v: %d changes in %d reads, want %d", from, len(got), reads, len(want))
		}
		for i := range want {
			if got[i].Untagged() != want[i] {
				t.Fatalf("from %v: change %d is %v, want %v", from, i, got[i], want[i])
			}
		}
		if from.Seq <= 1 && reads < 4 {
			t.Fatalf("from %v: the 1000-document commit came in %d reads of at most 16 KiB", from, reads)
		}
	}
}

// TestReadLogWithinBoundsTheFirstRow: ReadLogWithin reads no change row
// past its bound, the first one included: when the first does not fit it
// reads nothing and says the bytes it needs (from the start of the log
// and from inside a commit, where nothing read is not a pruned commit);
// given that many, it reads it. After the newest commit it needs nothing.
func TestReadLogWithinBoundsTheFirstRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d := bigCommit(t, db, 1000)
	for _, from := range []sluice.Position{{Seq: 1, Index: sluice.WholeCommit}, {Seq: 2, Index: 300}} {
		cs, need, err := db.ReadLogWithin(ctx, d, from, 256, 100)
		if err != nil || len(cs) != 0 || need <= 100 {
			t.Fatalf("from %v within 100 bytes: %d commits, need %d, %v; want none read and the row's bytes", from, len(cs), need, err)
		}
		cs, again, err := db.ReadLogWithin(ctx, d, from, 256, need)
		if err != nil || again != 0 || len(cs) != 1 || cs[0].Seq != 2 {
			t.Fatalf("from %v within the %d bytes needed: %d commits, need %d, %v; want commit 2's first row", from, need, len(cs), again, err)
		}
		var size int64
		for _, ch := range cs[0].Changes {
			size += int64(len(ch.Before) + len(ch.After))
		}
		if size > need || !cs[0].Partial {
			t.Fatalf("from %v: read %d bytes of images within %d, partial %v", from, size, need, cs[0].Partial)
		}
	}
	cs, need, err := db.ReadLogWithin(ctx, d, sluice.Position{Seq: 3, Index: sluice.WholeCommit}, 256, 0)
	if err != nil || len(cs) != 0 || need != 0 {
		t.Fatalf("after the newest commit: %d commits, need %d, %v", len(cs), need, err)
	}
}

// TestReadLogInsidePrunedCommitIsGone: a read from a position inside a
// commit that was pruned after the caller checked the position (a
// resume, a webhook, the tailer) is Gone, not a read from the next
// commit, which would skip the rest of the pruned one's changes without
// a word; a read from a whole commit before the retained ones starts at
// the first retained, for the caller to judge (Cursor.Follows).
func TestReadLogInsidePrunedCommitIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d := bigCommit(t, db, 10) // commits 1 (3 changes), 2 (10), 3 (1)
	if n, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil); err != nil || n != 2 {
		t.Fatalf("pruned %d commits (%v), want 2", n, err)
	}
	for _, after := range []sluice.Position{{Seq: 1, Index: 0}, {Seq: 2, Index: 4}, {Seq: 2, Index: 9}} {
		cs, _, err := db.ReadLog(ctx, d, after, sluice.Stamp{}, 16, 1<<20)
		if sluice.ErrorCode(err) != sluice.CodeGone || !strings.Contains(err.Error(), fmt.Sprintf("commit %d of ", after.Seq)) {
			t.Fatalf("ReadLog after %v: %d commits (first %+v), %v", after, len(cs), cs, err)
		}
	}
	cs, _, err := db.ReadLog(ctx, d, sluice.Position{Seq: 1, Index: sluice.WholeCommit}, sluice.Stamp{}, 16, 1<<20)
	if err != nil || len(cs) != 1 || cs[0].Seq != 3 {
		t.Fatalf("ReadLog after commit 1: %+v, %v", cs, err)
	}
}

// TestReadLogMarksSuperseded: a change that a later change of its commit
// follows on the same document is Superseded (it has no version), read
// whole or in pieces of one row each, from the start of the commit or
// from inside it: a piece takes the later changes from the rest of the
// commit. The commit's rows hold insertions without ids (migration 4)
// and changes with them: an insertion superseded by an update, a
// deletion by a re-insertion of the id, an insertion by a deletion.
func TestReadLogMarksSuperseded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := noteDatabase(t, db, "twice")
	notes := func(text string, ids ...string) []*sluice.Document {
		var docs []*sluice.Document
		for _, id := range ids {
			docs = append(docs, &sluice.Document{ID: id, Type: "Note", Fields: map[string]any{"text": text}})
		}
		return docs
	}
	_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			// Changes 0-2 (a row of insertions), 3, 4, 5-6 (insertions), 7.
			for _, step := range []func() error{
				func() error { return w.Insert(ctx, notes("1", "Note/a", "Note/b", "Note/c")) },
				func() error { return w.Replace(ctx, notes("2", "Note/b"), false) },
				func() error { return w.Delete(ctx, []string{"Note/c"}, nil) },
				func() error { return w.Insert(ctx, notes("2", "Note/c", "Note/d")) },
				func() error { return w.Delete(ctx, []string{"Note/a"}, nil) },
			} {
				if err := step(); err != nil {
					return err
				}
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, true, false, true, false, false, false}
	for _, budget := range []int64{1 << 20, 1} {
		for from := -1; from < len(want); from++ {
			start := sluice.Position{Epoch: d.Epoch, Seq: 1, Index: from}
			if from < 0 {
				start = sluice.Position{Epoch: d.Epoch, Seq: 0, Index: sluice.WholeCommit}
			}
			after := start
			var got []bool
			for {
				cs, _, err := db.ReadLog(ctx, d, after, sluice.Stamp{}, 16, budget)
				if err != nil {
					t.Fatal(err)
				}
				if len(cs) == 0 {
					break
				}
				for _, c := range cs {
					for _, ch := range c.Changes {
						got = append(got, ch.Superseded)
						after = c.Position(ch.Index)
					}
				}
			}
			if !slices.Equal(got, want[from+1:]) {
				t.Errorf("read in pieces of %d bytes after %v: superseded %v, want %v", budget, start, got, want[from+1:])
			}
		}
	}
}

// TestReadLogFindsCommitReplaced: a read after a commit given the stamp
// the reader read it with fails with ErrCommitReplaced when the log holds
// another commit of that number (its newest commits were lost, in a
// failover or a restore, and new ones took their numbers; here with the
// uid drawn again, the uid sequence rewound with the log), whether
// commits follow or not, and from inside the commit; given the stamp the
// log holds, or none, it reads on. Known only by its tag (a client's
// position's), the stamp is checked the same.
func TestReadLogFindsCommitReplaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d := bigCommit(t, db, 10) // commits 1 (3 changes), 2 (10), 3 (1)
	cs, _, err := db.ReadLog(ctx, d, sluice.Position{Seq: 0, Index: sluice.WholeCommit}, sluice.Stamp{}, 16, 1<<20)
	if err != nil || len(cs) != 3 {
		t.Fatalf("ReadLog: %d commits, %v", len(cs), err)
	}
	of2, of3 := cs[1].Stamp(), cs[2].Stamp()
	reads := []struct {
		after sluice.Position
		of    sluice.Stamp
		seqs  []int64 // what it reads while the log holds the commit
	}{
		{sluice.Position{Seq: 2, Index: sluice.WholeCommit}, of2, []int64{3}},
		{sluice.Position{Seq: 3, Index: sluice.WholeCommit}, of3, nil},
		{sluice.Position{Seq: 2, Index: 4}, of2, []int64{2, 3}},
	}
	read := func(after sluice.Position, of sluice.Stamp) ([]int64, error) {
		cs, _, err := db.ReadLog(ctx, d, after, of, 16, 1<<20)
		var seqs []int64
		for _, c := range cs {
			seqs = append(seqs, c.Seq)
		}
		return seqs, err
	}
	for _, r := range reads {
		if got, err := read(r.after, r.of); err != nil || !slices.Equal(got, r.seqs) {
			t.Fatalf("ReadLog after %v of the commit it read: %v, %v; want %v", r.after, got, err, r.seqs)
		}
		if got, err := read(r.after, sluice.TaggedStamp(r.of.Tag())); err != nil || !slices.Equal(got, r.seqs) {
			t.Fatalf("ReadLog after %v of the commit's tag: %v, %v; want %v", r.after, got, err, r.seqs)
		}
		other := sluice.Stamp{UID: r.of.UID + 1000, Time: r.of.Time}
		if got, err := read(r.after, other); !errors.Is(err, sluice.ErrCommitReplaced) {
			t.Fatalf("ReadLog after %v of a commit of another uid: %v, %v", r.after, got, err)
		}
		if got, err := read(r.after, sluice.TaggedStamp(other.Tag())); !errors.Is(err, sluice.ErrCommitReplaced) {
			t.Fatalf("ReadLog after %v of another commit's tag: %v, %v", r.after, got, err)
		}
	}
	if p := cs[1].End(); p.Tag != of2.Tag() || p.String() != fmt.Sprintf("%s-2-%d-%s", d.Epoch, sluice.WholeCommit, of2.Tag()) {
		t.Fatalf("the end of commit 2 is %v, want tagged %s", p, of2.Tag())
	}
	if err := db.ExecDBForTest(ctx, "UPDATE sluice.commits SET committed_at = committed_at + interval '1 second' WHERE db_id = $1 AND seq >= 2", d.ID); err != nil {
		t.Fatal(err)
	}
	for _, r := range reads {
		if got, err := read(r.after, r.of); !errors.Is(err, sluice.ErrCommitReplaced) || got != nil {
			t.Fatalf("ReadLog after %v once commits 2 and 3 were replaced: %v, %v", r.after, got, err)
		}
		if got, err := read(r.after, sluice.TaggedStamp(r.of.Tag())); !errors.Is(err, sluice.ErrCommitReplaced) || got != nil {
			t.Fatalf("ReadLog after %v of its tag once commits 2 and 3 were replaced: %v, %v", r.after, got, err)
		}
		if got, err := read(r.after, sluice.Stamp{}); err != nil || !slices.Equal(got, r.seqs) {
			t.Fatalf("ReadLog after %v, unchecked: %v, %v; want %v", r.after, got, err, r.seqs)
		}
	}
}

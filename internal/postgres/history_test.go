package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// historyFixture writes commits of every shape a page can meet: a commit of
// 600 insertions in three rows of sluice.changes (250, 250, 100), one of a
// single insertion, one without changes, one with a long message, one of
// deletions (a row with ids and ops) and one of 260 insertions in two rows.
// It returns every change, in order, with its commit.
func historyFixture(t *testing.T, db *postgres.DB) (*sluice.Database, []want) {
	t.Helper()
	ctx := context.Background()
	d, s := noteDatabase(t, db, "h")
	commit := func(meta postgres.CommitMeta, write func(w *postgres.Writer) error) {
		t.Helper()
		_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: meta,
			Documents: func(_ context.Context, w *postgres.Writer) error { return write(w) }})
		if err != nil {
			t.Fatal(err)
		}
	}
	next := 0
	insert := func(w *postgres.Writer, n int) error {
		docs := make([]*sluice.Document, n)
		for i := range docs {
			// Texts of different lengths, so that sizes are uneven.
			docs[i] = &sluice.Document{ID: fmt.Sprintf("Note/n%04d", next), Type: "Note", Fields: map[string]any{"text": strings.Repeat("x", next%97)}}
			next++
		}
		return w.Insert(ctx, docs)
	}
	user := postgres.CommitMeta{User: "admin"}
	commit(user, func(w *postgres.Writer) error {
		for _, n := range []int{250, 250, 100} {
			if err := insert(w, n); err != nil {
				return err
			}
		}
		return nil
	})
	commit(user, func(w *postgres.Writer) error { return insert(w, 1) })
	commit(postgres.CommitMeta{User: "admin", Message: "nothing"}, func(*postgres.Writer) error { return nil })
	commit(postgres.CommitMeta{User: "admin", Message: strings.Repeat("m", 3000)}, func(w *postgres.Writer) error { return insert(w, 2) })
	commit(user, func(w *postgres.Writer) error {
		return w.Delete(ctx, []string{"Note/n0001", "Note/n0600", "Note/n0003"}, nil)
	})
	commit(user, func(w *postgres.Writer) error {
		if err := insert(w, 250); err != nil {
			return err
		}
		return insert(w, 10)
	})

	page, err := db.Changes(ctx, d, sluice.Position{Seq: 1, Index: -1}, 1000, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if page.More || len(page.Commits) != 6 {
		t.Fatalf("reading everything: %d commits, more %v", len(page.Commits), page.More)
	}
	var all []want
	for _, c := range page.Commits {
		if len(c.Changes) != c.NumChanges {
			t.Fatalf("commit %d: %d of %d changes in one page", c.Seq, len(c.Changes), c.NumChanges)
		}
		if c.NumChanges == 0 {
			all = append(all, want{seq: c.Seq, index: -1, head: int64(len(c.Message) + len(c.User))})
		}
		for i, ch := range c.Changes {
			if ch.Index != i {
				t.Fatalf("commit %d: change %d has index %d", c.Seq, i, ch.Index)
			}
			all = append(all, want{seq: c.Seq, index: i, id: ch.DocID, size: int64(len(ch.Before) + len(ch.After)), head: int64(len(c.Message) + len(c.User))})
		}
	}
	if len(all) != 600+1+1+2+3+260 {
		t.Fatalf("%d changes in the fixture", len(all))
	}
	return d, all
}

// want is one item of a history: a change, or a commit without changes
// (index -1).
type want struct {
	seq   int64
	index int
	id    string
	size  int64 // before and after images
	head  int64 // the commit's text
}

// TestChangesPagesAreBoundedAndResumeExactly reads the fixture's history
// page by page with budgets from tiny to ample and limits from 1 commit:
// every page holds at most limit commits and at most the budget in images
// and commit text (or a single change), says rightly whether more follows,
// and the pages together are the history, each change once, in order.
func TestChangesPagesAreBoundedAndResumeExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, all := historyFixture(t, db)
	for _, budget := range []int64{1, 200, 5000, 20000, 1 << 20} {
		for _, limit := range []int{1, 2, 1000} {
			t.Run(fmt.Sprintf("budget %d limit %d", budget, limit), func(t *testing.T) {
				t.Parallel()
				var got []want
				after := sluice.Position{Seq: 1, Index: -1}
				for pages := 0; ; pages++ {
					if pages > len(all)+1 {
						t.Fatal("paging does not end")
					}
					page, err := db.Changes(ctx, d, after, limit, budget)
					if err != nil {
						t.Fatal(err)
					}
					if len(page.Commits) == 0 {
						t.Fatalf("page %d after %v is empty; the previous said more", pages, after)
					}
					if len(page.Commits) > limit {
						t.Fatalf("page %d holds %d commits, limit %d", pages, len(page.Commits), limit)
					}
					var bytes int64
					items := 0
					for _, c := range page.Commits {
						bytes += int64(len(c.Message) + len(c.Author) + len(c.User))
						if c.NumChanges == 0 {
							got = append(got, want{seq: c.Seq, index: -1, head: int64(len(c.Message) + len(c.User))})
							items++
						}
						for _, ch := range c.Changes {
							bytes += int64(len(ch.Before) + len(ch.After))
							got = append(got, want{seq: c.Seq, index: ch.Index, id: ch.DocID, size: int64(len(ch.Before) + len(ch.After)), head: int64(len(c.Message) + len(c.User))})
							items++
						}
					}
					if bytes > budget && items > 1 {
						t.Fatalf("page %d holds %d bytes in %d items, budget %d", pages, bytes, items, budget)
					}
					last := got[len(got)-1]
					wantNext := sluice.Position{Epoch: d.Epoch, Seq: last.seq, Index: last.index}
					// Tagged with its commit, the page's last.
					c := page.Commits[len(page.Commits)-1]
					if last.index < 0 || last.index == c.NumChanges-1 {
						wantNext.Index = sluice.WholeCommit
					}
					if page.Next.Untagged() != wantNext || page.Next.Tag != c.Stamp().Tag() {
						t.Fatalf("page %d: next %v, want %v", pages, page.Next, wantNext)
					}
					for i := range got {
						if got[i] != all[i] {
							t.Fatalf("page %d: item %d: got %+v, want %+v", pages, i, got[i], all[i])
						}
					}
					if page.More != (len(got) < len(all)) {
						t.Fatalf("page %d: more %v with %d of %d items read", pages, page.More, len(got), len(all))
					}
					if !page.More {
						break
					}
					after = page.Next
					if after.Index == sluice.WholeCommit {
						after = sluice.Position{Seq: after.Seq + 1, Index: -1}
					}
				}
			})
		}
	}
}

// TestChangesFromAPositionInsideARow resumes in the middle of a row of
// sluice.changes and at the last change of a commit.
func TestChangesFromAPositionInsideARow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, all := historyFixture(t, db)
	for _, from := range []int{0, 137, 250, 599, 600, len(all) - 2} {
		page, err := db.Changes(ctx, d, sluice.Position{Seq: all[from].seq, Index: all[from].index}, 1000, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		first := page.Commits[0]
		index := -1
		if len(first.Changes) > 0 {
			index = first.Changes[0].Index
		}
		if first.Seq != all[from+1].seq || index != all[from+1].index {
			t.Fatalf("after %+v: page starts at commit %d change %d, want %+v", all[from], first.Seq, index, all[from+1])
		}
	}
	page, err := db.Changes(ctx, d, sluice.Position{Seq: all[len(all)-1].seq, Index: all[len(all)-1].index}, 1000, 1<<30)
	if err != nil || len(page.Commits) != 0 || page.More {
		t.Fatalf("after the last change: %d commits, more %v, %v", len(page.Commits), page.More, err)
	}
}

// TestChangesOfPrunedHistoryIsGone: a page that would start in history
// pruned after the caller checked it is refused, not started later.
func TestChangesOfPrunedHistoryIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := noteDatabase(t, db, "a")
	commitN(t, db, d, s, 5)
	if _, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, map[int64]int64{d.ID: 3}); err != nil {
		t.Fatal(err)
	}
	for _, after := range []sluice.Position{{Seq: 2, Index: -1}, {Seq: 3, Index: 0}, {Seq: 1, Index: 5}} {
		if _, err := db.Changes(ctx, d, after, 10, 1<<20); sluice.ErrorCode(err) != sluice.CodeGone {
			t.Errorf("after %+v: %v, want Gone", after, err)
		}
	}
	page, err := db.Changes(ctx, d, sluice.Position{Seq: 4, Index: -1}, 10, 1<<20)
	if err != nil || len(page.Commits) != 2 || page.Commits[0].Seq != 4 {
		t.Fatalf("after the pruned commits: %v", err)
	}
}

// TestLogPagesAreBounded: a page of the log holds at most limit commits
// and the budget in commit text (or one commit), newest first.
func TestLogPagesAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, _ := historyFixture(t, db)
	for _, budget := range []int64{1, 3000, 1 << 20} {
		var seqs []int64
		before := int64(0)
		for {
			page, err := db.Log(ctx, d, before, 2, budget)
			if err != nil {
				t.Fatal(err)
			}
			var bytes int
			for _, c := range page.Commits {
				bytes += len(c.Author) + len(c.Message) + len(c.User)
				seqs = append(seqs, c.Seq)
			}
			if len(page.Commits) > 2 || len(page.Commits) > 1 && int64(bytes) > budget {
				t.Fatalf("budget %d: a page of %d commits with %d bytes", budget, len(page.Commits), bytes)
			}
			if !page.More {
				break
			}
			before = page.Commits[len(page.Commits)-1].Seq
		}
		if fmt.Sprint(seqs) != "[6 5 4 3 2 1]" {
			t.Fatalf("budget %d: commits %v", budget, seqs)
		}
	}
}

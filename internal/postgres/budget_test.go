package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// What a write holds of the documents it replaces, patches or deletes is
// bounded by its budget of images, not by how many it touches; and a row
// of the log holds at most maxChangeRowBytes of images, so readers of the
// log, which read rows whole, hold a bounded amount too.

// noteText is a Note of key whose text is key followed by n bytes.
func noteText(key string, n int) *sluice.Document {
	return &sluice.Document{ID: "Note/" + key, Type: "Note", Fields: map[string]any{"text": key + strings.Repeat("x", n)}}
}

func TestWritesHoldImagesWithinTheirBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	const n, size, budget = 60, 1000, 8 << 10
	var docs []*sluice.Document
	var ids []string
	for i := range n {
		key := fmt.Sprintf("k%02d", i)
		docs = append(docs, noteText(key, size))
		ids = append(ids, "Note/"+key)
	}
	if _, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Documents: func(ctx context.Context, w *Writer) error {
		return w.Insert(ctx, docs)
	}}); err != nil {
		t.Fatal(err)
	}
	// The request's order is not the order of the locks (ids): the
	// replace and patch go in a shuffled order, the delete in reverse.
	order := make([]string, n)
	for i := range n {
		order[i] = ids[(i*7)%n]
	}
	reversed := slices.Clone(ids)
	slices.Reverse(reversed)
	// Each write runs with a small budget and reports the most it held,
	// and how many round trips sent its statements (about one a run: the
	// images, 60 KB, take 8 runs).
	write := func(name string, fn func(ctx context.Context, w *Writer) error) *sluice.Commit {
		t.Helper()
		var peak, sends int
		c, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Meta: CommitMeta{Message: name}, Documents: func(ctx context.Context, w *Writer) error {
			w.budget = budget
			err := fn(ctx, w)
			peak, sends = w.peakHeld, w.sends
			return err
		}})
		if sends > 16 {
			t.Fatalf("%s sent its statements in %d round trips", name, sends)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Images are counted by the row's size: a little more than the
		// text. At most the budget of a run, which may go over by one
		// document.
		if peak == 0 || peak > budget+2*size {
			t.Fatalf("%s held %d bytes of images at most, want at most %d", name, peak, budget+2*size)
		}
		return c
	}
	// checkChanges reads commit c back and checks its changes are one per
	// id of order, in order, each with its before image (the text the
	// document had) and after image.
	checkChanges := func(name string, c *sluice.Commit, op sluice.Op, before, after func(id string) string) {
		t.Helper()
		got, err := db.Commit(ctx, d, c.Seq, -1, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Changes) != n {
			t.Fatalf("%s: %d changes, want %d", name, len(got.Changes), n)
		}
		for i, ch := range got.Changes {
			if ch.DocID != order[i] || ch.Op != op || ch.Index != i {
				t.Fatalf("%s: change %d is %s %v (index %d), want %s %v", name, i, ch.DocID, ch.Op, ch.Index, order[i], op)
			}
			if want := before(ch.DocID); textOf(t, ch.Before) != want {
				t.Fatalf("%s: %s's before image holds %.20q…, want %.20q…", name, ch.DocID, textOf(t, ch.Before), want)
			}
			if want := after(ch.DocID); textOf(t, ch.After) != want {
				t.Fatalf("%s: %s's after image holds %.20q…, want %.20q…", name, ch.DocID, textOf(t, ch.After), want)
			}
		}
	}
	key := func(id string) string { return strings.TrimPrefix(id, "Note/") }
	original := func(id string) string { return key(id) + strings.Repeat("x", size) }
	replaced := func(id string) string { return key(id) + strings.Repeat("y", size) }
	patched := func(id string) string { return "patched " + key(id) }
	none := func(string) string { return "" }

	var replacements []*sluice.Document
	for _, id := range order {
		replacements = append(replacements, &sluice.Document{ID: id, Type: "Note", Fields: map[string]any{"text": replaced(id)}})
	}
	c := write("replace", func(ctx context.Context, w *Writer) error { return w.Replace(ctx, replacements, false) })
	checkChanges("replace", c, sluice.OpUpdated, original, replaced)

	c = write("patch", func(ctx context.Context, w *Writer) error {
		return w.Patch(ctx, order, nil, func(i int, current []byte) (*sluice.Document, error) {
			if text := textOf(t, current); text != replaced(order[i]) {
				return nil, fmt.Errorf("patch of %s saw %.20q…", order[i], text)
			}
			return &sluice.Document{ID: order[i], Type: "Note", Fields: map[string]any{"text": patched(order[i])}}, nil
		})
	})
	checkChanges("patch", c, sluice.OpUpdated, replaced, patched)

	// A stale document in a first part of the write: its images are not
	// counted against the parts after it.
	c = write("delete", func(ctx context.Context, w *Writer) error {
		if err := w.Patch(ctx, order[:1], []sluice.Precondition{{Version: "zzzz"}}, nil); err != nil {
			return err
		}
		w.stale = nil // as if it had not been
		return w.Delete(ctx, reversed, nil)
	})
	order = reversed
	checkChanges("delete", c, sluice.OpDeleted, patched, none)
	for _, id := range ids {
		if _, _, err := db.Document(ctx, d, s, id); sluice.ErrorCode(err) != sluice.CodeNotFound {
			t.Fatalf("%s after the delete: %v", id, err)
		}
	}
}

// textOf returns the text of a Note's image ("" for none).
func textOf(t *testing.T, image []byte) string {
	t.Helper()
	if image == nil {
		return ""
	}
	var doc struct{ Text string }
	if err := json.Unmarshal(image, &doc); err != nil {
		t.Fatalf("image %.40q: %v", image, err)
	}
	return doc.Text
}

// TestWritesCheckEveryDocumentBeforeWritingAny: preconditions that do not
// hold, or a document missing, are found before any image is read: every
// stale document is reported first, then the first missing one, then
// errors of the documents' contents.
func TestWritesCheckEveryDocumentBeforeWritingAny(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	c, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Documents: func(ctx context.Context, w *Writer) error {
		return w.Insert(ctx, []*sluice.Document{noteText("a", 10), noteText("b", 10), noteText("c", 10)})
	}})
	if err != nil {
		t.Fatal(err)
	}
	current := sluice.VersionOf(c.UID)
	stale := sluice.Precondition{Version: "zzzz"} // no version of these documents
	ok := sluice.Precondition{Version: current}
	staleNote := func(key string) *sluice.Document {
		doc := noteText(key, 1)
		doc.Expect = stale
		return doc
	}
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, w *Writer) error
		want  string
	}{
		{"delete, stale before missing", func(ctx context.Context, w *Writer) error {
			return w.Delete(ctx, []string{"Note/a", "Note/b", "Note/zz", "Note/c"}, []sluice.Precondition{ok, stale, {}, stale})
		}, "stale: Note/b,Note/c"},
		{"delete, missing before stale", func(ctx context.Context, w *Writer) error {
			return w.Delete(ctx, []string{"Note/zz", "Note/b"}, []sluice.Precondition{{}, stale})
		}, "stale: Note/b"},
		{"patch, stale before missing", func(ctx context.Context, w *Writer) error {
			return w.Patch(ctx, []string{"Note/a", "Note/b", "Note/zz", "Note/c"}, []sluice.Precondition{ok, stale, {}, stale}, func(i int, _ []byte) (*sluice.Document, error) {
				return nil, fmt.Errorf("patch of %d called", i)
			})
		}, "stale: Note/b,Note/c"},
		{"patch, an error and a missing document", func(ctx context.Context, w *Writer) error {
			return w.Patch(ctx, []string{"Note/a", "Note/zz"}, nil, func(i int, _ []byte) (*sluice.Document, error) {
				return nil, fmt.Errorf("patch of %d called", i)
			})
		}, "not found: Note/zz"},
		{"patch, an error", func(ctx context.Context, w *Writer) error {
			return w.Patch(ctx, []string{"Note/a", "Note/b"}, nil, func(i int, _ []byte) (*sluice.Document, error) {
				return nil, fmt.Errorf("patch of %d called", i)
			})
		}, "patch of 0 called"},
		{"replace, missing", func(ctx context.Context, w *Writer) error {
			return w.Replace(ctx, []*sluice.Document{noteText("a", 1), noteText("zz", 1), noteText("b", 1)}, false)
		}, "not found: Note/zz"},
		// A large request is checked chunk by chunk, and an error in a
		// chunk ends it there: a missing document ends it whether or not
		// its chunk holds a stale one too, so the stale documents of the
		// chunks after it are not looked for (Note/c was named).
		{"replace in chunks, a missing document with a stale one", func(ctx context.Context, w *Writer) error {
			for _, chunk := range [][]*sluice.Document{{staleNote("a")}, {noteText("zz", 1), staleNote("b")}, {staleNote("c")}} {
				if err := w.Replace(ctx, chunk, false); err != nil {
					return err
				}
			}
			return nil
		}, "stale: Note/a,Note/b"},
		{"replace in chunks, a missing document alone", func(ctx context.Context, w *Writer) error {
			for _, chunk := range [][]*sluice.Document{{staleNote("a")}, {noteText("zz", 1)}, {staleNote("c")}} {
				if err := w.Replace(ctx, chunk, false); err != nil {
					return err
				}
			}
			return nil
		}, "stale: Note/a"},
	} {
		_, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Documents: tc.write})
		var got string
		var se *sluice.StaleError
		switch {
		case err == nil:
			got = "no error"
		case errors.As(err, &se):
			var ids []string
			for _, doc := range se.Docs {
				ids = append(ids, doc.ID)
			}
			got = "stale: " + strings.Join(ids, ",")
		case sluice.ErrorCode(err) == sluice.CodeNotFound:
			got = "not found: " + strings.Fields(err.Error())[1]
		default:
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// Nothing was written.
	h, err := db.History(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h.LastSeq != c.Seq {
		t.Fatalf("head is commit %d, want %d", h.LastSeq, c.Seq)
	}
}

// TestChangeRowsAreBounded: a commit's changes go in rows of at most
// maxChangeRowBytes of images (a larger change alone in its row).
func TestChangeRowsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	docs := []*sluice.Document{noteText("big", maxChangeRowBytes+10)}
	for i := range 40 {
		docs = append(docs, noteText(fmt.Sprintf("k%02d", i), 100<<10))
	}
	c, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Documents: func(ctx context.Context, w *Writer) error {
		return w.Insert(ctx, docs)
	}})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.pool.Query(ctx, `SELECT idx, octet_length(afters), json_array_length(afters::json) FROM sluice.changes WHERE commit_uid = $1 ORDER BY idx`, c.UID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	next, count := 0, 0
	for rows.Next() {
		var idx, size, n int
		if err := rows.Scan(&idx, &size, &n); err != nil {
			t.Fatal(err)
		}
		if idx != next {
			t.Fatalf("a row starts at change %d, want %d", idx, next)
		}
		if size > maxChangeRowBytes && n > 1 {
			t.Fatalf("the row of changes %d to %d holds %d bytes of images", idx, idx+n-1, size)
		}
		next += n
		count++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if next != len(docs) || count < 5 {
		t.Fatalf("%d rows hold %d changes, want %d changes in 5 rows at least", count, next, len(docs))
	}
	got, err := db.Commit(ctx, d, c.Seq, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range got.Changes {
		if ch.DocID != docs[i].ID || ch.Index != i {
			t.Fatalf("change %d is %s (index %d), want %s", i, ch.DocID, ch.Index, docs[i].ID)
		}
	}
}

// TestPastOfDocumentChangedInTwoRowsOfACommit: a document a commit
// changes twice, in two of its rows of changes, reads as of before the
// commit as it was before the commit's first change of it. (The first
// change was picked by its place in its row, not in the commit: the read
// showed a version that never was before the commit.)
func TestPastOfDocumentChangedInTwoRowsOfACommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	text := func(key, text string) *sluice.Document {
		return &sluice.Document{ID: "Note/" + key, Type: "Note", Fields: map[string]any{"text": text}}
	}
	c1, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Documents: func(ctx context.Context, w *Writer) error {
		return w.Insert(ctx, []*sluice.Document{text("a", "v1"), text("b", "v1"), text("c", "v1")})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Documents: func(ctx context.Context, w *Writer) error {
		if err := w.Replace(ctx, []*sluice.Document{text("b", "v2"), text("c", "v2"), text("a", "v2")}, false); err != nil {
			return err
		}
		return w.Replace(ctx, []*sluice.Document{text("a", "v3")}, false)
	}}); err != nil {
		t.Fatal(err)
	}
	snap := db.Snapshot(d)
	defer snap.Close()
	snap.SetAsOf(&AsOf{Pos: sluice.Position{Epoch: d.Epoch, Seq: c1.Seq, Index: sluice.WholeCommit}})
	b, _, err := db.Document(WithSnapshot(ctx, snap), d, s, "Note/a")
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, b); got != "v1" {
		t.Fatalf("Note/a as of commit %d: %q, want v1", c1.Seq, got)
	}
}

// TestRunsAreSizedByTheImagesRead: a run of images is sized by the images
// as they will be read, not by what the rows store: Postgres compresses a
// repetitive JSON value a hundredfold, stores a number of 100,000 digits
// in a few bytes, and a row of many false Booleans holds none of the
// names its image spells out.
func TestRunsAreSizedByTheImagesRead(t *testing.T) {
	t.Parallel()
	var many strings.Builder
	var falses strings.Builder
	for i := range 200 {
		fmt.Fprintf(&many, " f%03d_%s: Boolean", i, strings.Repeat("n", 55))
		fmt.Fprintf(&falses, `%s"f%03d_%s": false`, map[bool]string{true: "", false: ","}[i == 0], i, strings.Repeat("n", 55))
	}
	long := "1" + strings.Repeat("0", 100000) // stored in a few bytes
	for _, tc := range []struct {
		name, sdl, class string
		n, budget        int
		doc              string // the fields of each document, as JSON
	}{
		{"a repetitive JSON value", "type Blob { data: JSON }", "Blob", 20, 64 << 10, `"data": "` + strings.Repeat("a", 200<<10) + `"`},
		{"long numbers", "type Blob { data: JSON }", "Blob", 20, 64 << 10, `"data": [` + strings.Repeat(long+",", 9) + long + `]`},
		{"many names", "type Flags {" + many.String() + " }", "Flags", 300, 64 << 10, falses.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, _, _, _ := openNotes(t)
			s, err := schema.Parse(tc.sdl)
			if err != nil {
				t.Fatal(err)
			}
			d := &sluice.Database{Org: "o", Name: "sized"}
			if _, err := db.Write(ctx, WriteSpec{Before: func(ctx context.Context, tx *Tx) error { return tx.CreateDatabase(ctx, d, s, Creator{}) }}); err != nil {
				t.Fatal(err)
			}
			var docs []*sluice.Document
			var ids []string
			for i := range tc.n {
				id := fmt.Sprintf("%s/d%03d", tc.class, i)
				doc, err := schema.RawDocument{JSON: []byte(`{"@type":"` + tc.class + `","@id":"` + id + `",` + tc.doc + `}`)}.Validate(s)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, doc)
				ids = append(ids, id)
			}
			if _, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Documents: func(ctx context.Context, w *Writer) error {
				return w.Insert(ctx, docs)
			}}); err != nil {
				t.Fatal(err)
			}
			var peak, largest int
			if _, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Documents: func(ctx context.Context, w *Writer) error {
				w.budget = tc.budget
				err := w.Delete(ctx, ids, nil)
				peak = w.peakHeld
				return err
			}}); err != nil {
				t.Fatal(err)
			}
			// The images as read, the largest of them.
			if err := db.pool.QueryRow(ctx, fmt.Sprintf("SELECT coalesce(max(octet_length(b)), 0) FROM %s, jsonb_array_elements_text(befores::jsonb) b", "sluice.changes")).Scan(&largest); err != nil {
				t.Fatal(err)
			}
			// A run holds at most the budget, or one document more.
			if peak == 0 || peak > tc.budget+2*largest {
				t.Fatalf("the delete held %d bytes of images at most (an image: about %d), want at most %d", peak, largest, tc.budget+2*largest)
			}
		})
	}
}

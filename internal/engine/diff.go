package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/jsonpatch"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// DiffQuery selects a page of Diff.
type DiffQuery struct {
	// From is the first position; To the second (nil: now).
	From sluice.Position
	To   *sluice.Position
	// Type, when set, keeps only documents of that class and its
	// subclasses; ID, when set, only that document.
	Type, ID string
	// After is the document id the page starts after ("": the first), or
	// a sealed cursor a page gave as its Next.
	After string
	// Count bounds the documents of the page, MaxBytes their images and
	// patches (at least one document).
	Count    int
	MaxBytes int64
}

// DiffChange is how one document differs between two positions.
type DiffChange struct {
	ID, Type string
	// Op is OpAdded (absent at From), OpDeleted (absent at To) or
	// OpUpdated.
	Op sluice.Op
	// Before and After are the document at each position (nil: absent),
	// as the reader may see it through today's schema and the schema of
	// the commit each was written under (as history is shown).
	Before, After json.RawMessage
	// Patch is the RFC 6902 JSON Patch that turns Before into After (the
	// format of live queries' patches); when it would be larger than
	// replacing the whole document, it is that replace.
	Patch json.RawMessage
}

// DiffPage is one page of a diff.
type DiffPage struct {
	From, To sluice.Position
	Changes  []DiffChange
	// Hidden holds the fields ("Class.field", sorted) of the classes the
	// diff covers that it leaves out of every image, because their values
	// at From or To cannot be shown (see diffPast).
	Hidden []string
	// Next is the After of the next page ("" when More is false); More
	// reports whether there is one. Next names the last document the page
	// shows, or is a sealed cursor (diffcursor.go) that names none: never
	// a document the page left out. The next page compares the same two
	// positions: To, not the state when it is read.
	Next string
	More bool
}

// Diff returns a page of the net difference between the states of
// database org/name at q.From and q.To: one entry per document that
// differs, by id. Both positions are checked as reads of the past check
// theirs (see ReadAsOf), and To may not come before From; a range of the
// log holding more than max_past_changes changes is refused (CodeInvalid,
// naming the furthest To that fits) before any of it is read. It needs the
// read role; the images are redacted as history is (RedactCommit), less
// the fields the diff cannot show (DiffPage.Hidden), and a document whose
// two images the reader sees as equal is left out. A page holds at most
// q.MaxBytes of images and patches, but one document at least when it
// shows any: each patch is at most the size of replacing the whole
// document, and the page ends before the document whose images and patch
// would pass q.MaxBytes. A page whose reads of the store end on documents
// left out may show none and still have a next. A diff covering a
// class whose documents a schema change dropped after From is refused
// (CodeInvalid, naming the class), as a read of it as of From is. The
// page is read in one snapshot; the position it returns is To, the state
// the After images show, from which a later diff or a stream goes on.
// Like every read, it runs once more with the current schema when the one
// it was prepared with is out of date (another replica just changed it).
func (e *Engine) Diff(ctx context.Context, u *sluice.User, org, name string, q DiffQuery) (*DiffPage, sluice.Position, error) {
	var page *DiffPage
	var pos sluice.Position
	err := e.current(ctx, u, org, name, sluice.RoleRead, func(d *sluice.Database, s *sluice.Schema) error {
		var err error
		page, pos, err = e.diff(ctx, u, d, s, q)
		return err
	})
	if err != nil {
		return nil, sluice.Position{}, err
	}
	return page, pos, nil
}

// diff is Diff with database d and its schema s.
func (e *Engine) diff(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, q DiffQuery) (*DiffPage, sluice.Position, error) {
	q.Count = max(q.Count, 1)
	sq := postgres.DiffQuery{From: q.From, After: q.After, Limit: q.Count, MaxBytes: q.MaxBytes}
	// read: the classes the diff covers.
	var read []string
	if q.Type != "" {
		c := s.Class(q.Type)
		if c == nil || c.Kind == sluice.KindSubdocument {
			return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "type %s is not a document class of %s", sluice.Echo(q.Type), d.Path())
		}
		sq.Classes = append([]string{}, documentClasses(s, q.Type)...)
		read = sq.Classes
	}
	if q.ID != "" {
		class, key, ok := strings.Cut(q.ID, "/")
		if !ok || key == "" {
			return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "invalid document id %s: want <Class>/<key>", sluice.Echo(q.ID))
		} else if err := schema.CheckKey(key); err != nil {
			return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "invalid document id %s: %s", sluice.Echo(q.ID), sluice.ErrorMessage(err))
		}
		if c := s.Class(class); c == nil || c.Kind != sluice.KindDocument {
			return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "invalid document id %s: %s is not a document class of %s", sluice.Echo(q.ID), class, d.Path())
		}
		sq.IDs = []string{q.ID}
		read = []string{class}
	}
	if q.After != "" && !strings.HasPrefix(q.After, sealedPrefix) {
		// A page's next, or an id given by hand: anything else was
		// compared with the ids as it was, and answered a page of nothing
		// (more false) for a mistyped cursor, as if the diff had ended.
		if class, key, ok := strings.Cut(q.After, "/"); !ok || class == "" || schema.CheckKey(key) != nil {
			return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "query parameter after %s is neither a document id (<Class>/<key>) nor a cursor of this diff: pass a page's next back with the same from, to, type and id", sluice.Echo(q.After))
		}
	}
	if q.Type == "" && q.ID == "" {
		for _, n := range s.Order {
			if s.Classes[n].Kind == sluice.KindDocument {
				read = append(read, n)
			}
		}
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	ctx, snap := e.ReadSnapshot(ctx, d)
	defer snap.Close()
	h, err := e.checkPast(ctx, d, "from", q.From)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	sq.To = sluice.Position{Epoch: d.Epoch, Seq: h.LastSeq, Index: sluice.WholeCommit}
	if now, ok := snap.Position(); ok && now.Seq == h.LastSeq {
		sq.To = now // tagged with its commit, as a read's position is
	}
	if q.To != nil {
		if _, err := e.checkPast(ctx, d, "to", *q.To); err != nil {
			return nil, sluice.Position{}, err
		}
		sq.To = *q.To
	}
	if sq.To.Less(q.From) {
		return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "to %s comes before from %s", sq.To, q.From)
	}
	// Every page reads every change between the two positions, whatever
	// type= and id= keep: the range is bounded before anything reads it.
	if rg, err := e.store.DiffRange(ctx, d, q.From, sq.To, e.maxPastChanges); err != nil {
		return nil, sluice.Position{}, err
	} else if rg.Over {
		what := "changes"
		if rg.ByCommits {
			what = "commits" // written without changes, each still read
		}
		return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "the log of %s between from %s and to %s holds more than %d %s, the most one diff reads (max_past_changes): from %s, a diff reaches at most to=%s; diff up to there, then on from it (type= and id= do not narrow it: each page reads every change between its two positions)",
			d.Path(), q.From, sq.To, e.maxPastChanges, what, q.From, rg.Fits)
	}
	sc, err := e.scanVersions(ctx, d, s, role, q.From.Seq, sq.To.Seq)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	past := diffPast(sc, s, role, q.From, sq.To)
	if q.Type == "" && q.ID == "" {
		// The log between them holds the documents of every class, of
		// those dropped since or meanwhile too.
		if err := past.CheckAll(); err != nil {
			return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "%s; a diff of another class (type=) can be shown", sluice.ErrorMessage(err))
		}
	}
	if q.Type != "" {
		// The class asked for itself, before its classes today: an
		// interface whose implementation then was dropped since covered
		// that class's documents then, which today's classes of it
		// (read) no longer name; and one without document classes today
		// returns below before reading any.
		if err := past.CheckClass(q.Type); err != nil {
			return nil, sluice.Position{}, err
		}
	}
	for _, c := range read {
		if err := past.CheckClass(c); err != nil {
			if q.Type == "" && q.ID == "" {
				err = sluice.Errorf(sluice.CodeInvalid, "%s; a diff of another class (type=) can be shown", sluice.ErrorMessage(err))
			}
			return nil, sluice.Position{}, err
		}
	}
	out := &DiffPage{From: q.From, To: sq.To, Hidden: past.Hidden(read)}
	if sq.Classes != nil && len(sq.Classes) == 0 {
		return out, sq.To, nil // a class without documents of its own
	}
	if strings.HasPrefix(q.After, sealedPrefix) {
		if sq.After, err = e.openDiffCursor(ctx, d, role, q, sq.To, q.After); err != nil {
			return nil, sluice.Position{}, err
		}
	}
	// A page is filled from the store's pages of documents that changed,
	// leaving out those the reader sees no difference in; its next names
	// only a document it shows, so that a page never names one it left
	// out (a document whose only change is to a field hidden from the
	// reader). It reads at most diffScanReads pages of the store (each
	// reads the log between the two positions); when those end on
	// documents left out, the page ends with a sealed cursor
	// (diffcursor.go), which names no document.
	var used int64 // the page's images and patches: a patch can add as much as the images
	var last string
	lastShown := true // whether last, the last document read, is shown
	for reads := 1; ; reads++ {
		page, err := e.store.Diff(ctx, d, sq)
		if err != nil {
			return nil, sluice.Position{}, err
		}
		for _, en := range page.Entries {
			ch, shown, err := e.diffChange(ctx, d, s, role, past, en)
			if err != nil {
				return nil, sluice.Position{}, err
			}
			if !shown {
				last, lastShown = en.ID, false
				continue
			}
			size := int64(len(ch.Before) + len(ch.After) + len(ch.Patch))
			if len(out.Changes) == q.Count || len(out.Changes) > 0 && used+size > q.MaxBytes {
				// The next page starts after the last document shown.
				out.Next, out.More = out.Changes[len(out.Changes)-1].ID, true
				return out, sq.To, nil
			}
			used += size
			out.Changes = append(out.Changes, ch)
			last, lastShown = en.ID, true
		}
		if !page.More {
			return out, sq.To, nil
		}
		if len(out.Changes) == q.Count {
			out.Next, out.More = out.Changes[len(out.Changes)-1].ID, true
			return out, sq.To, nil
		}
		if reads == diffScanReads {
			out.More = true
			if out.Next = last; !lastShown {
				if out.Next, err = e.sealDiffCursor(ctx, d, role, q, sq.To, last); err != nil {
					return nil, sluice.Position{}, err
				}
			}
			return out, sq.To, nil
		}
		sq.After, sq.Limit = page.Next, diffScanLimit
	}
}

// Bounds of the store's pages one page of a diff reads: at most
// diffScanReads of them, each after the first of up to diffScanLimit
// documents (and the page's bytes), so that a page can go past many
// documents left out.
const (
	diffScanReads = 4
	diffScanLimit = 1000
)

// diffChange returns what the reader is shown of en, and false when the
// reader sees no difference (added and deleted in between, changed and
// changed back, or changed only where the reader cannot see).
func (e *Engine) diffChange(ctx context.Context, d *sluice.Database, s *sluice.Schema, role sluice.Role, past *Past, en postgres.DiffEntry) (DiffChange, bool, error) {
	b, err := e.RedactCommit(ctx, d, s, role, en.Before)
	if err != nil {
		return DiffChange{}, false, err
	}
	a, err := e.RedactCommit(ctx, d, s, role, en.After)
	if err != nil {
		return DiffChange{}, false, err
	}
	ch := DiffChange{ID: en.ID, Type: en.Before.Changes[0].Class}
	if ch.Before, err = dropUnknown(s, past, b.Changes[0].Before); err != nil {
		return DiffChange{}, false, err
	}
	if ch.After, err = dropUnknown(s, past, a.Changes[0].After); err != nil {
		return DiffChange{}, false, err
	}
	switch {
	case ch.Before == nil && ch.After == nil:
		return DiffChange{}, false, nil // added and deleted in between
	case ch.Before == nil:
		ch.Op = sluice.OpAdded
	case ch.After == nil:
		ch.Op = sluice.OpDeleted
	default:
		ch.Op = sluice.OpUpdated
	}
	// A patch is bounded by the whole replace, which a client applies as
	// well: a deep document with long keys otherwise has a patch many
	// times its size (each operation's path repeats its parents' keys).
	after := orNull(ch.After)
	if ch.Patch, err = jsonpatch.Diff(orNull(ch.Before), after, jsonpatch.ReplaceSize(after)); err != nil {
		return DiffChange{}, false, err
	}
	if ch.Op == sluice.OpUpdated && bytes.Equal(ch.Patch, []byte("[]")) {
		return DiffChange{}, false, nil // changed and changed back, or changed where the reader cannot see
	}
	return ch, true, nil
}

// orNull returns b, or the JSON null for none.
func orNull(b json.RawMessage) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

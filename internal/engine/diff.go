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
	// After is the document id the page starts after ("": the first).
	After string
	// Count bounds the documents of the page, MaxBytes their images.
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
	// format of live queries' patches).
	Patch json.RawMessage
}

// DiffPage is one page of a diff.
type DiffPage struct {
	From, To sluice.Position
	Changes  []DiffChange
	// Next is the After of the next page; More reports whether there is
	// one.
	Next string
	More bool
}

// Diff returns a page of the net difference between the states of
// database org/name at q.From and q.To: one entry per document that
// differs, by id. Both positions are checked as reads of the past check
// theirs (see ReadAsOf), and To may not come before From. It needs the
// read role; the images are redacted as history is (RedactCommit), and a
// document whose two images the reader sees as equal is left out. The
// page is read in one snapshot, whose position it returns too.
func (e *Engine) Diff(ctx context.Context, u *sluice.User, org, name string, q DiffQuery) (*DiffPage, sluice.Position, error) {
	d, s, err := e.Database(ctx, u, org, name, sluice.RoleRead)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	sq := postgres.DiffQuery{From: q.From, After: q.After, Limit: q.Count, MaxBytes: q.MaxBytes}
	if q.Type != "" {
		c := s.Class(q.Type)
		if c == nil || c.Kind == sluice.KindSubdocument {
			return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "type %q is not a document class of %s", q.Type, d.Path())
		}
		sq.Classes = append([]string{}, documentClasses(s, q.Type)...)
	}
	if q.ID != "" {
		if _, key, ok := strings.Cut(q.ID, "/"); !ok || key == "" {
			return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "invalid document id %q: want <Class>/<key>", q.ID)
		} else if err := schema.CheckKey(key); err != nil {
			return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "invalid document id %q: %s", q.ID, sluice.ErrorMessage(err))
		}
		sq.IDs = []string{q.ID}
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
	if q.To != nil {
		if _, err := e.checkPast(ctx, d, "to", *q.To); err != nil {
			return nil, sluice.Position{}, err
		}
		sq.To = *q.To
	}
	if sq.To.Less(q.From) {
		return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "to %s comes before from %s", sq.To, q.From)
	}
	out := &DiffPage{From: q.From, To: sq.To}
	pos, _ := snap.Position()
	if sq.Classes != nil && len(sq.Classes) == 0 {
		return out, pos, nil // a class without documents of its own
	}
	page, err := e.store.Diff(ctx, d, sq)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	out.Next, out.More = page.Next, page.More
	for _, en := range page.Entries {
		b, err := e.RedactCommit(ctx, d, s, role, en.Before)
		if err != nil {
			return nil, sluice.Position{}, err
		}
		a, err := e.RedactCommit(ctx, d, s, role, en.After)
		if err != nil {
			return nil, sluice.Position{}, err
		}
		ch := DiffChange{ID: en.ID, Type: en.Before.Changes[0].Class, Before: b.Changes[0].Before, After: a.Changes[0].After}
		switch {
		case ch.Before == nil && ch.After == nil:
			continue // added and deleted in between
		case ch.Before == nil:
			ch.Op = sluice.OpAdded
		case ch.After == nil:
			ch.Op = sluice.OpDeleted
		default:
			ch.Op = sluice.OpUpdated
		}
		if ch.Patch, err = jsonpatch.Diff(orNull(ch.Before), orNull(ch.After)); err != nil {
			return nil, sluice.Position{}, err
		}
		if ch.Op == sluice.OpUpdated && bytes.Equal(ch.Patch, []byte("[]")) {
			continue // changed and changed back, or changed where the reader cannot see
		}
		out.Changes = append(out.Changes, ch)
	}
	return out, pos, nil
}

// orNull returns b, or the JSON null for none.
func orNull(b json.RawMessage) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

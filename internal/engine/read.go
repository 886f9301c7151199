package engine

import (
	"context"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// Document returns the API-form JSON of one document, and the position it
// reflects (the newest commit in the snapshot it was read in); it needs
// the read role. Fields the reader may not see (field protection) are
// removed.
func (e *Engine) Document(ctx context.Context, u *sluice.User, org, name, id string) ([]byte, sluice.Position, error) {
	var out []byte
	var pos sluice.Position
	err := e.current(ctx, u, org, name, sluice.RoleRead, func(d *sluice.Database, s *sluice.Schema) error {
		_, key, ok := strings.Cut(id, "/")
		if !ok || key == "" {
			return sluice.Errorf(sluice.CodeInvalid, "invalid document id %q: want <Class>/<key>", id)
		}
		// A key no document can have (NUL, invalid UTF-8, too long) is
		// the client's mistake, and must not reach SQL.
		if err := schema.CheckKey(key); err != nil {
			return sluice.Errorf(sluice.CodeInvalid, "invalid document id %q: %s", id, sluice.ErrorMessage(err))
		}
		role, err := e.Role(ctx, u, d)
		if err != nil {
			return err
		}
		rctx, snap := e.ReadSnapshot(ctx, d)
		defer snap.Close()
		snap.OneStatement()
		b, err := e.store.Document(rctx, d, s, id)
		if err != nil {
			return err
		}
		pos, _ = snap.Position()
		out, err = redactFor(role, s, b)
		return err
	})
	if err != nil {
		return nil, sluice.Position{}, err
	}
	return out, pos, nil
}

// DocumentQuery selects documents for Documents.
type DocumentQuery struct {
	// Type limits the result to a class and its subclasses; empty means all.
	Type  string
	Skip  int64
	Count int64 // < 0: no limit
}

// Documents calls fn with each selected document's API-form JSON, ordered by
// id; it needs the read role. start is called once, before the first
// document (or, with none, before Documents returns nil), with the
// position the documents reflect: they are read in one snapshot.
func (e *Engine) Documents(ctx context.Context, u *sluice.User, org, name string, q DocumentQuery, start func(sluice.Position), fn func([]byte) error) error {
	started := false
	err := e.current(ctx, u, org, name, sluice.RoleRead, func(d *sluice.Database, s *sluice.Schema) error {
		if started {
			// Documents went out: the listing cannot start over.
			return sluice.Errorf(sluice.CodeConflict, "the schema of %s changed while the listing was read; retry it", d.Path())
		}
		return e.documents(ctx, u, d, s, q, func(pos sluice.Position) {
			started = true
			start(pos)
		}, fn)
	})
	return err
}

// documents is Documents with database d and its schema s.
func (e *Engine) documents(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, q DocumentQuery, start func(sluice.Position), fn func([]byte) error) error {
	var classes []string
	if q.Type != "" {
		c := s.Class(q.Type)
		if c == nil || c.Kind == sluice.KindSubdocument {
			return sluice.Errorf(sluice.CodeInvalid, "type %q is not a document class of %s", q.Type, d.Path())
		}
		classes = documentClasses(s, q.Type)
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return err
	}
	rctx, snap := e.ReadSnapshot(ctx, d)
	defer snap.Close()
	snap.OneStatement() // the listing, or the position alone
	started := false
	begin := func() {
		if !started {
			started = true
			pos, _ := snap.Position()
			start(pos)
		}
	}
	if q.Type != "" && len(classes) == 0 {
		// No class to read: the position alone.
		if _, err := e.store.History(rctx, d.ID); err != nil {
			return err
		}
		begin()
		return nil
	}
	err = e.store.Documents(rctx, d, s, classes, q.Skip, q.Count, func(b []byte) error {
		begin()
		out, err := redactFor(role, s, b)
		if err != nil {
			return err
		}
		return fn(out)
	})
	if err != nil {
		return err
	}
	if _, begun := snap.Position(); !begun {
		// Nothing was read (no class at all): the position alone.
		if _, err := e.store.History(rctx, d.ID); err != nil {
			return err
		}
	}
	begin()
	return nil
}

// Log returns a page of commits newest first, below sequence before (0:
// from the newest), without their changes: at most limit commits, with at
// most maxBytes of commit text (see postgres.DB.Log). It needs the read
// role.
//
// The page is read in one snapshot, whose position Log returns too.
func (e *Engine) Log(ctx context.Context, u *sluice.User, org, name string, before int64, limit int, maxBytes int64) (*sluice.LogPage, sluice.Position, error) {
	var page *sluice.LogPage
	var pos sluice.Position
	err := e.current(ctx, u, org, name, sluice.RoleRead, func(d *sluice.Database, _ *sluice.Schema) error {
		rctx, snap := e.ReadSnapshot(ctx, d)
		defer snap.Close()
		if _, err := e.store.History(rctx, d.ID); err != nil {
			return err
		}
		var err error
		page, err = e.store.Log(rctx, d, before, limit, maxBytes)
		pos, _ = snap.Position()
		return err
	})
	return page, pos, err
}

// MaxIndex is the change index that stands for "the whole commit" in a
// position given as a commit id.
const MaxIndex = sluice.WholeCommit

// Changes returns the page of history after position after, oldest first,
// read in one snapshot, and the position that snapshot reflects (the
// newest commit, which the page may stop short of):
// at most limit commits, with change images of at most maxBytes in all
// (see postgres.DB.Changes; a large commit spans pages), redacted for u.
// A position from another epoch or older than retained history gives a
// Gone error: never a silent gap.
func (e *Engine) Changes(ctx context.Context, u *sluice.User, org, name string, after sluice.Position, limit int, maxBytes int64) (*sluice.ChangePage, sluice.Position, error) {
	var page *sluice.ChangePage
	var pos sluice.Position
	err := e.current(ctx, u, org, name, sluice.RoleRead, func(d *sluice.Database, s *sluice.Schema) error {
		var err error
		page, pos, err = e.changes(ctx, u, d, s, after, limit, maxBytes)
		return err
	})
	if err != nil {
		return nil, sluice.Position{}, err
	}
	return page, pos, nil
}

// changes is Changes with database d and its schema s.
func (e *Engine) changes(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, after sluice.Position, limit int, maxBytes int64) (*sluice.ChangePage, sluice.Position, error) {
	ctx, snap := e.ReadSnapshot(ctx, d)
	defer snap.Close()
	if after.Epoch != "" && after.Epoch != d.Epoch {
		return nil, sluice.Position{}, sluice.Errorf(sluice.CodeGone, "position %s is from another incarnation of %s (epoch %s); re-read the current state", after, d.Path(), d.Epoch)
	}
	h, err := e.store.History(ctx, d.ID)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	if !h.Retains(after) {
		return nil, sluice.Position{}, sluice.Errorf(sluice.CodeGone, "position %s is older than the retained history of %s (commits up to %d were pruned)", after, d.Path(), h.PrunedSeq)
	}
	if after.Seq > h.LastSeq {
		return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "position %s is ahead of the newest commit %d of %s", after, h.LastSeq, d.Path())
	}
	from := after
	if after.Index == MaxIndex {
		from = sluice.Position{Seq: after.Seq + 1, Index: -1}
	}
	page, err := e.store.Changes(ctx, d, from, limit, maxBytes)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	for i, c := range page.Commits {
		if page.Commits[i], err = e.RedactCommit(ctx, d, s, role, c); err != nil {
			return nil, sluice.Position{}, err
		}
	}
	pos, _ := snap.Position()
	return page, pos, nil
}

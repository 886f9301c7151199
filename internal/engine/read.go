package engine

import (
	"context"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// Document returns the API-form JSON of one document; it needs the read role.
// Fields the reader may not see (field protection) are removed.
func (e *Engine) Document(ctx context.Context, u *sluice.User, org, name, id string) ([]byte, error) {
	d, s, err := e.Database(ctx, u, org, name, sluice.RoleRead)
	if err != nil {
		return nil, err
	}
	_, key, ok := strings.Cut(id, "/")
	if !ok || key == "" {
		return nil, sluice.Errorf(sluice.CodeInvalid, "invalid document id %q: want <Class>/<key>", id)
	}
	// A key no document can have (NUL, invalid UTF-8, too long) is the
	// client's mistake, and must not reach SQL.
	if err := schema.CheckKey(key); err != nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, "invalid document id %q: %s", id, sluice.ErrorMessage(err))
	}
	b, err := e.store.Document(ctx, d, s, id)
	if err != nil {
		return nil, err
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, err
	}
	return redactFor(role, s, b)
}

// DocumentQuery selects documents for Documents.
type DocumentQuery struct {
	// Type limits the result to a class and its subclasses; empty means all.
	Type  string
	Skip  int64
	Count int64 // < 0: no limit
}

// Documents calls fn with each selected document's API-form JSON, ordered by
// id; it needs the read role.
func (e *Engine) Documents(ctx context.Context, u *sluice.User, org, name string, q DocumentQuery, fn func([]byte) error) error {
	d, s, err := e.Database(ctx, u, org, name, sluice.RoleRead)
	if err != nil {
		return err
	}
	var classes []string
	if q.Type != "" {
		c := s.Class(q.Type)
		if c == nil || c.Kind == sluice.KindSubdocument {
			return sluice.Errorf(sluice.CodeInvalid, "type %q is not a document class of %s", q.Type, d.Path())
		}
		classes = documentClasses(s, q.Type)
		if len(classes) == 0 {
			return nil
		}
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return err
	}
	return e.store.Documents(ctx, d, s, classes, q.Skip, q.Count, func(b []byte) error {
		out, err := redactFor(role, s, b)
		if err != nil {
			return err
		}
		return fn(out)
	})
}

// Log returns commits newest first (see postgres.DB.Log); it needs the read
// role.
func (e *Engine) Log(ctx context.Context, u *sluice.User, org, name string, before int64, limit int) (*sluice.Database, []*sluice.Commit, error) {
	d, _, err := e.Database(ctx, u, org, name, sluice.RoleRead)
	if err != nil {
		return nil, nil, err
	}
	cs, err := e.store.Log(ctx, d, before, limit)
	return d, cs, err
}

// MaxIndex is the change index that stands for "the whole commit" in a
// position given as a commit id.
const MaxIndex = 1<<31 - 1

// Changes returns up to limit commits after position after, oldest first,
// with their changes, redacted for u. A position from another epoch or older
// than retained history gives a Gone error: never a silent gap.
func (e *Engine) Changes(ctx context.Context, u *sluice.User, org, name string, after sluice.Position, limit int) (*sluice.Database, []*sluice.Commit, error) {
	d, s, err := e.Database(ctx, u, org, name, sluice.RoleRead)
	if err != nil {
		return nil, nil, err
	}
	if after.Epoch != "" && after.Epoch != d.Epoch {
		return nil, nil, sluice.Errorf(sluice.CodeGone, "position %s is from another incarnation of %s (epoch %s); re-read the current state", after, d.Path(), d.Epoch)
	}
	h, err := e.store.History(ctx, d.ID)
	if err != nil {
		return nil, nil, err
	}
	// A position inside the newest pruned commit cannot be resumed either:
	// the rest of that commit is gone. A commit id (index MaxIndex) can.
	if after.Seq < h.PrunedSeq || after.Seq == h.PrunedSeq && after.Seq > 0 && after.Index != MaxIndex {
		return nil, nil, sluice.Errorf(sluice.CodeGone, "position %s is older than the retained history of %s (commits up to %d were pruned)", after, d.Path(), h.PrunedSeq)
	}
	if after.Seq > h.LastSeq {
		return nil, nil, sluice.Errorf(sluice.CodeInvalid, "position %s is ahead of the newest commit %d of %s", after, h.LastSeq, d.Path())
	}
	// A position names one change; the rest of its commit comes first.
	from := after.Seq
	if from > 0 {
		from--
	}
	cs, err := e.store.CommitsAfter(ctx, d, from, limit+1)
	if err != nil {
		return nil, nil, err
	}
	if len(cs) > 0 && cs[0].Seq == after.Seq {
		first := cs[0]
		i := 0
		for i < len(first.Changes) && first.Changes[i].Index <= after.Index {
			i++
		}
		first.Changes = first.Changes[i:]
		if len(first.Changes) == 0 {
			cs = cs[1:]
		}
	}
	if len(cs) > limit {
		cs = cs[:limit]
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range cs {
		for i := range c.Changes {
			ch := &c.Changes[i]
			if ch.Before, err = redactFor(role, s, ch.Before); err != nil {
				return nil, nil, err
			}
			if ch.After, err = redactFor(role, s, ch.After); err != nil {
				return nil, nil, err
			}
		}
	}
	return d, cs, nil
}

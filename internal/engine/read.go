package engine

import (
	"context"
	"math"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// ReadAt says what a read reflects: its position and, for a read of the
// past, the fields ("Class.field", sorted) it leaves out because their
// values then cannot be shown (see Past).
type ReadAt struct {
	Position sluice.Position
	Hidden   []string
}

// ReadDocument is one document as Document reads it, and what the read
// reflects.
type ReadDocument struct {
	// JSON is its API form, with its "@version" (none in a read of the
	// past: see postgres.DB.Document).
	JSON    []byte
	Version string
	// View names the view of the document the reader's role reads
	// (sluice.ViewName) when it hides fields of the schema; when it
	// reads the whole document, "", or the whole view as of the last
	// schema change that dropped stored values of the document's class
	// (see drops.go). With Version, it names the representation read (an
	// ETag).
	View string
	ReadAt
}

// Document returns one document and what the read reflects (the newest
// commit in the snapshot it was read in); it needs the read role. Fields
// the reader may not see (field protection) are removed. With asOf set,
// it returns the document as it was at that position (see ReadAsOf for the
// errors of a position it cannot read).
// Of a document that does not exist there, the error is NotFound and the
// ReadDocument holds only what the read reflects.
func (e *Engine) Document(ctx context.Context, u *sluice.User, org, name, id string, asOf *sluice.Position) (*ReadDocument, error) {
	defer processLoadGC.serving()() // a small request (loadGC)
	var doc *ReadDocument
	err := e.current(ctx, u, org, name, sluice.RoleRead, func(d *sluice.Database, s *sluice.Schema) error {
		var err error
		doc, err = e.document(ctx, u, d, s, id, asOf)
		return err
	})
	return doc, err
}

// document is Document with database d and its schema s.
func (e *Engine) document(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, id string, asOf *sluice.Position) (*ReadDocument, error) {
	class, key, ok := strings.Cut(id, "/")
	if !ok || key == "" {
		return nil, sluice.Errorf(sluice.CodeInvalid, "invalid document id %s: want <Class>/<key>", sluice.Echo(id))
	}
	// A key no document can have (NUL, invalid UTF-8, too long) is the
	// client's mistake, and must not reach SQL.
	if err := schema.CheckKey(key); err != nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, "invalid document id %s: %s", sluice.Echo(id), sluice.ErrorMessage(err))
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, err
	}
	rctx, snap := e.ReadSnapshot(ctx, d)
	defer snap.Close()
	var past *Past
	if asOf != nil {
		if past, err = e.ReadAsOf(rctx, d, s, role, snap, "as_of", *asOf); err != nil {
			return nil, err
		}
		if err := past.CheckClass(class); err != nil {
			return nil, err
		}
	} else {
		snap.OneStatement()
	}
	// After the past's check, which says why a class then is none now.
	if err := checkIDClass(s, id); err != nil {
		return nil, err
	}
	b, version, err := e.store.Document(rctx, d, s, id)
	if err != nil {
		if sluice.ErrorCode(err) == sluice.CodeNotFound {
			// Its absence is what the read found, at a position a
			// client follows from to see the document made.
			if pos, ok := snap.Position(); ok {
				if past != nil {
					pos = past.Position
				}
				return &ReadDocument{ReadAt: ReadAt{Position: pos}}, err
			}
		}
		return nil, err
	}
	doc := &ReadDocument{Version: version}
	switch {
	case hidesFields(role, s):
		doc.View = sluice.ViewName(role, d.SchemaVersion)
	case past == nil:
		// Outside the snapshot, which runs one statement: the schema
		// versions up to d's never change, so any read of them agrees.
		if doc.View, err = e.wholeView(ctx, d, class); err != nil {
			return nil, err
		}
	}
	doc.Position, _ = snap.Position()
	if doc.JSON, err = redactFor(role, s, b); err != nil || past == nil {
		return doc, err
	}
	doc.Position, doc.Hidden = past.Position, past.Hidden([]string{class})
	doc.JSON, err = dropUnknown(s, past, doc.JSON)
	return doc, err
}

// DocumentQuery selects documents for Documents.
type DocumentQuery struct {
	// Type limits the result to a class and its subclasses; empty means all.
	Type  string
	Skip  int64
	Count int64 // < 0: no limit
	// AsOf, when set, reads the documents as they were at that position.
	AsOf *sluice.Position
}

// Documents calls fn with each selected document's API-form JSON, ordered by
// id; it needs the read role. start is called once, before the first
// document (or, with none, before Documents returns nil), with what the
// documents reflect: they are read in one snapshot.
func (e *Engine) Documents(ctx context.Context, u *sluice.User, org, name string, q DocumentQuery, start func(ReadAt), fn func([]byte) error) error {
	defer processLoadGC.serving()() // a small request (loadGC)
	started := false
	return e.current(ctx, u, org, name, sluice.RoleRead, func(d *sluice.Database, s *sluice.Schema) error {
		if started {
			// Documents went out: the listing cannot start over.
			return sluice.Errorf(sluice.CodeConflict, "the schema of %s changed while the listing was read; retry it", d.Path())
		}
		return e.documents(ctx, u, d, s, q, func(at ReadAt) {
			started = true
			start(at)
		}, fn)
	})
}

// documents is Documents with database d and its schema s.
func (e *Engine) documents(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, q DocumentQuery, start func(ReadAt), fn func([]byte) error) error {
	var classes []string
	var notAClass error
	if q.Type != "" {
		c := s.Class(q.Type)
		if c == nil || c.Kind == sluice.KindSubdocument {
			notAClass = sluice.Errorf(sluice.CodeInvalid, "type %s is not a document class of %s", sluice.Echo(q.Type), d.Path())
			if q.AsOf == nil {
				return notAClass
			}
		}
		classes = documentClasses(s, q.Type)
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return err
	}
	rctx, snap := e.ReadSnapshot(ctx, d)
	defer snap.Close()
	var past *Past
	at := ReadAt{}
	if q.AsOf != nil {
		if past, err = e.ReadAsOf(rctx, d, s, role, snap, "as_of", *q.AsOf); err != nil {
			return err
		}
		read := classes
		if q.Type == "" {
			for _, n := range s.Order {
				if s.Classes[n].Kind == sluice.KindDocument {
					read = append(read, n)
				}
			}
			// Every class then, those dropped since too.
			if err := past.CheckAll(); err != nil {
				return err
			}
		} else if err := past.CheckClass(q.Type); err != nil {
			return err // dropped since, or one of its classes then was
		}
		if notAClass != nil {
			return notAClass
		}
		for _, c := range read {
			if err := past.CheckClass(c); err != nil {
				return err
			}
		}
		at = ReadAt{Position: past.Position, Hidden: past.Hidden(read)}
	} else {
		snap.OneStatement() // the listing, or the position alone
	}
	started := false
	begin := func() {
		if !started {
			started = true
			if past == nil {
				at.Position, _ = snap.Position()
			}
			start(at)
		}
	}
	if q.Type != "" && len(classes) == 0 {
		// No class to read: the position alone.
		if past == nil {
			if _, err := e.store.History(rctx, d.ID); err != nil {
				return err
			}
		}
		begin()
		return nil
	}
	err = e.store.Documents(rctx, d, s, classes, q.Skip, q.Count, func(b []byte) error {
		begin()
		out, err := redactFor(role, s, b)
		if err == nil && past != nil {
			out, err = dropUnknown(s, past, out)
		}
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
// Gone error, as does one whose tag names a commit the log no longer
// holds, another having taken its number (sluice.CheckTag, checked in
// the statement that reads the history): never a silent gap.
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
	h, named, err := e.store.PositionHistory(ctx, d.ID, after)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	if after.Epoch == "" {
		after.Epoch = d.Epoch // a commit id: of this database
	}
	if err := h.Check(d, after); err != nil {
		return nil, sluice.Position{}, err
	}
	if err := checkCommit(d, "position", after, named); err != nil {
		return nil, sluice.Position{}, err
	}
	// The page starts after the cursor of a reader that has after.
	from := after
	if c := sluice.CursorAt(after); c.Part < 0 {
		from = sluice.Position{Seq: c.Seq + 1, Index: -1}
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

// DocumentHistory returns a page of the versions of document id of
// database org/name, newest first, before position before (nil: from the
// newest): at most limit versions, with after images of at most maxBytes
// (see postgres.DB.DocumentHistory, which also bounds the log a page
// reads), redacted for u as history is (RedactCommit). A page that
// reached the oldest retained commit says, in Pruned, whether versions
// before it were pruned (historyPruned). It needs the read role. The
// page is read in one snapshot, whose position it returns too.
func (e *Engine) DocumentHistory(ctx context.Context, u *sluice.User, org, name, id string, before *sluice.Position, limit int, maxBytes int64) (*postgres.VersionPage, sluice.Position, error) {
	var page *postgres.VersionPage
	var pos sluice.Position
	err := e.current(ctx, u, org, name, sluice.RoleRead, func(d *sluice.Database, s *sluice.Schema) error {
		var err error
		page, pos, err = e.documentHistory(ctx, u, d, s, id, before, limit, maxBytes)
		return err
	})
	if err != nil {
		return nil, sluice.Position{}, err
	}
	return page, pos, nil
}

// documentHistory is DocumentHistory with database d and its schema s.
func (e *Engine) documentHistory(ctx context.Context, u *sluice.User, d *sluice.Database, s *sluice.Schema, id string, before *sluice.Position, limit int, maxBytes int64) (*postgres.VersionPage, sluice.Position, error) {
	if _, key, ok := strings.Cut(id, "/"); !ok || key == "" {
		return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "invalid document id %s: want <Class>/<key>", sluice.Echo(id))
	} else if err := schema.CheckKey(key); err != nil {
		return nil, sluice.Position{}, sluice.Errorf(sluice.CodeInvalid, "invalid document id %s: %s", sluice.Echo(id), sluice.ErrorMessage(err))
	}
	role, err := e.Role(ctx, u, d)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	ctx, snap := e.ReadSnapshot(ctx, d)
	defer snap.Close()
	from := sluice.Position{Epoch: d.Epoch, Seq: math.MaxInt64}
	if before != nil {
		if _, err := e.checkPast(ctx, d, "before", *before); err != nil {
			return nil, sluice.Position{}, err
		}
		from = *before
	}
	page, err := e.store.DocumentHistory(ctx, d, id, from, limit, maxBytes)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	if !page.More {
		if page.Pruned, err = e.historyPruned(ctx, d, s, id, from, page); err != nil {
			return nil, sluice.Position{}, err
		}
	}
	for i, c := range page.Versions {
		if page.Versions[i], err = e.RedactCommit(ctx, d, s, role, c); err != nil {
			return nil, sluice.Position{}, err
		}
	}
	pos, _ := snap.Position()
	return page, pos, nil
}

// historyPruned returns, for page, a page of the history of document id
// of d before position from that reached the oldest retained commit, the
// end of the newest pruned commit when the document existed there (so
// it had versions that were pruned), else nil. Nothing of the pruned
// commits is read (they are gone): the document existed at their end
// when its first change after it is not an addition, and, when it has
// none, when it exists now. The page's oldest version is that change;
// a page that holds none reads the log forward from its cursor to the
// document's next change (DocumentChangeAfter), and, finding none, the
// document itself. A document of that id that was added and then deleted
// before the end of the pruned commits did not exist there, and one whose
// class a schema change dropped since reads as if it had not (dropping
// documents logs no change): neither is told.
func (e *Engine) historyPruned(ctx context.Context, d *sluice.Database, s *sluice.Schema, id string, from sluice.Position, page *postgres.VersionPage) (*sluice.Position, error) {
	h, err := e.store.History(ctx, d.ID)
	if err != nil || h.PrunedSeq == 0 {
		return nil, err
	}
	var existed bool
	if n := len(page.Versions); n > 0 {
		existed = page.Versions[n-1].Changes[0].Op != sluice.OpAdded
	} else if op, ok, err := e.store.DocumentChangeAfter(ctx, d, id, from); err != nil {
		return nil, err
	} else if ok {
		existed = op != sluice.OpAdded
	} else {
		_, _, err := e.store.Document(ctx, d, s, id)
		if err != nil && sluice.ErrorCode(err) != sluice.CodeNotFound {
			return nil, err
		}
		existed = err == nil
	}
	if !existed {
		return nil, nil
	}
	return &sluice.Position{Epoch: d.Epoch, Seq: h.PrunedSeq, Index: sluice.WholeCommit}, nil
}

package graph

import (
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
)

// A change's documents are the commit's images: they are as of the
// commit. What an event (or a _ChangeSet) reads beyond them, the
// documents its references point to, its backlinks and the documents a
// filter through a reference tests, is read as of the commit too, so that
// an event is the same whenever it is read: live, resumed later, or
// asked for by _ChangeSet(commit:). Read in the present, a resumed stream
// got other payloads, and other filter answers, than the live one did.

// readAsOfCommit makes x read the database as of the end of commit c
// until the function it returns is called, which puts x back as it was.
// The reads run in the query's snapshot (x.snap), or a snapshot of their
// own. When nothing was committed after c, the present is c's state and
// the reads read it plainly; else they read as of c (x.past set), and
// what of that state the reader cannot be shown is refused by
// checkPastBeyond and checkPastThrough.
// The documents read are cached apart from x's others (the same id has
// another state in the present).
func (x *execution) readAsOfCommit(c *sluice.Commit) (func(), error) {
	// A query's reads run in its snapshot already: it reads as of c for
	// a while, rather than hold a second connection (one request with
	// two could wait for its user's share of the pool forever).
	ctx, snap := x.ctx, x.snap
	if snap != nil {
		if pos, ok := snap.Position(); ok && pos.Seq == c.Seq {
			return func() {}, nil // the query reads c's state already
		}
	}
	if snap == nil {
		ctx, snap = x.es.store.ReadSnapshot(x.ctx, x.req.DB)
	}
	end := func() {
		if snap != x.snap {
			snap.Close()
		} else {
			snap.SetAsOf(nil) // a query with _ChangeSet reads no other past (asOf)
		}
	}
	// A query's _ChangeSet reads as of the commit its client named, as a
	// read as of a position does, bounded by max_past_changes; a
	// subscription's event as of the commit the log came to, under the
	// same bound, whose error (engine.PastRangeError) takes the place of
	// the commit's events rather than end the stream (Subscription.evaluate).
	readAsOf := x.es.store.ReadAsOf
	if x.snap == nil {
		readAsOf = x.es.store.ReadAsOfEvent
	}
	past, err := readAsOf(ctx, x.req.DB, x.es.schema, x.es.role, snap, "commit", c.End())
	if err != nil {
		end()
		return nil, err
	}
	if pos, ok := snap.Position(); ok && pos.Seq == c.Seq {
		snap.SetAsOf(nil)
		past = nil
	}
	savedCtx, savedPast, savedCache, savedBacklinks := x.ctx, x.past, x.cache, x.backlinks
	x.ctx, x.past, x.cache, x.backlinks = ctx, past, map[string]*object{}, nil
	return func() {
		end()
		x.ctx, x.past, x.cache, x.backlinks = savedCtx, savedPast, savedCache, savedBacklinks
	}, nil
}

// followsReferences reports whether sel follows a reference or a backlink
// at any depth, which reads documents beyond those it is on (prefetch).
// It errs on the side of true: a field with a selection of its own named
// as some class's reference counts as one, whatever type it is on.
func (x *execution) followsReferences(sel ast.SelectionSet) bool {
	refs := map[string]bool{}
	for _, c := range x.es.schema.Classes {
		for _, f := range c.Fields {
			if f.Type.Kind == sluice.TypeReference {
				refs[f.Name] = true
			}
		}
	}
	seen := map[string]bool{}
	var follows func(sel ast.SelectionSet) bool
	follows = func(sel ast.SelectionSet) bool {
		for _, s := range sel {
			switch s := s.(type) {
			case *ast.Field:
				if len(s.SelectionSet) > 0 && (refs[s.Name] || mayBeBacklink(s.Name) || follows(s.SelectionSet)) {
					return true
				}
			case *ast.InlineFragment:
				if follows(s.SelectionSet) {
					return true
				}
			case *ast.FragmentSpread:
				if seen[s.Name] {
					continue
				}
				seen[s.Name] = true
				if def := x.op.Doc.Fragments.ForName(s.Name); def != nil && follows(def.SelectionSet) {
					return true
				}
			}
		}
		return false
	}
	return follows(sel)
}

// filterFollows reports whether filter e tests documents a reference
// points to (lookup).
func filterFollows(e filter.Expr) bool {
	switch e := e.(type) {
	case *filter.And:
		for _, s := range e.Exprs {
			if filterFollows(s) {
				return true
			}
		}
	case *filter.Or:
		for _, s := range e.Exprs {
			if filterFollows(s) {
				return true
			}
		}
	case *filter.Not:
		return filterFollows(e.Expr)
	case *filter.Sub:
		return filterFollows(e.Expr)
	case *filter.Ref:
		return true
	case *filter.Quant:
		switch e.Field.Type.Kind {
		case sluice.TypeReference:
			return true
		case sluice.TypeSubdocument:
			return filterFollows(e.Elem)
		}
	}
	return false
}

// checkPastBeyond checks, as checkPastSelection does, what selection sel
// on change images of class (and its subclasses) reads beyond the images
// as of x.past: the documents their references point to and their
// backlinks. The images' own fields are not checked: they are the
// commit's, and the commit's redaction shows them (RedactCommit).
func (x *execution) checkPastBeyond(sel ast.SelectionSet, class string) error {
	if x.past == nil {
		return nil
	}
	return x.checkPastBeyondIn(sel, class, classesOf(x.es.schema, class, true), map[pastKey]bool{})
}

func (x *execution) checkPastBeyondIn(sel ast.SelectionSet, static string, classes []string, seen map[pastKey]bool) error {
	for _, name := range classes {
		c := x.es.schema.Class(name)
		if c == nil {
			continue
		}
		for _, cf := range x.fields(sel, x.runtimeType(static, c)) {
			f := c.Field(cf.Name)
			if f == nil {
				if bl, ok := parseBacklink(x.es.schema, x.es.role, cf.Name); ok {
					if err := x.checkPastBacklink(cf, bl, seen); err != nil {
						return err
					}
				}
				continue
			}
			if len(cf.Selections) == 0 {
				continue
			}
			switch f.Type.Kind {
			case sluice.TypeSubdocument:
				// Part of the image: only what it references is beyond.
				if err := x.checkPastBeyondIn(cf.Selections, f.Type.Name, []string{f.Type.Name}, seen); err != nil {
					return err
				}
			case sluice.TypeReference:
				if err := x.checkPastRefSelection(cf.Selections, f.Type.Name, seen); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkPastThrough checks, as checkPastFilter does, what filter e tests
// through references as of x.past; the fields it tests on the image
// itself are checkImageFilter's.
func (x *execution) checkPastThrough(e filter.Expr) error {
	if x.past == nil {
		return nil
	}
	switch e := e.(type) {
	case *filter.And:
		for _, s := range e.Exprs {
			if err := x.checkPastThrough(s); err != nil {
				return err
			}
		}
	case *filter.Or:
		for _, s := range e.Exprs {
			if err := x.checkPastThrough(s); err != nil {
				return err
			}
		}
	case *filter.Not:
		return x.checkPastThrough(e.Expr)
	case *filter.Sub:
		return x.checkPastThrough(e.Expr)
	case *filter.Ref:
		return x.checkPastRef(e.Class, e.Expr)
	case *filter.Quant:
		switch e.Field.Type.Kind {
		case sluice.TypeReference:
			return x.checkPastRef(e.Field.Type.Name, e.Elem)
		case sluice.TypeSubdocument:
			return x.checkPastThrough(e.Elem)
		}
	}
	return nil
}

package changefeed

import (
	"context"
	"errors"

	"github.com/sluice-dev/sluice"
)

// Scan reads the log of database d after position from up to the end of
// commit upTo, in pieces as a catch-up reads them, and calls fn with each
// piece in order until fn returns false. It returns a CodeGone error when
// that history was pruned (or from is not of d's epoch: sluice.NotOf), a CodeInvalid
// one when from is ahead of upTo or names no event (inside a commit past
// its last change: Hub.checkIndex, as a resumed stream), and a CodeGone
// one when from's tag names a commit the log no longer holds, another
// having taken its number (sluice.ReplacedError): from the end of commit
// upTo, which the caller read, it checks nothing, the caller comparing
// the tags. A resumed live query judges with it
// whether anything since its client's position can have changed its
// result; what it costs grows with the changes read, and stops at the
// first fn refuses.
func (h *Hub) Scan(ctx context.Context, d *sluice.Database, from sluice.Position, upTo int64, fn func(*sluice.Commit) bool) error {
	if from.Epoch != d.Epoch {
		return sluice.Errorf(sluice.CodeGone, "%s; re-read the current state", sluice.NotOf(d, "position", from))
	}
	// A position inside commit upTo+1 is ahead too, though its cursor
	// (the end of the commit before) is not: that commit is not in the
	// log (lost in a failover or a restore), and the result built on it
	// is not current.
	if from.Seq > upTo {
		return sluice.Errorf(sluice.CodeInvalid, "position %s is ahead of commit %d", from, upTo)
	}
	m := sluice.CursorAt(from)
	if !m.Less(sluice.WholeCursor(upTo)) {
		return nil // nothing between them
	}
	hist, err := h.log.History(ctx, d.ID)
	if err != nil {
		return err
	}
	if err := hist.Check(d, from); err != nil {
		return err
	}
	if err := h.checkIndex(ctx, d, from); err != nil {
		return err
	}
	// The first read checks the commit from names by its tag, if it has
	// one (rewind.go): a replaced one is Gone, as for a resumed stream.
	of := sluice.TaggedStamp(from.Tag)
	for m.Less(sluice.WholeCursor(upTo)) {
		cs, more, err := h.readLogAt(ctx, d, m.After(), of)
		if errors.Is(err, sluice.ErrCommitReplaced) {
			return sluice.ReplacedError(d, "position", from)
		}
		if err != nil {
			return err
		}
		of = sluice.Stamp{}
		if len(cs) == 0 {
			return nil // the log ends before upTo: nothing more to judge
		}
		if !m.Follows(cs[0].Seq) {
			return sluice.Errorf(sluice.CodeGone, "the history of %s after commit %d was pruned", d.Path(), m.Seq)
		}
		for _, c := range cs {
			if c.Seq > upTo {
				return nil
			}
			if out := c.Since(m); out != nil && !fn(out) {
				return nil
			}
			m = m.Max(c.Taken())
		}
		if !more {
			return nil
		}
	}
	return nil
}

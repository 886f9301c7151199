package changefeed

import (
	"context"

	"github.com/sluice-dev/sluice"
)

// Scan reads the log of database d after position from up to the end of
// commit upTo, in pieces as a catch-up reads them, and calls fn with each
// piece in order until fn returns false. It returns a CodeGone error when
// that history was pruned (or from is from another epoch), a CodeInvalid
// one when from is ahead of upTo. A resumed live query judges with it
// whether anything since its client's position can have changed its
// result; what it costs grows with the changes read, and stops at the
// first fn refuses.
func (h *Hub) Scan(ctx context.Context, d *sluice.Database, from sluice.Position, upTo int64, fn func(*sluice.Commit) bool) error {
	if from.Epoch != d.Epoch {
		return sluice.Errorf(sluice.CodeGone, "position %s is from another incarnation of %s (epoch %s)", from, d.Path(), d.Epoch)
	}
	m := markAt(from)
	if !m.less(mark{seq: upTo, part: -1}) {
		if m.seq > upTo {
			return sluice.Errorf(sluice.CodeInvalid, "position %s is ahead of commit %d", from, upTo)
		}
		return nil // nothing between them
	}
	hist, err := h.log.History(ctx, d.ID)
	if err != nil {
		return err
	}
	if err := checkResume(d, hist, from); err != nil {
		return err
	}
	for m.less(mark{seq: upTo, part: -1}) {
		cs, more, err := h.log.ReadLog(ctx, d, m.after(), h.batch, h.piece)
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			return nil // the log ends before upTo: nothing more to judge
		}
		if !next(m, cs[0].Seq) {
			return sluice.Errorf(sluice.CodeGone, "the history of %s after commit %d was pruned", d.Path(), m.seq)
		}
		for _, c := range cs {
			if c.Seq > upTo {
				return nil
			}
			if out := m.rest(c); out != nil && !fn(out) {
				return nil
			}
			m = later(m, past(c))
		}
		if !more {
			return nil
		}
	}
	return nil
}

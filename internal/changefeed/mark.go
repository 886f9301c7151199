package changefeed

import "github.com/sluice-dev/sluice"

// A large commit is read from the log and handed on in pieces (see
// sluice.Commit.Partial), so that what a reader holds is bounded by the
// size of a piece, not of a commit. Readers therefore track how far they
// got as a mark: a whole commit, and possibly some changes of the next.

// mark is how far a reader of one database's log got: every change of
// every commit up to seq, and in commit seq+1 the changes up to index
// part (-1: none of it).
type mark struct {
	seq  int64
	part int
}

// markAt returns the mark of a reader that has every change up to
// position p (Index sluice.WholeCommit: all of commit p.Seq; -1: none of
// it).
func markAt(p sluice.Position) mark {
	if p.Index == sluice.WholeCommit {
		return mark{seq: p.Seq, part: -1}
	}
	return mark{seq: p.Seq - 1, part: p.Index}
}

// after returns the position to read the log after.
func (m mark) after() sluice.Position {
	if m.part < 0 {
		return sluice.Position{Seq: m.seq, Index: sluice.WholeCommit}
	}
	return sluice.Position{Seq: m.seq + 1, Index: m.part}
}

// less reports whether m is behind o.
func (m mark) less(o mark) bool {
	if m.seq != o.seq {
		return m.seq < o.seq
	}
	return m.part < o.part
}

// past returns the mark after piece c: the end of its commit, or its last
// change when more follow.
func past(c *sluice.Commit) mark {
	if c.Partial && len(c.Changes) > 0 {
		return mark{seq: c.Seq - 1, part: c.Changes[len(c.Changes)-1].Index}
	}
	return mark{seq: c.Seq, part: -1}
}

// rest returns what of piece c comes after m: c itself, or a copy holding
// only its changes after m; nil when none of its changes does. A commit
// without changes has nothing to deliver, unless it starts a schema
// version (sluice.Commit.NewSchema): every consumer must see that one,
// to evaluate what follows through the new schema.
func (m mark) rest(c *sluice.Commit) *sluice.Commit {
	if c.Seq <= m.seq {
		return nil
	}
	if len(c.Changes) == 0 {
		if c.NewSchema {
			return c
		}
		return nil
	}
	if c.Seq > m.seq+1 || m.part < 0 || c.Changes[0].Index > m.part {
		return c
	}
	i := 0
	for i < len(c.Changes) && c.Changes[i].Index <= m.part {
		i++
	}
	if i == len(c.Changes) {
		return nil
	}
	cc := *c
	cc.Changes = c.Changes[i:]
	return &cc
}

// later returns the greater of m and o.
func later(m, o mark) mark {
	if m.less(o) {
		return o
	}
	return m
}

// next reports whether a read after m that starts with commit seq missed
// nothing: seq is the commit m is in or after, or the one after that when
// m is inside a commit (whose remaining changes there may be none of:
// a resume from a commit's last change).
func next(m mark, seq int64) bool {
	return seq == m.seq+1 || m.part >= 0 && seq == m.seq+2
}

package sluice

import (
	"strconv"
	"strings"
)

// Position names one event in a database's history: the database epoch, the
// commit sequence and the index of the change within the commit. Its text
// form "<epoch>-<seq>-<index>" is the SSE event id; clients treat it as
// opaque. Positions of one epoch are totally ordered.
type Position struct {
	Epoch string
	Seq   int64
	Index int
}

// WholeCommit is the change index that stands for every change of a
// commit: Position{Seq: s, Index: WholeCommit} is the end of commit s.
const WholeCommit = 1<<31 - 1

// String returns the position's text form.
func (p Position) String() string {
	return p.Epoch + "-" + strconv.FormatInt(p.Seq, 10) + "-" + strconv.Itoa(p.Index)
}

// Less reports whether p comes before q (both of one epoch).
func (p Position) Less(q Position) bool {
	if p.Seq != q.Seq {
		return p.Seq < q.Seq
	}
	return p.Index < q.Index
}

// ParsePosition parses the text form of a position. It returns a CodeInvalid
// *Error naming the problem for anything else.
func ParsePosition(s string) (Position, error) {
	parts := strings.Split(s, "-")
	if len(parts) != 3 || parts[0] == "" {
		return Position{}, Errorf(CodeInvalid, "invalid stream position %q: want <epoch>-<seq>-<index>", s)
	}
	for _, r := range parts[0] {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return Position{}, Errorf(CodeInvalid, "invalid stream position %q: bad epoch", s)
		}
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || seq < 0 || parts[1] != strconv.FormatInt(seq, 10) {
		return Position{}, Errorf(CodeInvalid, "invalid stream position %q: bad sequence", s)
	}
	idx, err := strconv.Atoi(parts[2])
	if err != nil || idx < 0 || parts[2] != strconv.Itoa(idx) {
		return Position{}, Errorf(CodeInvalid, "invalid stream position %q: bad index", s)
	}
	if idx > WholeCommit {
		// Change indexes are Postgres integers: no commit has more.
		return Position{}, Errorf(CodeInvalid, "invalid stream position %q: index %d is above %d", s, idx, WholeCommit)
	}
	return Position{Epoch: parts[0], Seq: seq, Index: idx}, nil
}

package sluice

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"strconv"
	"strings"
	"time"
)

// Position names one event in a database's history: the database epoch, the
// commit sequence and the index of the change within the commit. Its text
// form "<epoch>-<seq>-<index>-<tag>" is the SSE event id; clients treat it
// as opaque. Positions of one epoch are totally ordered (by their numbers:
// Less ignores the tag).
type Position struct {
	Epoch string
	Seq   int64
	Index int
	// Tag is the tag of commit Seq's stamp (Stamp.Tag) when the position
	// was made from the commit, so that a reader resuming from it can tell
	// that commit from another that took its number after it was lost (a
	// Postgres failover, a restore): "" in a position made of numbers
	// alone (a reader's cursor, a client's "<epoch>-<seq>-<index>", which
	// older versions gave and which reads from it do not check).
	Tag string
}

// tagLen is the length of a stamp's tag: 8 characters of base32, 40 bits.
// A resume compares one tag with that of the one commit of its number, so
// a lost commit passes for its replacement once in 2^40.
const tagLen = 8

// tagEncoding writes tags: digits and lowercase letters, as epochs.
var tagEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// Stamp tells one commit of a database's log from another of the same
// sequence number: a log that lost its newest commits (a Postgres failover
// to an asynchronous standby, a restore) gives their numbers to the next
// commits, which sequence numbers alone cannot tell from the lost ones.
// The uid is unique in one history of the server, but a server rewound
// may draw a lost commit's uid again (the uid sequence rewinds with it);
// the time it was committed, later, tells them apart then. The zero
// Stamp is none; a position carries a tag of it (TaggedStamp).
type Stamp struct {
	UID  int64
	Time time.Time
	tag  string // of a stamp known only by its tag (UID 0)
}

// Tag returns the tag positions of the commit whose stamp s is carry: a
// hash of its uid and of the time it was committed (to the microsecond, as
// Postgres keeps it). A stamp known only by its tag has that one.
func (s Stamp) Tag() string {
	if s.UID == 0 {
		return s.tag
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(s.UID))
	binary.BigEndian.PutUint64(b[8:], uint64(s.Time.UnixMicro()))
	sum := sha256.Sum256(b[:])
	return tagEncoding.EncodeToString(sum[:5])
}

// TaggedStamp returns the stamp known only by tag (a client's position's
// Tag), "" being none: ReadLog compares it with the tag of the commit it
// checks.
func TaggedStamp(tag string) Stamp { return Stamp{tag: tag} }

// Is reports whether commit stamp o is s, or, s known only by its tag,
// has that tag.
func (s Stamp) Is(o Stamp) bool {
	if s.UID == 0 {
		return s.tag == o.Tag()
	}
	return s.UID == o.UID && s.Time.Equal(o.Time)
}

// IsZero reports whether s is none.
func (s Stamp) IsZero() bool { return s.UID == 0 && s.tag == "" }

// Untagged returns p without its tag: its numbers, for comparing
// positions whichever way they were made.
func (p Position) Untagged() Position {
	p.Tag = ""
	return p
}

// WholeCommit is the change index that stands for every change of a
// commit: Position{Seq: s, Index: WholeCommit} is the end of commit s.
const WholeCommit = 1<<31 - 1

// String returns the position's text form.
func (p Position) String() string {
	s := p.Epoch + "-" + strconv.FormatInt(p.Seq, 10) + "-" + strconv.Itoa(p.Index)
	if p.Tag != "" {
		s += "-" + p.Tag
	}
	return s
}

// Less reports whether p comes before q (both of one epoch).
func (p Position) Less(q Position) bool {
	if p.Seq != q.Seq {
		return p.Seq < q.Seq
	}
	return p.Index < q.Index
}

// ParsePosition parses the text form of a position, with or without its
// tag. It returns a CodeInvalid *Error naming the problem for anything
// else.
func ParsePosition(s string) (Position, error) {
	parts := strings.Split(s, "-")
	if len(parts) != 3 && len(parts) != 4 || parts[0] == "" {
		return Position{}, Errorf(CodeInvalid, "invalid stream position %s: want <epoch>-<seq>-<index>-<tag> or, without its tag, <epoch>-<seq>-<index>", Echo(s))
	}
	tag := ""
	if len(parts) == 4 {
		tag = parts[3]
		if len(tag) != tagLen || strings.Trim(tag, "0123456789abcdefghijklmnopqrstuv") != "" {
			return Position{}, Errorf(CodeInvalid, "invalid stream position %s: bad tag", Echo(s))
		}
	}
	for _, r := range parts[0] {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return Position{}, Errorf(CodeInvalid, "invalid stream position %s: bad epoch", Echo(s))
		}
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || seq < 0 || parts[1] != strconv.FormatInt(seq, 10) {
		return Position{}, Errorf(CodeInvalid, "invalid stream position %s: bad sequence", Echo(s))
	}
	idx, err := strconv.Atoi(parts[2])
	if err != nil || idx < 0 || parts[2] != strconv.Itoa(idx) {
		return Position{}, Errorf(CodeInvalid, "invalid stream position %s: bad index", Echo(s))
	}
	if idx > WholeCommit {
		// Change indexes are Postgres integers: no commit has more.
		return Position{}, Errorf(CodeInvalid, "invalid stream position %s: index %d is above %d", Echo(s), idx, WholeCommit)
	}
	return Position{Epoch: parts[0], Seq: seq, Index: idx, Tag: tag}, nil
}

// Cursor is how far a reader of one database's log got: every change of
// every commit up to Seq, and in commit Seq+1 the changes up to index Part
// (-1: none of it). Commits are read, and handed on, in pieces of bounded
// size (Commit.Partial), so a reader may stand inside a commit. It is the
// one log cursor of every reader of the log: the change feed's tailer and
// subscriptions, the shares of streams, a resumed live query's judgement
// of what changed, webhooks, and pages of /api/changes; each checks the
// history it reads with it (Follows), and keeps from pruning the commits
// after its Seq.
type Cursor struct {
	Seq  int64
	Part int
}

// CursorAt returns the cursor of a reader that has every change up to
// position p (Index WholeCommit: all of commit p.Seq).
func CursorAt(p Position) Cursor {
	if p.Index == WholeCommit {
		return Cursor{Seq: p.Seq, Part: -1}
	}
	return Cursor{Seq: p.Seq - 1, Part: p.Index}
}

// WholeCursor returns the cursor at the end of commit seq.
func WholeCursor(seq int64) Cursor { return Cursor{Seq: seq, Part: -1} }

// After returns the position to read the log after (what the reader has
// last: an event's position, or the end of a commit); of epoch "".
func (c Cursor) After() Position {
	if c.Part < 0 {
		return Position{Seq: c.Seq, Index: WholeCommit}
	}
	return Position{Seq: c.Seq + 1, Index: c.Part}
}

// Less reports whether c is behind o.
func (c Cursor) Less(o Cursor) bool {
	if c.Seq != o.Seq {
		return c.Seq < o.Seq
	}
	return c.Part < o.Part
}

// Max returns the later of c and o.
func (c Cursor) Max(o Cursor) Cursor {
	if c.Less(o) {
		return o
	}
	return c
}

// Follows reports whether a read after c that starts with commit seq
// missed nothing: seq is the commit after c's, or, when c is inside a
// commit, that commit (whose remaining changes there may be none of: a
// resume from a commit's last change) or the one after it. Sequences are
// gapless, so anything else means the history in between was pruned.
func (c Cursor) Follows(seq int64) bool {
	return seq == c.Seq+1 || c.Part >= 0 && seq == c.Seq+2
}

// Position returns the position c stands at, of epoch: the last change it
// has (as an event's id), or the end of its last whole commit.
func (c Cursor) Position(epoch string) Position {
	p := c.After()
	p.Epoch = epoch
	return p
}

package sluice

import (
	"testing"
	"time"
)

func TestParsePosition(t *testing.T) {
	t.Parallel()
	for _, good := range []Position{{Epoch: "k3x9", Seq: 42, Index: 7}, {Epoch: "a", Seq: 1, Index: WholeCommit}, {Epoch: "a", Seq: 1, Index: 0, Tag: "0v9k2mqa"}} {
		if got, err := ParsePosition(good.String()); err != nil || got != good {
			t.Fatalf("round trip: got %v, %v", got, err)
		}
	}
	for _, bad := range []string{"", "k3x9", "k3x9-42", "-1-2", "K3-1-2", "a-01-2", "a-1-02", "a--1-2", "a-1--2", "a-1-2-3", "a-x-1", "a-99999999999999999999-1", "a-1-2147483648", "a-1-9223372036854775807", "a-1-2-", "a-1-2-0v9k2mq", "a-1-2-0v9k2mqab", "a-1-2-0V9K2MQA", "a-1-2-0v9k2mqw", "a-1-2-0v9k2mqa-1"} {
		if _, err := ParsePosition(bad); err == nil || ErrorCode(err) != CodeInvalid {
			t.Errorf("ParsePosition(%q) = %v, want a BadRequest error", bad, err)
		}
	}
}

// TestStampTag: a commit's positions carry the tag of its stamp, which
// tells it from another commit of its number (another uid, or the same
// uid committed later: a rewound server draws uids again), and which a
// stamp known only by its tag matches as the full stamp does.
func TestStampTag(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 13, 0, 0, 123456000, time.UTC)
	c := &Commit{Epoch: "e", Seq: 5, UID: 77, Time: at}
	tag := c.Stamp().Tag()
	if len(tag) != tagLen || c.End().Tag != tag || c.Position(2).String() != "e-5-2-"+tag {
		t.Fatalf("tag %q, end %v, position %v", tag, c.End(), c.Position(2))
	}
	if p, err := ParsePosition(c.End().String()); err != nil || p != c.End() || p.Untagged() != (Position{Epoch: "e", Seq: 5, Index: WholeCommit}) {
		t.Fatalf("ParsePosition(%s) = %v, %v", c.End(), p, err)
	}
	same := Stamp{UID: 77, Time: at.In(time.FixedZone("x", 3600))}
	for _, other := range []Stamp{{UID: 78, Time: at}, {UID: 77, Time: at.Add(time.Microsecond)}} {
		if other.Tag() == tag || TaggedStamp(tag).Is(other) || c.Stamp().Is(other) {
			t.Errorf("stamp %v passes for %v", other, c.Stamp())
		}
	}
	if same.Tag() != tag || !TaggedStamp(tag).Is(same) || !c.Stamp().Is(same) || TaggedStamp(tag).IsZero() || !TaggedStamp("").IsZero() {
		t.Errorf("stamp %v does not match itself", same)
	}
	if p := (&Commit{Epoch: "e", Seq: 5}).End(); p.Tag != "" {
		t.Errorf("a commit read without its stamp has a tagged end %v", p)
	}
}

func FuzzParsePosition(f *testing.F) {
	f.Add("k3x9-42-7")
	f.Add("a-0-0")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePosition(s)
		if err != nil {
			return
		}
		if p.String() != s {
			t.Fatalf("ParsePosition(%q) = %v, which prints as %q", s, p, p.String())
		}
	})
}

func TestHistoryRetains(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		h    History
		p    Position
		want bool
	}{
		{History{LastSeq: 0}, Position{Seq: 0, Index: WholeCommit}, true}, // an empty log's end
		{History{LastSeq: 5}, Position{Seq: 0, Index: WholeCommit}, true},
		{History{LastSeq: 5, PrunedSeq: 3}, Position{Seq: 3, Index: WholeCommit}, true}, // the end of the newest pruned commit
		{History{LastSeq: 5, PrunedSeq: 3}, Position{Seq: 3, Index: 0}, false},          // inside it: the rest is gone
		{History{LastSeq: 5, PrunedSeq: 3}, Position{Seq: 2, Index: WholeCommit}, false},
		{History{LastSeq: 5, PrunedSeq: 3}, Position{Seq: 4, Index: 0}, true},
		{History{LastSeq: 5, PrunedSeq: 3}, Position{Seq: 0, Index: WholeCommit}, false},
	} {
		if got := tt.h.Retains(tt.p); got != tt.want {
			t.Errorf("%+v.Retains(%v) = %v, want %v", tt.h, tt.p, got, tt.want)
		}
	}
}

// TestCursor: the one log cursor of every reader; a resume inside a
// commit, the end of a piece, what of a piece comes after a cursor, and
// the gap check.
func TestCursor(t *testing.T) {
	inside := CursorAt(Position{Seq: 5, Index: 2}) // has changes 0..2 of commit 5
	whole := CursorAt(Position{Seq: 5, Index: WholeCommit})
	if inside != (Cursor{Seq: 4, Part: 2}) || whole != WholeCursor(5) {
		t.Fatalf("CursorAt: %+v %+v", inside, whole)
	}
	if inside.After() != (Position{Seq: 5, Index: 2}) || whole.After() != (Position{Seq: 5, Index: WholeCommit}) {
		t.Fatalf("After: %+v %+v", inside.After(), whole.After())
	}
	if p := inside.Position("e"); p.String() != "e-5-2" {
		t.Fatalf("Position: %s", p)
	}
	if !inside.Less(whole) || whole.Less(inside) || inside.Max(whole) != whole || whole.Max(inside) != whole {
		t.Fatal("order")
	}
	c := &Commit{Seq: 5, Changes: []Change{{Index: 1}, {Index: 2}, {Index: 3}}, Partial: true}
	if c.Taken() != (Cursor{Seq: 4, Part: 3}) {
		t.Fatalf("End of a piece: %+v", c.Taken())
	}
	if rest := c.Since(inside); len(rest.Changes) != 1 || rest.Changes[0].Index != 3 || len(c.Changes) != 3 {
		t.Fatalf("Since inside: %+v", rest)
	}
	if c.Since(whole) != nil || c.Since(CursorAt(Position{Seq: 5, Index: 3})) != nil {
		t.Fatal("Since what the reader has")
	}
	if c.Since(WholeCursor(4)) != c {
		t.Fatal("a piece after the cursor is whole")
	}
	schema := &Commit{Seq: 6, NewSchema: true}
	if schema.Since(whole) != schema || (&Commit{Seq: 6}).Since(whole) != nil {
		t.Fatal("a commit without changes is delivered only when it starts a schema version")
	}
	c.Partial = false
	if c.Taken() != WholeCursor(5) {
		t.Fatalf("End of a whole commit: %+v", c.Taken())
	}
	for _, f := range []struct {
		c    Cursor
		seq  int64
		want bool
	}{{whole, 6, true}, {whole, 7, false}, {whole, 5, false}, {inside, 5, true}, {inside, 6, true}, {inside, 7, false}} {
		if got := f.c.Follows(f.seq); got != f.want {
			t.Errorf("%+v.Follows(%d) = %v", f.c, f.seq, got)
		}
	}
}

// TestHistoryCheck: a resume is refused from another epoch, from before
// retained history (inside a pruned commit too) and from past the log.
func TestHistoryCheck(t *testing.T) {
	d := &Database{Org: "o", Name: "d", Epoch: "e"}
	h := History{LastSeq: 10, PrunedSeq: 4}
	for _, c := range []struct {
		p    Position
		code Code
	}{
		{Position{Epoch: "e", Seq: 4, Index: WholeCommit}, ""},
		{Position{Epoch: "e", Seq: 10, Index: 0}, ""},
		{Position{Epoch: "f", Seq: 5, Index: 0}, CodeGone},
		{Position{Epoch: "e", Seq: 4, Index: 0}, CodeGone},
		{Position{Epoch: "e", Seq: 3, Index: WholeCommit}, CodeGone},
		{Position{Epoch: "e", Seq: 11, Index: 0}, CodeInvalid},
	} {
		err := h.Check(d, c.p)
		if c.code == "" && err != nil || c.code != "" && ErrorCode(err) != c.code {
			t.Errorf("%s: %v, want %q", c.p, err, c.code)
		}
	}
	// Commit 0 is none: a change of it names no event, in a log never
	// pruned too (it was answered as pruned). Its end is the start.
	whole := History{LastSeq: 10}
	for _, c := range []struct {
		p    Position
		code Code
	}{
		{Position{Epoch: "e", Seq: 0, Index: WholeCommit}, ""},
		{Position{Epoch: "e", Seq: 0, Index: 0}, CodeInvalid},
	} {
		err := whole.Check(d, c.p)
		if c.code == "" && err != nil || c.code != "" && ErrorCode(err) != c.code {
			t.Errorf("%s: %v, want %q", c.p, err, c.code)
		}
	}
}

package sluice

import "testing"

func TestParsePosition(t *testing.T) {
	t.Parallel()
	for _, good := range []Position{{Epoch: "k3x9", Seq: 42, Index: 7}, {Epoch: "a", Seq: 1, Index: WholeCommit}} {
		if got, err := ParsePosition(good.String()); err != nil || got != good {
			t.Fatalf("round trip: got %v, %v", got, err)
		}
	}
	for _, bad := range []string{"", "k3x9", "k3x9-42", "-1-2", "K3-1-2", "a-01-2", "a-1-02", "a--1-2", "a-1--2", "a-1-2-3", "a-x-1", "a-99999999999999999999-1", "a-1-2147483648", "a-1-9223372036854775807"} {
		if _, err := ParsePosition(bad); err == nil || ErrorCode(err) != CodeInvalid {
			t.Errorf("ParsePosition(%q) = %v, want a BadRequest error", bad, err)
		}
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

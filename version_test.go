package sluice

import (
	"errors"
	"strings"
	"testing"
)

func TestVersions(t *testing.T) {
	t.Parallel()
	for _, uid := range []int64{1, 35, 36, 123456789, 1<<63 - 1} {
		if got, ok := ParseVersion(VersionOf(uid)); !ok || got != uid {
			t.Errorf("ParseVersion(VersionOf(%d)) = %d, %v", uid, got, ok)
		}
	}
	for _, bad := range []string{"", "0", "01", "A", "-1", "*", `"3f"`, "zzzzzzzzzzzzzz", "3f "} {
		if _, ok := ParseVersion(bad); ok {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
}

func TestVersionOfTag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ opaque, want string }{
		{"3f", "3f"},
		{"3f-" + ViewName(RoleRead, 7), "3f"},
		{"3f-write-12", "3f"},
		{"*", "*"},
		{"3f-read", "3f-read"},
		{"3f-read-", "3f-read-"},
		{"3f-read-07", "3f-read-07"},
		{"3f-read-0", "3f-read-0"},
		{"3f-none-7", "3f-none-7"},
		{"3f-reader-7", "3f-reader-7"},
		{"3f-read-7-1", "3f-read-7-1"},
		{"-read-7", "-read-7"}, // never "": that would expect nothing
	} {
		if got := VersionOfTag(tc.opaque); got != tc.want {
			t.Errorf("VersionOfTag(%q) = %q, want %q", tc.opaque, got, tc.want)
		}
	}
}

func FuzzVersionOfTag(f *testing.F) {
	f.Add("3f-read-7")
	f.Add("-write-1")
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			return
		}
		v := VersionOfTag(s)
		if v == "" || v != s && v+"-" != s[:len(v)+1] {
			t.Fatalf("VersionOfTag(%q) = %q", s, v)
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	f.Add("3f")
	f.Add("1y2p0ij32e8e7")
	f.Fuzz(func(t *testing.T, s string) {
		if uid, ok := ParseVersion(s); ok && VersionOf(uid) != s {
			t.Fatalf("ParseVersion(%q) = %d, which is version %q", s, uid, VersionOf(uid))
		}
	})
}

func TestPreconditionHolds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p       Precondition
		current string
		want    bool
	}{
		{Precondition{}, "", true},
		{Precondition{}, "3f", true},
		{Precondition{Version: "3f"}, "3f", true},
		{Precondition{Version: "3f"}, "3g", false},
		{Precondition{Version: "3f"}, "", false},
		{Precondition{Exists: true}, "3g", true},
		{Precondition{Exists: true}, "", false},
		{Precondition{Version: "*"}, "3g", false}, // If-Match: "*", "@version": "*"
		{Precondition{Version: "*"}, "", false},
		{Precondition{Absent: true}, "", true},
		{Precondition{Absent: true}, "3f", false},
	} {
		if got := tc.p.Holds(tc.current); got != tc.want {
			t.Errorf("%+v.Holds(%q) = %v", tc.p, tc.current, got)
		}
	}
}

func TestStaleError(t *testing.T) {
	t.Parallel()
	one := NewStaleError([]StaleDocument{{ID: "Person/a", Version: "3f"}})
	two := NewStaleError([]StaleDocument{{ID: "Person/a", Version: "3f"}, {ID: "Person/b"}})
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{one, []string{"document Person/a", "its version is 3f", "nothing was written"}},
		{two, []string{"2 documents", "Person/a (its version is 3f)", "Person/b (it does not exist)"}},
	} {
		if ErrorCode(tc.err) != CodePrecondition || CodePrecondition.HTTPStatus() != 412 || CodePrecondition.GraphQLCode() != "PRECONDITION_FAILED" {
			t.Fatalf("%v: code %s", tc.err, ErrorCode(tc.err))
		}
		for _, w := range tc.want {
			if !strings.Contains(ErrorMessage(tc.err), w) {
				t.Errorf("%q lacks %q", ErrorMessage(tc.err), w)
			}
		}
	}
	var se *StaleError
	if !errors.As(error(two), &se) || len(se.Docs) != 2 {
		t.Fatal("not a StaleError")
	}
	if s := CodeOutcomeUnknown.HTTPStatus(); s == 503 || s < 500 || CodeOutcomeUnknown.RetryAfter() != "" {
		t.Fatalf("an unknown outcome answers %d, Retry-After %q: a blind retry could write twice", s, CodeOutcomeUnknown.RetryAfter())
	}
}

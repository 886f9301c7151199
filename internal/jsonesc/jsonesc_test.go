package jsonesc

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

var cases = []struct {
	in  string
	bad int // -1: none
}{
	{`"plain"`, -1},
	{`"é and 😀"`, -1},
	{`"\u00e9\n\t\"\\\/"`, -1},
	{`"\ud83d\ude00"`, -1}, // a pair: 😀
	{`"\uD83D\uDE00"`, -1}, // the same, upper case
	{`"\\ud800"`, -1},      // an escaped backslash, then text
	{`"\\\\ud800"`, -1},    // two of them
	{`"\ud800"`, 1},        // a high half alone
	{`"ab\udc00"`, 3},      // a low half alone
	{`"\ud800\n"`, 1},      // followed by another escape
	{`"\ud800x"`, 1},       // followed by text
	{`"\ud800\u0041"`, 1},  // followed by an escape that is not a low half
	{`"\ud800\ud800\udc00"`, 1},
	{`"\\\ud800"`, 3}, // an escaped backslash, then an escape
	{`{"a":"\u0041","b":["\udfff"]}`, 20},
	{`"\ud800`, 1}, // the text ends after the high half
	{`"\ud800\`, 1},
	{`"\ud800\u`, 1},
	{`"\ud800\udc0`, 1},
	{`"\u12`, -1},       // invalid JSON: not this package's to say
	{`"\u12\udc00"`, 5}, // a broken escape does not hide the next one
}

func TestFind(t *testing.T) {
	for _, c := range cases {
		l, bad := Find([]byte(c.in))
		if want := c.bad >= 0; bad != want || bad && int(l.Offset) != c.bad {
			t.Errorf("Find(%s) = %d, %v; want %d", c.in, l.Offset, bad, c.bad)
		}
		if bad && !strings.EqualFold(l.Escape(), c.in[c.bad:c.bad+6]) {
			t.Errorf("Find(%s) names %s", c.in, l.Escape())
		}
	}
}

// TestPieces checks that any split of the text into two pieces finds the
// same: a stream is read in pieces of any length.
func TestPieces(t *testing.T) {
	for _, c := range cases {
		for cut := 0; cut <= len(c.in); cut++ {
			if off, bad := inPieces(c.in, cut); bad != (c.bad >= 0) || bad && off != c.bad {
				t.Errorf("%s cut at %d: %d, %v; want %d", c.in, cut, off, bad, c.bad)
			}
		}
	}
}

func inPieces(s string, cuts ...int) (int, bool) {
	var sc Scanner
	last := 0
	for _, cut := range cuts {
		if l, bad := sc.Write([]byte(s[last:cut])); bad {
			return int(l.Offset), true
		}
		last = cut
	}
	if l, bad := sc.Write([]byte(s[last:])); bad {
		return int(l.Offset), true
	}
	l, bad := sc.End()
	return int(l.Offset), bad
}

// reference finds the first lone half the obvious way, on valid JSON.
func reference(b string) (int, bool) {
	for i := 0; i < len(b); {
		if b[i] != '\\' {
			i++
			continue
		}
		if b[i+1] != 'u' {
			i += 2
			continue
		}
		v := hexValue(b[i+2 : i+6])
		switch {
		case 0xDC00 <= v && v < 0xE000:
			return i, true
		case 0xD800 <= v && v < 0xDC00:
			if i+12 > len(b) || b[i+6:i+8] != `\u` {
				return i, true
			}
			if w := hexValue(b[i+8 : i+12]); w < 0xDC00 || w >= 0xE000 {
				return i, true
			}
			i += 12
		default:
			i += 6
		}
	}
	return 0, false
}

func hexValue(s string) rune {
	var v rune
	for i := range len(s) {
		d, _ := hexDigit(s[i])
		v = v<<4 | d
	}
	return v
}

func FuzzScanner(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in, 3, 7)
	}
	f.Add(`["\ud83d\ude00","\ud83d"]`, 5, 12)
	f.Fuzz(func(t *testing.T, s string, a, b int) {
		l, bad := Find([]byte(s))
		off := int(l.Offset)
		// Any cut into three pieces finds the same.
		a, b = clamp(a, len(s)), clamp(b, len(s))
		if a > b {
			a, b = b, a
		}
		if poff, pbad := inPieces(s, a, b); pbad != bad || bad && poff != off {
			t.Fatalf("%q in pieces at %d, %d: %d, %v; whole: %d, %v", s, a, b, poff, pbad, off, bad)
		}
		if !json.Valid([]byte(s)) {
			return
		}
		if roff, rbad := reference(s); rbad != bad || bad && roff != off {
			t.Fatalf("%q: %d, %v; the reference finds %d, %v", s, off, bad, roff, rbad)
		}
		// UTF-8 text with no lone half decodes without a U+FFFD that it
		// did not hold.
		var v any
		if err := json.Unmarshal([]byte(s), &v); err == nil && !bad && utf8.ValidString(s) {
			decoded, _ := json.Marshal(v)
			if strings.Count(string(decoded), "\ufffd") > strings.Count(s, "\ufffd")+strings.Count(strings.ToLower(s), `\ufffd`) {
				t.Fatalf("%q decodes to %s, with a U+FFFD it did not hold", s, decoded)
			}
		}
	})
}

func clamp(n, max int) int {
	if n < 0 {
		n = -n
	}
	if max == 0 {
		return 0
	}
	return n % (max + 1)
}

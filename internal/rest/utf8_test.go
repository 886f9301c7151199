package rest

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// checkChunks runs utf8Check over data cut into chunks of the sizes in
// cuts (cycled; a size of 0 is an empty read) and returns its error.
func checkChunks(data []byte, cuts []byte) error {
	var c utf8Check
	for i, k := 0, 0; i < len(data); k++ {
		n := 1
		if len(cuts) > 0 {
			n = int(cuts[k%len(cuts)] % 8)
		}
		n = min(n, len(data)-i)
		if err := c.write(data[i : i+n]); err != nil {
			return err
		}
		i += n
		if k > 8*len(data)+8 { // only empty reads: read the rest at once
			if err := c.write(data[i:]); err != nil {
				return err
			}
			break
		}
	}
	return c.end()
}

func TestUTF8Check(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" for valid, else the error's byte offset
	}{
		{`{"a":"é€😀"}`, ""},
		{"", ""},
		{"\uFFFD", ""}, // U+FFFD as sent is text like any other
		{`{"a":"` + "\xff" + `"}`, "byte 6 "},
		{`{"a":"` + "\xe2\x82" + `"}`, "byte 6 "}, // cut short by the quote
		{`{"a":"x"}` + "\xe2\x82", "byte 9 "},     // cut short by the end
		{"\xed\xa0\x80", "byte 0 "},               // a surrogate
		{"\xc0\xaf", "byte 0 "},                   // overlong
		{"ab\x80", "byte 2 "},
	} {
		for _, cuts := range [][]byte{nil, {1}, {2}, {3, 1}, {0, 5}, {7}} {
			err := checkChunks([]byte(tc.in), cuts)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%q cut %v: %v, want valid", tc.in, cuts, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%q cut %v: %v, want an error at %s", tc.in, cuts, err, tc.want)
			}
		}
	}
}

// FuzzUTF8Check: however a body is cut into reads, it is refused exactly
// when it is not valid UTF-8, at its first invalid byte.
func FuzzUTF8Check(f *testing.F) {
	f.Add([]byte(`{"a":"é"}`), []byte{1})
	f.Add([]byte("\xe2\x82\xac\xe2\x82"), []byte{2, 0, 3})
	f.Add([]byte("a\xf0\x9f\x98"), []byte{1, 1, 1})
	f.Add([]byte("\xf4\x90\x80\x80"), []byte{3})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		err := checkChunks(data, cuts)
		if utf8.Valid(data) {
			if err != nil {
				t.Fatalf("%q cut %v: %v, want valid", data, cuts, err)
			}
			return
		}
		want := (&utf8Check{}).invalid(int64(firstInvalid(data)))
		if err == nil || err.Error() != want.Error() {
			t.Fatalf("%q cut %v: %v, want %v", data, cuts, err, want)
		}
	})
}

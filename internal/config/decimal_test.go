package config

import (
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// canonical is how docs/configuration.md writes a size or a count:
// decimal digits, no sign, no leading zero.
var canonical = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// FuzzParseDecimal: parseDecimal takes exactly the canonical decimal
// numbers that fit an int64, and returns their value.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0", "16", "1024", "9223372036854775807", "9223372036854775808",
		"", "+16", "-1", "010", "00", "0x10", "0o20", "0b10000", "1_000", "1e3", "16.0", " 16", "16 ", "١٦"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseDecimal(s)
		want := canonical.MatchString(s)
		if want {
			b, _ := new(big.Int).SetString(s, 10)
			want = b.IsInt64()
		}
		if ok != want {
			t.Fatalf("parseDecimal(%q) ok = %v, want %v", s, ok, want)
		}
		if ok && strconv.FormatInt(n, 10) != s {
			t.Fatalf("parseDecimal(%q) = %d", s, n)
		}
	})
}

// FuzzFileSize: a size in a config file, whatever its format, is taken
// only as a variable would take the same text, and then with the same
// value.
func FuzzFileSize(f *testing.F) {
	for _, s := range []string{"16", "0x10", "010", "0o20", "0b10000", "1_024", "+16", "1e3", "16.0", "1.5", `"16"`, "18446744073709551615"} {
		f.Add("yaml", s)
		f.Add("toml", s)
		f.Add("json", s)
	}
	f.Fuzz(func(t *testing.T, format, literal string) {
		var content string
		switch format {
		case "yaml":
			content = "max_body_bytes: " + literal + "\n"
		case "toml":
			content = "max_body_bytes = " + literal + "\n"
		case "json":
			content = `{"max_body_bytes": ` + literal + "}"
		default:
			return
		}
		path := filepath.Join(t.TempDir(), "s."+format)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(nil, func(k string) (string, bool) {
			if k == configEnv {
				return path, true
			}
			return "", false
		})
		if err != nil {
			return // a file that does not parse, or a value refused
		}
		// Taken: its value is written in the file as a variable would
		// write it, in decimal digits that no other character of a
		// number (0x, 0o, 0b, _, ., e, a sign) touches.
		want := strconv.FormatInt(c.MaxBodyBytes, 10)
		if c.MaxBodyBytes <= 0 || !plainIn(literal, want) {
			t.Fatalf("%s file with max_body_bytes %s: loaded %d", format, literal, c.MaxBodyBytes)
		}
	})
}

// plainIn reports whether digits occur in s with no letter, digit, "_",
// ".", "+" or "-" on either side.
func plainIn(s, digits string) bool {
	part := func(b byte) bool {
		return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || strings.IndexByte("_.+-", b) >= 0
	}
	for i := 0; ; {
		j := strings.Index(s[i:], digits)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(digits)
		if (start == 0 || !part(s[start-1])) && (end == len(s) || !part(s[end])) {
			return true
		}
		i = start + 1
	}
}

package sluice

import (
	"math/big"
	"testing"
	"time"
)

func TestDurationTooLong(t *testing.T) {
	for in, long := range map[string]bool{
		"2562048h":                 true,
		"100000000h":               true,
		"2562047h47m16.854775808s": true,
		"99999999999999999999ns":   true,
		"-3000000h":                true,
		"2562047h47m16.854775807s": false,
		"168h":                     false,
		"1.5h":                     false,
		"0":                        false,
		"soon":                     false,
		"100000000":                false,
		"100000000hh":              false,
		"h":                        false,
		".h":                       false,
		"":                         false,
		"100000000h ":              false,
		"-+1h":                     false, // misspelt: one sign at most
	} {
		if got := DurationTooLong(in) != nil; got != long {
			t.Errorf("DurationTooLong(%q) != nil: %t, want %t", in, got, long)
		}
	}
}

// FuzzDurationTooLong checks DurationTooLong against time.ParseDuration
// and a reading of Go's duration grammar made here: it refuses as too
// long only text spelt as a duration that time.ParseDuration refuses, and
// every such text whose whole numbers alone name more than MaxDuration.
// The seed -+1h was found by it: a second sign, refused by
// time.ParseDuration as misspelt, was answered "too long".
func FuzzDurationTooLong(f *testing.F) {
	for _, s := range []string{"2562048h", "99999999999999999999ns", "-3000000h", "1.5h", "0", "soon", ".h", "", "100000000h ", "-+1h", "+-1h", "1.5.5h", "5.h", "1µs2μs", "+.5m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := DurationTooLong(s)
		_, perr := time.ParseDuration(s)
		whole, spelt := durationWholeNanos(s)
		if err != nil && (perr == nil || !spelt) {
			t.Fatalf("DurationTooLong(%q) = %v, but time.ParseDuration says %v (spelt as a duration: %t)", s, err, perr, spelt)
		}
		if err == nil && spelt && whole.Cmp(new(big.Int).Lsh(big.NewInt(1), 63)) > 0 {
			t.Fatalf("DurationTooLong(%q) = nil, but its whole numbers name %v ns", s, whole)
		}
	})
}

// durationWholeNanos reads s as time.ParseDuration's grammar has it (one
// optional sign, then numbers each with a unit; "0" alone needs none)
// and returns the nanoseconds of the whole parts of its numbers, without
// bound; spelt is false when s is not spelt as a duration.
func durationWholeNanos(s string) (whole *big.Int, spelt bool) {
	units := map[string]int64{"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}
	whole = new(big.Int)
	if s == "0" {
		return whole, true
	}
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	if s == "" {
		return nil, false
	}
	isDigit := func(c byte) bool { return '0' <= c && c <= '9' }
	for s != "" {
		i := 0
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		n, _ := new(big.Int).SetString("0"+s[:i], 10)
		digits := i
		if i < len(s) && s[i] == '.' {
			j := i + 1
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			digits += j - i - 1
			i = j
		}
		if digits == 0 {
			return nil, false
		}
		s = s[i:]
		u := 0
		for u < len(s) && s[u] != '.' && !isDigit(s[u]) {
			u++
		}
		scale, ok := units[s[:u]]
		if !ok {
			return nil, false
		}
		whole.Add(whole, n.Mul(n, big.NewInt(scale)))
		s = s[u:]
	}
	return whole, true
}

package sluice

import "testing"

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
	} {
		if got := DurationTooLong(in) != nil; got != long {
			t.Errorf("DurationTooLong(%q) != nil: %t, want %t", in, got, long)
		}
	}
}

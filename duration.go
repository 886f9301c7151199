package sluice

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// MaxDuration is the largest duration a setting can take, Go's largest
// (time.Duration counts nanoseconds in an int64): 2562047h47m16.854775807s,
// about 292 years.
const MaxDuration = time.Duration(math.MaxInt64)

// DurationTooLong returns the error, safe to show, for s when
// time.ParseDuration refused it for being past MaxDuration: s is written
// as a duration is ("100000000h") but names more time than one holds. It
// returns nil for text that is not a duration at all, for which the
// caller says what it wants. time.ParseDuration answers both with one
// error, and "want a duration such as …" of "2562048h" did not say it
// was too long.
func DurationTooLong(s string) error {
	if !durationSyntax(s) {
		return nil
	}
	if _, err := time.ParseDuration(s); err == nil {
		return nil
	}
	return fmt.Errorf("too long: the largest duration is %s (about %d years)", MaxDuration, int64(MaxDuration/(24*time.Hour*365)))
}

// durationSyntax reports whether s is spelt as time.ParseDuration takes a
// duration other than "0": an optional sign, then one or more numbers
// (digits, a fraction or both) each followed by a unit.
func durationSyntax(s string) bool {
	// One sign at most: time.ParseDuration refuses "-+1h" as misspelt.
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for s != "" {
		n := len(s) - len(strings.TrimLeft(s, "0123456789"))
		digits := n
		if n < len(s) && s[n] == '.' {
			f := len(s[n+1:]) - len(strings.TrimLeft(s[n+1:], "0123456789"))
			digits += f
			n += 1 + f
		}
		if digits == 0 {
			return false
		}
		s = s[n:]
		unit := false
		for _, u := range []string{"ns", "us", "µs", "μs", "ms", "s", "m", "h"} {
			if strings.HasPrefix(s, u) {
				s, unit = s[len(u):], true
				break
			}
		}
		if !unit {
			return false
		}
	}
	return true
}

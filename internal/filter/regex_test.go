package filter_test

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
)

// TestCompileRegexWritesPostgresPatterns pins the Postgres form of the
// dialect's constructs. Whether Postgres then matches like Go is checked
// against a real Postgres in internal/postgres (FuzzRegexDialect).
func TestCompileRegexWritesPostgresPatterns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ pattern, are string }{
		{`^Al`, `^Al`},
		{`a.b`, `a.b`},              // . matches a newline in both
		{`(?-s)a.b`, `a[^\u000A]b`}, // unless (?-s) says otherwise
		{`(?i)k`, `[Kk\u212A]`},     // Go's case folding, written out
		{`(?i)[a-c]`, `[A-Ca-c]`},   // folded by the parser
		{`\d+\s\w`, `[0-9]+[\u0009-\u000A\u000C-\u000D\u0020][0-9A-Z\u005Fa-z]`}, // ASCII, not the locale's
		{`[[:alpha:]]`, `[A-Za-z]`},
		{`[^a]`, `[^a]`},
		{`a|b|`, `(?:[a-b]|(?:))`},
		{`(a)*`, `(?:(?:a))*`},
		{`(?:^)*a`, `(?:^)*a`}, // Postgres refuses a quantifier right after an anchor
		{`x{2,}y{3}z{1,4}`, `x{2,}y{3}z{1,4}`},
		{`a*?b??`, `a*b?`}, // greediness does not change whether a string matches
		{`\$\^\\`, `\u0024\u005E\u005C`},
		{`\Q***:x\E`, `\u002A\u002A\u002A\u003Ax`}, // not an ARE director
		{`😀é`, `\U0001F600\u00E9`},
		{"\x00", `[^\u0001-\uD7FF\uE000-\U0010FFFF]`}, // text holds no NUL: matches nothing
		{`[\x00-\x{10FFFF}]`, `.`},
	} {
		re, err := filter.CompileRegex(c.pattern)
		if err != nil {
			t.Errorf("%q: %v", c.pattern, err)
			continue
		}
		if re.ARE != c.are {
			t.Errorf("%q: ARE %q, want %q", c.pattern, re.ARE, c.are)
		}
	}
}

// TestCompileRegexRefusesWhatTheEnginesDisagreeOn checks that every
// construct outside the dialect is refused with CodeInvalid and a message
// naming it.
func TestCompileRegexRefusesWhatTheEnginesDisagreeOn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ pattern, want string }{
		{`\bAl`, `\b (a word boundary) is not supported`},
		{`Al\B`, `\B (a word boundary) is not supported`},
		{`\pL`, `Unicode classes (\p) are not supported`},
		{`\P{Greek}`, `Unicode classes (\P) are not supported`},
		{`[\pL]`, `Unicode classes (\p) are not supported`},
		{`(?m)^Al`, `^ and $ in multi-line mode (?m) are not supported`},
		{`(?m:x$)`, `^ and $ in multi-line mode (?m) are not supported`},
		{`a{256}`, `a repetition count above 255 is not supported`},
		{`a{1,300}`, `a repetition count above 255 is not supported`},
		{`(?:a?b?){255}`, `more than 64 optional parts in a row`},
		{`(?:(?:a?b?c?)*){200}`, `more than 64 optional parts in a row`},
		{`(?:a?){65}`, `more than 64 optional parts in a row`},
		{`(?:(?:abcdefghij){100}){3}`, `expands to more than 2000 elements`},
		{`\C`, `invalid escape sequence`},
		{`(`, `missing closing )`},
		{"\xff", `invalid UTF-8`},
		{strings.Repeat("a", 1001), `longer than 1000 bytes`},
	} {
		_, err := filter.CompileRegex(c.pattern)
		if sluice.ErrorCode(err) != sluice.CodeInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: got %v, want CodeInvalid saying %q", c.pattern, err, c.want)
		}
	}
	// Just inside the bounds.
	for _, p := range []string{`(?:a?){64}`, `(?:a?b?){32}`, `a{255}`, `.{0,255}x.{0,255}`, strings.Repeat("a", 1000)} {
		if _, err := filter.CompileRegex(p); err != nil {
			t.Errorf("%.40q: %v", p, err)
		}
	}
}

package postgres

import (
	"context"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// regexOracle runs filter regexes in Postgres exactly as compiled filters
// do (regexMatch), to compare with Go.
type regexOracle struct {
	conn *pgx.Conn
}

func newRegexOracle(t testing.TB) *regexOracle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	// Registered after NewDatabase's cleanup, so it runs before the drop.
	t.Cleanup(func() { conn.Close(context.Background()) })
	return &regexOracle{conn: conn}
}

// matches returns, for each of inputs, whether Postgres matches it with
// the ARE pattern are.
func (o *regexOracle) matches(inputs []string, are string) ([]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []bool
	err := o.conn.QueryRow(ctx,
		"SELECT coalesce(array_agg("+regexMatch("s.v", "$2")+" ORDER BY s.i), '{}') FROM unnest($1::text[]) WITH ORDINALITY s(v, i)",
		inputs, are).Scan(&got)
	return got, err
}

// storable returns s as Postgres text can hold it: valid UTF-8, no NUL.
// Documents never hold anything else, so the dialect need only agree on
// such strings.
func storable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// agree fails t unless every input matches pattern in Go exactly when it
// does in Postgres, or the dialect refuses pattern with CodeInvalid. It
// returns how many inputs matched, or -1 when the pattern was refused.
func (o *regexOracle) agree(t testing.TB, pattern string, inputs []string) int {
	t.Helper()
	re, err := filter.CompileRegex(pattern)
	if err != nil {
		if sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Fatalf("%q: refused without CodeInvalid: %v", pattern, err)
		}
		return -1
	}
	for i, in := range inputs {
		inputs[i] = storable(in)
	}
	pg, err := o.matches(inputs, re.ARE)
	if err != nil {
		t.Fatalf("%q: Postgres refused its ARE %q: %v", pattern, re.ARE, err)
	}
	matched := 0
	for i, in := range inputs {
		goMatch := re.Go.MatchString(in)
		if goMatch != pg[i] {
			t.Errorf("%q (ARE %q) on %q: Go says %v, Postgres says %v", pattern, re.ARE, in, goMatch, pg[i])
		}
		if goMatch {
			matched++
		}
	}
	return matched
}

// FuzzRegexDialect checks the regex dialect against a real Postgres: every
// pattern CompileRegex accepts compiles in Postgres and matches every input
// exactly when Go's regexp does; every other pattern is refused with
// CodeInvalid. The seeds (run by go test) cover the dialect's corners.
func FuzzRegexDialect(f *testing.F) {
	for _, seed := range [][2]string{
		// Anchors.
		{`^Al`, "Alice"}, {`^Al`, "xAl"}, {`ce$`, "Alice"}, {`ce$`, "Alice\n"}, {`\AAl\z`, "Al"},
		{`^$`, ""}, {`^`, "\n"}, {`a^b`, "ab"}, {`(?:^)*a`, "a"}, {`(?:$)+`, "x"}, {`(^|x)a`, "a"},
		// . and newlines: . matches a newline, (?-s) makes it not.
		{`a.b`, "a\nb"}, {`a.b`, "a-b"}, {`(?-s)a.b`, "a\nb"}, {`(?-s:.)`, "\n"}, {`(?s).`, "\n"},
		{`a\nb`, "a\nb"}, {`[^a]`, "\n"}, {`\s`, "\n"}, {`\S`, "\n"}, {`x\r?\n`, "x\r\n"},
		// Classes: ASCII \d \w \s, POSIX, negated, ranges across UTF-8 widths.
		{`\d`, "٣"}, {`\d+`, "42"}, {`\w`, "é"}, {`\w`, "_"}, {`\W`, "é"}, {`\s`, "\u00a0"}, {`\s`, "\v"},
		{`[[:alpha:]]`, "é"}, {`[[:^alpha:]]`, "é"}, {`[[:space:]]`, "\v"}, {`[[:punct:]]`, "!"},
		{`[a-c]`, "b"}, {`[^a-c]`, "b"}, {`[^a-c]`, "é"}, {`[é-ñ]`, "ê"}, {`[\x{1F600}-\x{1F64F}]`, "😀"},
		{`[^\x00-\x{10FFFF}]`, "a"}, {`[\x00]`, "a"}, {`[\x{D7FF}-\x{E000}]`, "\ue000"}, {`[-\]\\^]`, "^"},
		{`[.]`, "a"}, {`[[]`, "["}, {`[{}]`, "}"}, {`\x{10FFFF}`, "\U0010FFFF"}, {`\xff`, "ÿ"},
		// Case folding: Go's simple folding, K and the Kelvin sign included.
		{`(?i)k`, "\u212a"}, {`(?i)K`, "k"}, {`(?i)ß`, "ẞ"}, {`(?i)é`, "É"}, {`(?i)[a-c]+`, "AbC"},
		{`(?i)ǅ`, "ǆ"}, {`(?i)σ`, "ς"}, {`(?i:a)b`, "AB"}, {`(?i)[^k]`, "\u212a"}, {`(?i)straße`, "STRASSE"},
		// Alternation, groups and repetition.
		{`a|b`, "b"}, {`a|`, "x"}, {`(a|bc)+d`, "abcad"}, {`(?:ab){2,3}`, "ababab"}, {`a{2}`, "a"},
		{`a{0,255}`, "aaa"}, {`x{3,}`, "xxxx"}, {`(a*)*b`, "aab"}, {`a*?b`, "aab"}, {`(?U)a+`, "aa"},
		{`(?P<n>a)(?<m>b)`, "ab"}, {`()`, ""}, {`(|a)+`, "a"}, {`(?:(?:a?b){100}){2}`, "b"},
		{`.{0,255}x.{0,255}y`, "xy"}, {`[0-9a-f]{8}-[0-9a-f]{4}`, "deadbeef-cafe"},
		// Literals that mean something in an ARE, or in neither.
		{`\Q***:a\E`, "***:a"}, {`\*\*\*=x`, "***=x"}, {`a\{1\}`, "a{1}"}, {`\(\?i\)`, "(?i)"},
		{`\x{7B}`, "{"}, {`\\y`, `\y`}, {`\.`, "a"}, {`\$`, "$"}, {`\^`, "^"}, {"\x00", "a"},
		{`\a\f\t\v`, "\a\f\t\v"}, {`\123`, "S"}, {`(?:)`, ""}, {`😀+`, "😀😀"}, {`Ω`, "ω"},
		// Refused: \b \B, Unicode classes, (?m) anchors, large counts, costly patterns.
		{`\bAl`, "Alice"}, {`Al\B`, "Alice"}, {`\pL`, "a"}, {`\p{Greek}`, "α"}, {`\PN`, "a"},
		{`(?m)^a`, "b\na"}, {`(?m)a$`, "a\nb"}, {`a{256}`, "a"}, {`(?:a?b?){255}`, "ab"},
		{`(?:(?:a?b?c?)*){200}`, "abc"}, {`\C`, "a"}, {`(`, "a"}, {`[z-a]`, "a"}, {`x**`, "x"},
	} {
		f.Add(seed[0], seed[1])
	}
	o := newRegexOracle(f)
	f.Fuzz(func(t *testing.T, pattern, input string) {
		o.agree(t, pattern, []string{input})
	})
}

// TestRegexDialectOnGeneratedPatterns compares Go and Postgres on patterns
// built from the dialect's pieces (and some refused ones), each on inputs
// built from the characters where the engines could differ.
func TestRegexDialectOnGeneratedPatterns(t *testing.T) {
	t.Parallel()
	o := newRegexOracle(t)
	r := rand.New(rand.NewPCG(14, 13))
	accepted, compared, matched := 0, 0, 0
	const patterns = 1500
	for range patterns {
		p := genRegex(r, 3)
		if _, err := regexp.Compile(p); err != nil {
			continue // not RE2 syntax either: refused, as seeds show
		}
		// Half the inputs are drawn from the pattern, so that matches are
		// common; half are random, and mostly do not match.
		inputs := make([]string, 12)
		tree, _ := syntax.Parse(p, syntax.Perl|syntax.DotNL)
		for i := range inputs {
			if i%2 == 0 && tree != nil {
				var b strings.Builder
				sample(r, &b, tree)
				inputs[i] = b.String()
			} else {
				inputs[i] = genInput(r)
			}
		}
		if n := o.agree(t, p, inputs); n >= 0 {
			accepted++
			compared += len(inputs)
			matched += n
		}
	}
	// The generator must mostly make patterns of the dialect, and inputs
	// that match as well as inputs that do not, or this test would prove
	// little.
	if accepted < patterns/2 || matched < compared/4 || matched > compared*3/4 {
		t.Fatalf("%d of %d generated patterns accepted, %d of %d inputs matched", accepted, patterns, matched, compared)
	}
	t.Logf("%d of %d generated patterns accepted, %d of %d inputs matched", accepted, patterns, matched, compared)
}

// genRegex returns a random pattern nested at most depth levels.
func genRegex(r *rand.Rand, depth int) string {
	atoms := []string{
		`a`, `b`, `A`, `k`, `K`, `é`, `É`, `ß`, `\x{212A}`, `😀`, `\n`, `_`, `0`, ` `, `-`, `\.`, `\\`, `\{`,
		`.`, `\d`, `\D`, `\w`, `\W`, `\s`, `\S`, `[a-c]`, `[^a]`, `[^\n]`, `[[:alpha:]]`, `[[:^space:]]`,
		`[é-ñ]`, `[\x{1F600}-\x{1F64F}]`, `[k-mK]`, `[-_]`, `^`, `$`, `\A`, `\z`, `(?:)`,
	}
	var b strings.Builder
	for range 1 + r.IntN(4) {
		var piece string
		switch n := r.IntN(10); {
		case depth > 0 && n == 0:
			piece = "(" + genRegex(r, depth-1) + ")"
		case depth > 0 && n == 1:
			piece = "(?:" + genRegex(r, depth-1) + "|" + genRegex(r, depth-1) + ")"
		case depth > 0 && n == 2:
			flags := []string{"i", "s", "-s", "i-s", "U", "m"}[r.IntN(6)]
			piece = "(?" + flags + ":" + genRegex(r, depth-1) + ")"
		case n == 3 && r.IntN(8) == 0:
			piece = []string{`\b`, `\B`, `\pL`}[r.IntN(3)]
		default:
			piece = atoms[r.IntN(len(atoms))]
		}
		if r.IntN(3) == 0 {
			piece += []string{"*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "*?", "??"}[r.IntN(9)]
		}
		b.WriteString(piece)
	}
	return b.String()
}

// sample writes a random string that re (anchors aside) matches.
func sample(r *rand.Rand, b *strings.Builder, re *syntax.Regexp) {
	repeat := func(lo, hi int) {
		if hi < 0 {
			hi = lo + 3
		}
		for range lo + r.IntN(hi-lo+1) {
			sample(r, b, re.Sub[0])
		}
	}
	switch re.Op {
	case syntax.OpLiteral:
		for _, c := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				for range r.IntN(3) {
					c = unicode.SimpleFold(c)
				}
			}
			b.WriteRune(c)
		}
	case syntax.OpCharClass:
		if len(re.Rune) > 0 {
			i := 2 * r.IntN(len(re.Rune)/2)
			lo, hi := re.Rune[i], re.Rune[i+1]
			c := lo + rune(r.Int64N(int64(min(hi-lo, 300))+1))
			if c == 0 || unicode.Is(unicode.Cs, c) {
				c = 'x'
			}
			b.WriteRune(c)
		}
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteString([]string{"a", "\n", "é", "😀"}[r.IntN(4)])
	case syntax.OpCapture:
		sample(r, b, re.Sub[0])
	case syntax.OpStar:
		repeat(0, 3)
	case syntax.OpPlus:
		repeat(1, 3)
	case syntax.OpQuest:
		repeat(0, 1)
	case syntax.OpRepeat:
		repeat(re.Min, re.Max)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			sample(r, b, sub)
		}
	case syntax.OpAlternate:
		sample(r, b, re.Sub[r.IntN(len(re.Sub))])
	}
}

// genInput returns a short random string of the characters generated
// patterns are about.
func genInput(r *rand.Rand) string {
	chars := []string{"a", "b", "c", "A", "B", "k", "K", "\u212a", "é", "É", "ñ", "ß", "ẞ", "😀", "\n", "\r", "\v", "_", "0", "9", " ", "\u00a0", "-", ".", "\\", "{", "x"}
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteString(chars[r.IntN(len(chars))])
	}
	return b.String()
}

// TestRegexInCompiledFilters checks that a compiled filter sends Postgres
// the generated ARE, not the client's pattern.
func TestRegexInCompiledFilters(t *testing.T) {
	t.Parallel()
	re, err := filter.CompileRegex(`a\.b|\d`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `(?:a\u002Eb|[0-9])`; re.ARE != want {
		t.Errorf("ARE %q, want %q", re.ARE, want)
	}
	b := &sqlBuilder{}
	sql, err := b.compare(&filter.Compare{Type: sluice.FieldType{Kind: sluice.TypeScalar, Name: sluice.ScalarString}, Op: filter.OpRegex, Value: filter.Value{Str: `a\.b|\d`, Regex: re}}, "t.name", true)
	if err != nil {
		t.Fatal(err)
	}
	if want := `COALESCE(t.name::text COLLATE "C" ~ $1::text, false)`; sql != want {
		t.Errorf("SQL %s, want %s", sql, want)
	}
	if len(b.args) != 1 || b.args[0] != re.ARE {
		t.Errorf("args %q, want the ARE %q", b.args, re.ARE)
	}
}

package filter

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Regex is a pattern of the filter regex dialect (see the package
// documentation), compiled for both engines that run filters. Go and ARE
// match exactly the same strings of valid UTF-8 without NUL, the only
// strings Postgres text can hold.
type Regex struct {
	// Go runs the pattern in Go (subscriptions, _ChangeSet).
	Go *regexp.Regexp
	// ARE is the pattern written in Postgres's advanced regular expression
	// syntax, for text ~ ARE (queries). It is generated from the parsed
	// pattern, never copied from the user's text.
	ARE string
}

// dialectFlags parse the dialect: RE2's Perl syntax without Unicode classes
// (\pL), whose tables differ between Go and Postgres versions, and with
// . matching a newline, as it does in Postgres's default mode.
const dialectFlags = syntax.ClassNL | syntax.OneLine | syntax.PerlX | syntax.DotNL

// The bounds of a pattern's Postgres compilation. Postgres's regex compiler
// takes time that grows much faster than the pattern when optional pieces
// follow each other: `(?:a?b?){255}`, 13 bytes, takes 6 s to compile and
// then fails; `(?:(?:a?b?c?)*){200}` takes 15 s. Both bounds count the
// pattern as Postgres expands it (x{3} is x three times).
const (
	// maxRepeat is Postgres's largest repetition count (RE_DUPMAX).
	maxRepeat = 255
	// maxRegexElems bounds the elements (characters, classes, operators)
	// of the expanded pattern.
	maxRegexElems = 2000
	// maxOptionalRun bounds the longest run of consecutive optional
	// elements (x?, x*, x{0,n}, an alternative that can be empty) of the
	// expanded pattern. The costliest patterns found within both bounds,
	// such as (?:(?:a?){63}x){15}, compile in tens of milliseconds
	// (docs/benchmarks.md, "Measured choices in the code").
	maxOptionalRun = 64
	// maxAREBytes bounds the generated pattern, whose character classes,
	// case folding and escapes can make it longer than the user's.
	maxAREBytes = 32 << 10
)

// CompileRegex checks pattern against the dialect and compiles it for Go
// and for Postgres. A pattern outside the dialect, or too costly to
// compile, gives a CodeInvalid *sluice.Error naming the construct or the
// bound.
func CompileRegex(pattern string) (*Regex, error) {
	re, err := compileRegex(pattern)
	if err != nil {
		return nil, errorf("regex", "%v", err)
	}
	return re, nil
}

// compileRegex is CompileRegex with errors that do not say where the
// pattern came from, for the filter parser to prefix with its path.
func compileRegex(pattern string) (*Regex, error) {
	if len(pattern) > MaxRegexBytes {
		return nil, fmt.Errorf("the regex is longer than %d bytes (the limit)", MaxRegexBytes)
	}
	tree, err := syntax.Parse(pattern, dialectFlags)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) && se.Code == syntax.ErrInvalidEscape && (se.Expr == `\p` || se.Expr == `\P`) {
			return nil, fmt.Errorf("invalid regex %s: Unicode classes (%s) are not supported: Go and Postgres use different Unicode tables; write the ranges in a class such as [α-ω]", describe(pattern), se.Expr)
		}
		return nil, fmt.Errorf("invalid regex %s: %s", describe(pattern), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	if err := supported(tree); err != nil {
		return nil, fmt.Errorf("invalid regex %s: %w", describe(pattern), err)
	}
	if c := measure(tree); c.elems > maxRegexElems {
		return nil, fmt.Errorf("the regex %s is too complex: it expands to more than %d elements once repetitions are counted (the limit)", describe(pattern), maxRegexElems)
	} else if c.run > maxOptionalRun {
		return nil, fmt.Errorf("the regex %s is too complex: it has more than %d optional parts in a row once repetitions are counted (the limit)", describe(pattern), maxOptionalRun)
	}
	var are strings.Builder
	writeARE(&are, tree)
	if are.Len() > maxAREBytes {
		return nil, fmt.Errorf("the regex %s is too complex: its character classes are too large", describe(pattern))
	}
	// The dialect's flags, written as a prefix so that regexp compiles the
	// tree checked above (regexp.Compile takes RE2's Perl flags, which add
	// only \pN, refused above).
	goRE, err := regexp.Compile("(?s)" + pattern)
	if err != nil {
		return nil, fmt.Errorf("invalid regex %s: %s", describe(pattern), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return &Regex{Go: goRE, ARE: are.String()}, nil
}

// supported returns an error naming the first construct of re whose
// meaning differs between Go and Postgres.
func supported(re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		which := `\b`
		if re.Op == syntax.OpNoWordBoundary {
			which = `\B`
		}
		return fmt.Errorf("%s (a word boundary) is not supported: in Postgres %s means something else; match the neighbouring character instead, such as (?:^|[^0-9A-Za-z_])", which, which)
	case syntax.OpBeginLine, syntax.OpEndLine:
		return errors.New("^ and $ in multi-line mode (?m) are not supported: match the line break instead, such as (?:^|\\n)")
	case syntax.OpRepeat:
		if re.Min > maxRepeat || re.Max > maxRepeat {
			return fmt.Errorf("a repetition count above %d is not supported (Postgres's limit)", maxRepeat)
		}
	}
	for _, sub := range re.Sub {
		if err := supported(sub); err != nil {
			return err
		}
	}
	return nil
}

// cost is the size of a pattern as Postgres expands it. A run is a
// sequence of consecutive optional elements, which Postgres compiles in
// time that grows steeply with its length.
type cost struct {
	elems int  // elements, repetitions expanded
	empty bool // the pattern can match the empty string
	// through is, for a pattern that can match the empty string, the
	// optional elements a run passes through it.
	through int
	// head and tail are, for a pattern that cannot match the empty
	// string, the optional elements at its start and at its end, which
	// join runs of its neighbours.
	head, tail int
	run        int // the longest run inside
}

// sat bounds sums, so that deeply nested repetitions cannot overflow.
func sat(n int) int { return min(n, 1<<30) }

func atom(elems int) cost { return cost{elems: elems} }

// optional is the cost of x?, x* and an alternative that can be empty.
func optional(x cost) cost {
	c := cost{elems: sat(x.elems + 1), empty: true, through: sat(1 + x.through + x.head + x.tail)}
	c.run = max(x.run, c.through, sat(x.tail+x.head))
	return c
}

// concat is the cost of a followed by b.
func concat(a, b cost) cost {
	c := cost{elems: sat(a.elems + b.elems), run: max(a.run, b.run)}
	switch {
	case a.empty && b.empty:
		c.empty, c.through = true, sat(a.through+b.through)
		c.run = max(c.run, c.through)
	case a.empty:
		c.head, c.tail = sat(a.through+b.head), b.tail
		c.run = max(c.run, c.head)
	case b.empty:
		c.head, c.tail = a.head, sat(a.tail+b.through)
		c.run = max(c.run, c.tail)
	default:
		c.head, c.tail = a.head, b.tail
		c.run = max(c.run, sat(a.tail+b.head))
	}
	return c
}

// measure returns the cost of re.
func measure(re *syntax.Regexp) cost {
	switch re.Op {
	case syntax.OpLiteral:
		return atom(len(re.Rune))
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL, syntax.OpNoMatch:
		return atom(1)
	case syntax.OpEmptyMatch, syntax.OpBeginText, syntax.OpEndText:
		return cost{elems: 1, empty: true}
	case syntax.OpCapture:
		return measure(re.Sub[0])
	case syntax.OpQuest, syntax.OpStar:
		return optional(measure(re.Sub[0]))
	case syntax.OpPlus:
		x := measure(re.Sub[0])
		if x.empty {
			return optional(x)
		}
		x.elems = sat(x.elems + 1)
		x.run = max(x.run, sat(x.tail+x.head))
		return x
	case syntax.OpRepeat:
		x := measure(re.Sub[0])
		c := cost{empty: true}
		for range re.Min {
			c = concat(c, x)
		}
		switch {
		case re.Max < 0:
			c = concat(c, optional(x))
		case re.Max > re.Min && !x.empty:
			// Postgres nests the optional copies ((x(x)?)?), so a run
			// crosses only one of them.
			o := optional(x)
			o.elems = sat(x.elems*(re.Max-re.Min) + 1)
			c = concat(c, o)
		default:
			for range re.Max - re.Min {
				c = concat(c, optional(x))
			}
		}
		return c
	case syntax.OpConcat:
		c := cost{empty: true}
		for _, sub := range re.Sub {
			c = concat(c, measure(sub))
		}
		return c
	case syntax.OpAlternate:
		var c cost
		for i, sub := range re.Sub {
			x := measure(sub)
			if i == 0 {
				c = x
				continue
			}
			c.elems = sat(c.elems + x.elems)
			c.run = max(c.run, x.run)
			switch {
			case c.empty || x.empty:
				c.through = max(c.through, x.through, c.head+c.tail, x.head+x.tail)
				c.empty, c.head, c.tail = true, 0, 0
			default:
				c.head, c.tail = max(c.head, x.head), max(c.tail, x.tail)
			}
		}
		if c.empty {
			c.through = sat(c.through + 1)
			c.run = max(c.run, c.through)
		}
		return c
	}
	return atom(1)
}

// textRanges returns the characters Postgres text can hold: no NUL and, in
// UTF-8, no surrogates. Classes are cut to them, since the other code
// points never reach a match.
func textRanges() []rune { return []rune{1, 0xD7FF, 0xE000, unicode.MaxRune} }

// writeARE writes re in Postgres's ARE syntax, with the meaning re has in
// Go on strings Postgres text can hold. Every character is written as
// itself only when it is an ASCII letter or digit, and as a \u escape
// otherwise, so no character of the user's pattern reaches Postgres with a
// meaning of its own. Groups are non-capturing; greediness is dropped, as
// it does not change whether a string matches.
func writeARE(b *strings.Builder, re *syntax.Regexp) {
	switch re.Op {
	case syntax.OpNoMatch:
		writeClass(b, nil)
	case syntax.OpEmptyMatch:
		b.WriteString("(?:)")
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				writeClass(b, foldRanges(r))
			} else {
				writeClass(b, []rune{r, r})
			}
		}
	case syntax.OpCharClass:
		writeClass(b, re.Rune)
	case syntax.OpAnyChar:
		writeClass(b, []rune{0, unicode.MaxRune})
	case syntax.OpAnyCharNotNL:
		writeClass(b, []rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune})
	case syntax.OpBeginText:
		b.WriteString("^")
	case syntax.OpEndText:
		b.WriteString("$")
	case syntax.OpCapture:
		b.WriteString("(?:")
		writeARE(b, re.Sub[0])
		b.WriteString(")")
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		writeOperand(b, re.Sub[0])
		switch re.Op {
		case syntax.OpStar:
			b.WriteString("*")
		case syntax.OpPlus:
			b.WriteString("+")
		case syntax.OpQuest:
			b.WriteString("?")
		default:
			switch {
			case re.Max == re.Min:
				fmt.Fprintf(b, "{%d}", re.Min)
			case re.Max < 0:
				fmt.Fprintf(b, "{%d,}", re.Min)
			default:
				fmt.Fprintf(b, "{%d,%d}", re.Min, re.Max)
			}
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			writeARE(b, sub)
		}
	case syntax.OpAlternate:
		b.WriteString("(?:")
		for i, sub := range re.Sub {
			if i > 0 {
				b.WriteString("|")
			}
			writeARE(b, sub)
		}
		b.WriteString(")")
	default:
		// supported refused everything else; a new syntax op would land
		// here and must never match more than Go does.
		writeClass(b, nil)
	}
}

// writeOperand writes the operand of a repetition: a single character or
// class as it is, anything else in a group (Postgres refuses a quantifier
// right after an anchor).
func writeOperand(b *strings.Builder, re *syntax.Regexp) {
	switch {
	case re.Op == syntax.OpLiteral && len(re.Rune) == 1,
		re.Op == syntax.OpCharClass, re.Op == syntax.OpAnyChar,
		re.Op == syntax.OpAnyCharNotNL, re.Op == syntax.OpNoMatch:
		writeARE(b, re)
	default:
		b.WriteString("(?:")
		writeARE(b, re)
		b.WriteString(")")
	}
}

// foldRanges returns the class of the characters that r matches in a
// case-insensitive Go literal: its simple case-folding orbit.
func foldRanges(r rune) []rune {
	var cls []rune
	f := r
	for {
		cls = append(cls, f, f)
		f = unicode.SimpleFold(f)
		if f == r {
			break
		}
	}
	return cls
}

// writeClass writes the characters of the ranges cls (lo, hi pairs, as
// regexp/syntax holds them, in any order) as one ARE atom: a bracket
// expression, negated when that is shorter, or . for every character.
func writeClass(b *strings.Builder, cls []rune) {
	text := textRanges()
	in := intersect(normalize(cls), text)
	out := subtract(text, in)
	switch {
	case len(out) == 0:
		b.WriteString(".")
	case len(in) == 0:
		// Matches no character of text.
		b.WriteString("[^")
		writeRanges(b, text)
		b.WriteString("]")
	case len(in) == 2 && in[0] == in[1]:
		writeChar(b, in[0])
	case len(out) < len(in):
		b.WriteString("[^")
		writeRanges(b, out)
		b.WriteString("]")
	default:
		b.WriteString("[")
		writeRanges(b, in)
		b.WriteString("]")
	}
}

func writeRanges(b *strings.Builder, cls []rune) {
	for i := 0; i < len(cls); i += 2 {
		writeChar(b, cls[i])
		if cls[i+1] != cls[i] {
			b.WriteString("-")
			writeChar(b, cls[i+1])
		}
	}
}

// writeChar writes r so that it means only itself, inside or outside a
// bracket expression.
func writeChar(b *strings.Builder, r rune) {
	switch {
	case r < utf8.RuneSelf && ('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'):
		b.WriteRune(r)
	case r <= 0xFFFF:
		fmt.Fprintf(b, `\u%04X`, r)
	default:
		fmt.Fprintf(b, `\U%08X`, r)
	}
}

// normalize returns the ranges of cls sorted and merged.
func normalize(cls []rune) []rune {
	pairs := make([][2]rune, 0, len(cls)/2)
	for i := 0; i+1 < len(cls); i += 2 {
		pairs = append(pairs, [2]rune{cls[i], cls[i+1]})
	}
	slices.SortFunc(pairs, func(x, y [2]rune) int { return cmp.Compare(x[0], y[0]) })
	var out []rune
	for _, p := range pairs {
		if n := len(out); n > 0 && p[0] <= out[n-1]+1 {
			out[n-1] = max(out[n-1], p[1])
			continue
		}
		out = append(out, p[0], p[1])
	}
	return out
}

// intersect returns the characters in both a and b, normalized ranges.
func intersect(a, b []rune) []rune {
	var out []rune
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i], b[j]), min(a[i+1], b[j+1])
		if lo <= hi {
			out = append(out, lo, hi)
		}
		if a[i+1] < b[j+1] {
			i += 2
		} else {
			j += 2
		}
	}
	return out
}

// subtract returns the characters of a not in b, normalized ranges.
func subtract(a, b []rune) []rune {
	var out []rune
	for i := 0; i < len(a); i += 2 {
		lo, hi := a[i], a[i+1]
		for j := 0; j < len(b) && lo <= hi; j += 2 {
			if b[j+1] < lo || b[j] > hi {
				continue
			}
			if b[j] > lo {
				out = append(out, lo, b[j]-1)
			}
			lo = b[j+1] + 1
		}
		if lo <= hi {
			out = append(out, lo, hi)
		}
	}
	return out
}

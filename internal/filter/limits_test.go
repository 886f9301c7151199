package filter_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/schema"
)

// repeatTerm returns n copies of term as a filter list.
func repeatTerm(n int, term map[string]any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = term
	}
	return out
}

// nest wraps leaf in n _not objects.
func nest(n int, leaf map[string]any) map[string]any {
	for range n {
		leaf = map[string]any{"_not": leaf}
	}
	return leaf
}

// TestParseLimits checks each limit at its edge: the largest filter it
// allows parses, one more is refused with CodeInvalid naming the limit and
// the path where the filter crossed it.
func TestParseLimits(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(fuzzSDL)
	if err != nil {
		t.Fatal(err)
	}
	eq := map[string]any{"age": map[string]any{"eq": int64(1)}} // 2 terms
	ids := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprintf("Person/%d", i)
		}
		return out
	}
	regexes := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"name": map[string]any{"regex": fmt.Sprintf("^%d", i)}}
		}
		return out
	}
	for _, c := range []struct {
		name  string
		input map[string]any
		err   string // "" when the filter must parse
	}{
		// _or (1) + 333 elements of 3 terms = 1000.
		{"1000 terms", map[string]any{"_or": repeatTerm(333, eq)}, ""},
		{"1001 terms", map[string]any{"_or": repeatTerm(333, eq), "name": map[string]any{"eq": "x"}},
			"filter.name: the filter has more than 1000 terms (the limit)"},
		{"30k _or", map[string]any{"_or": repeatTerm(30000, eq)},
			"filter._or[333]: the filter has more than 1000 terms (the limit)"},
		{"100k empty _and", map[string]any{"_and": repeatTerm(100000, map[string]any{})},
			"filter._and[999]: the filter has more than 1000 terms (the limit)"},
		// The root object is level 1, each _not one more, the field filter
		// of name the last.
		{"32 levels", nest(30, map[string]any{"name": map[string]any{"eq": "x"}}), ""},
		{"33 levels", nest(31, map[string]any{"name": map[string]any{"eq": "x"}}),
			"filter" + strings.Repeat("._not", 31) + ".name: the filter nests more than 32 levels of objects (the limit)"},
		{"33 levels through references", nest(30, map[string]any{"best": map[string]any{"best": map[string]any{"name": map[string]any{"eq": "x"}}}}),
			"filter" + strings.Repeat("._not", 30) + ".best.best: the filter nests more than 32 levels of objects (the limit)"},
		{"1000 ids", map[string]any{"_ids": ids(1000)}, ""},
		{"1001 ids", map[string]any{"_ids": ids(1001)},
			"filter._ids: the list has 1001 ids, more than 1000 ids (the limit)"},
		{"16 regexes", map[string]any{"_or": regexes(16)}, ""},
		{"one regex 100 times", map[string]any{"_or": repeatTerm(100, map[string]any{"name": map[string]any{"regex": "^a"}})}, ""},
		{"17 regexes", map[string]any{"_or": regexes(17)},
			"filter._or[16].name.regex: the filter has more than 16 different regexes (the limit)"},
		{"long regex", map[string]any{"name": map[string]any{"regex": strings.Repeat("a", 1001)}},
			"filter.name.regex: the regex is longer than 1000 bytes (the limit)"},
		{"long number", map[string]any{"wealth": map[string]any{"eq": strings.Repeat("9", 1001)}},
			"filter.wealth.eq: the number is longer than 1000 characters or its exponent is beyond ±1000 (the limit)"},
		{"huge exponent", map[string]any{"score": map[string]any{"eq": json.Number("1e1000000")}},
			"filter.score.eq: the number is longer than 1000 characters or its exponent is beyond ±1000 (the limit)"},
		{"large exponent", map[string]any{"score": map[string]any{"eq": json.Number("1e1000")}}, ""},
		// A BigInt given as a string is decimal digits, as a document's
		// is: Go's rational syntax would read "0x1p9999999" as a number of
		// 3 million digits (a second of CPU each).
		{"binary exponent", map[string]any{"wealth": map[string]any{"gt": "0x1p9999999"}},
			`filter.wealth.gt: expected a BigInt, got "0x1p9999999"`},
		{"hex", map[string]any{"wealth": map[string]any{"eq": "0x10"}}, `filter.wealth.eq: expected a BigInt, got "0x10"`},
		{"fraction", map[string]any{"wealth": map[string]any{"eq": "1/3"}}, `filter.wealth.eq: expected a BigInt, got "1/3"`},
		{"negative digits", map[string]any{"wealth": map[string]any{"eq": "-" + strings.Repeat("9", 999)}}, ""},
		// Postgres keeps microseconds; a finer instant would match in SQL
		// as its truncation and in streams as itself.
		{"nanoseconds", map[string]any{"born": map[string]any{"eq": "1990-01-01T00:00:00.0000001Z"}},
			`filter.born.eq: expected a DateTime (RFC 3339 string) of at most microsecond precision, got "1990-01-01T00:00:00.0000001Z"`},
		{"microseconds", map[string]any{"born": map[string]any{"eq": "1990-01-01T00:00:00.000001Z"}}, ""},
		{"NUL", map[string]any{"name": map[string]any{"eq": "a\x00b"}},
			`filter.name.eq: the string holds a NUL character (\u0000), which no stored string can`},
		{"NUL id", map[string]any{"_ids": []any{"Person/a", "\x00"}},
			`filter._ids[1]: the string holds a NUL character (\u0000), which no stored string can`},
		{"bad UTF-8", map[string]any{"name": map[string]any{"startsWith": "\xff"}},
			"filter.name.startsWith: the string is not valid UTF-8"},
	} {
		_, err := filter.Parse(s, "Person", c.input)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (sluice.ErrorCode(err) != sluice.CodeInvalid || err.Error() != c.err):
			t.Errorf("%s: got %v\nwant CodeInvalid %s", c.name, err, c.err)
		}
	}
}

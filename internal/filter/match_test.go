package filter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/schema"
)

// parseFilter parses the JSON filter text src on class of sdl, numbers as
// json.Number (as GraphQL variables arrive).
func parseFilter(t testing.TB, sdl, class, src string) filter.Expr {
	t.Helper()
	s, err := schema.Parse(sdl)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	var in map[string]any
	if err := dec.Decode(&in); err != nil {
		t.Fatal(err)
	}
	e, err := filter.Parse(s, class, in)
	if err != nil {
		t.Fatalf("Parse(%s): %v", src, err)
	}
	return e
}

// nested returns the filter {"friends":{q:{"friends":{q: … inner}}}}, n
// levels of q.
func nested(q string, n int, inner string) string {
	return strings.Repeat(`{"friends":{"`+q+`":`, n) + inner + strings.Repeat(`}}`, n)
}

// cyclicGraph returns 4 documents P/0..P/3 named "p", each listing all 4
// as friends, and a lookup over them that fails the test after maxLookups
// calls (the evaluation before memoization called it once per path: 4^n
// times for n nested levels).
func cyclicGraph(t *testing.T, maxLookups int) (docs map[string]*sluice.Document, lookup filter.Lookup, calls *int) {
	docs = map[string]*sluice.Document{}
	var friends []any
	for i := range 4 {
		friends = append(friends, fmt.Sprintf("P/%d", i))
	}
	for i := range 4 {
		id := fmt.Sprintf("P/%d", i)
		docs[id] = &sluice.Document{ID: id, Type: "P", Fields: map[string]any{"name": "p", "friends": friends}}
	}
	calls = new(int)
	lookup = func(id string) *sluice.Document {
		*calls++
		if *calls > maxLookups {
			t.Fatalf("the evaluation looked up more than %d documents in a graph of 4", maxLookups)
		}
		return docs[id]
	}
	return docs, lookup, calls
}

const cyclicSDL = `type P { name: String friends: [P] }`

// TestMatchCyclicFanOutIsLinear: a filter of 15 nested someHave (or
// allHave) levels through 4 documents that each list all 4 as friends. The
// evaluation explored every path, 4^15 (about 10^9) of them, for minutes
// of CPU per changed document (a _ChangeSet query, a subscription's
// event); it now evaluates each level once on each document.
func TestMatchCyclicFanOutIsLinear(t *testing.T) {
	const levels = 15
	for _, c := range []struct {
		q, inner string
		want     bool
	}{
		{"someHave", `{"name":{"eq":"nomatch"}}`, false},
		{"allHave", `{"name":{"eq":"p"}}`, true},
		{"someHave", `{"name":{"ne":"p"}}`, false},
		{"allHave", `{"name":{"ne":"nomatch"}}`, true},
	} {
		t.Run(c.q+c.inner, func(t *testing.T) {
			src := nested(c.q, levels, c.inner)
			e := parseFilter(t, cyclicSDL, "P", src)
			docs, lookup, calls := cyclicGraph(t, 1000)
			if got := filter.Match(e, docs["P/0"], lookup); got != c.want {
				t.Fatalf("Match = %v, want %v", got, c.want)
			}
			if *calls > 4 {
				t.Errorf("Match looked up %d documents, want each of the 4 once", *calls)
			}
			*calls = 0
			ok, steps, err := filter.MatchSteps(context.Background(), e, docs["P/0"], lookup, true, 0)
			if err != nil || ok != c.want {
				t.Fatalf("MatchSteps = %v, %v, want %v", ok, err, c.want)
			}
			// Each level: one object and one Quant on each of the 4
			// documents, and an element step per friend (4×4).
			if max := (levels + 1) * 4 * (2 + 4) * 2; steps > max {
				t.Errorf("%d steps, want at most %d (linear in levels × documents × friends)", steps, max)
			}
			t.Logf("%d levels: %d steps, %d lookups", levels, steps, *calls)
		})
	}
}

// TestMatchStepBudget: an evaluation stops, false with an error saying
// why, past its step budget, and at a context's end; Match, which has
// neither an error nor a context, is false. Without memoization (as before
// it), the 15 levels of TestMatchCyclicFanOutIsLinear exhaust
// MaxMatchSteps.
func TestMatchStepBudget(t *testing.T) {
	e := parseFilter(t, cyclicSDL, "P", nested("allHave", 15, `{"name":{"eq":"p"}}`))
	docs, lookup, _ := cyclicGraph(t, filter.MaxMatchSteps)
	ok, steps, err := filter.MatchSteps(context.Background(), e, docs["P/0"], lookup, false, 0)
	if ok || steps != filter.MaxMatchSteps+1 || sluice.ErrorCode(err) != sluice.CodeInvalid || !strings.Contains(err.Error(), "steps") {
		t.Fatalf("without memoization: %v after %d steps, %v; want false after %d steps with the error naming the bound", ok, steps, err, filter.MaxMatchSteps+1)
	}
	t.Logf("without memoization: %v", err)

	// A smaller budget, with memoization: the same error.
	_, lookup, _ = cyclicGraph(t, 1000)
	if ok, steps, err := filter.MatchSteps(context.Background(), e, docs["P/0"], lookup, true, 50); ok || steps != 51 || sluice.ErrorCode(err) != sluice.CodeInvalid {
		t.Fatalf("budget 50: %v after %d steps, %v", ok, steps, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, lookup, _ = cyclicGraph(t, 1000)
	if ok, err := filter.MatchContext(ctx, e, docs["P/0"], lookup); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context: %v, %v; want false, context.Canceled", ok, err)
	}
	// Without memoization the evaluation would run for minutes: it does
	// not start.
	// (Steps count beneath references only: none was taken.)
	ok, steps, err = filter.MatchSteps(ctx, e, docs["P/0"], lookup, false, 0)
	if ok || !errors.Is(err, context.Canceled) || steps != 0 {
		t.Fatalf("a cancelled context, without memoization: %v after %d steps, %v", ok, steps, err)
	}
}

// TestMatchLargeListWithoutReferences: the evaluation on the matched
// document itself is not counted against MaxMatchSteps, only the one
// beneath references. A document with a list of 5,000,001 Ints (a 10 MB
// document) took more than MaxMatchSteps steps (2 or more an element), and
// Match was then false for filters it matches: a live query took the
// change for one that does not affect it, a webhook or a stream dropped
// the event, and a subscription or _ChangeSet ended with an error telling
// to follow fewer references on a filter that follows none.
func TestMatchLargeListWithoutReferences(t *testing.T) {
	const sdl = `type T { name: String xs: [Int!] friends: [T!] }`
	const n = 5_000_001
	xs := make([]any, n)
	for i := range xs {
		xs[i] = int64(i % 5)
	}
	doc := &sluice.Document{ID: "T/1", Type: "T", Fields: map[string]any{"name": "x", "xs": xs}}
	all := parseFilter(t, sdl, "T", `{"xs":{"allHave":{"ge":0}}}`)
	if !filter.Match(all, doc, nil) {
		t.Errorf(`Match({"xs":{"allHave":{"ge":0}}}) on %d elements all >= 0 = false, want true`, n)
	}
	or := parseFilter(t, sdl, "T", `{"_or":[{"xs":{"someHave":{"eq":7}}},{"name":{"eq":"x"}}]}`)
	if !filter.Match(or, doc, nil) {
		t.Errorf(`Match({"_or":[{"xs":{"someHave":{"eq":7}}},{"name":{"eq":"x"}}]}) on %d elements and name "x" = false, want true`, n)
	}

	// Beneath a reference the steps are counted, and the budget still
	// stops a filter through references; the list of the matched
	// document itself adds nothing to them, even with a budget of 10.
	other := &sluice.Document{ID: "T/2", Type: "T", Fields: map[string]any{"name": "y", "xs": xs}}
	doc.Fields["friends"] = []any{other.ID}
	lookup := func(id string) *sluice.Document {
		if id == other.ID {
			return other
		}
		return nil
	}
	e := parseFilter(t, sdl, "T", `{"xs":{"allHave":{"ge":0}},"friends":{"someHave":{"xs":{"allHave":{"ge":0}}}}}`)
	if ok, steps, err := filter.MatchSteps(context.Background(), e, doc, lookup, true, 10); ok || steps != 11 || sluice.ErrorCode(err) != sluice.CodeInvalid {
		t.Errorf("through a reference to %d elements, budget 10: %v after %d steps, %v; want false after 11 steps with the bound's error", n, ok, steps, err)
	}
	e = parseFilter(t, sdl, "T", `{"xs":{"allHave":{"ge":0}},"friends":{"someHave":{"name":{"eq":"y"}}}}`)
	if ok, steps, err := filter.MatchSteps(context.Background(), e, doc, lookup, true, 10); !ok || err != nil || steps > 10 {
		t.Errorf("%d elements, then through a reference, budget 10: %v after %d steps, %v; want true", n, ok, steps, err)
	}
}

// TestMatchMemoSemantics: results that memoization must keep, each
// checked against the evaluation without it.
func TestMatchMemoSemantics(t *testing.T) {
	stored := map[string]*sluice.Document{
		"Person/a": {ID: "Person/a", Type: "Person", Fields: map[string]any{"name": "a", "best": "Person/a",
			"friends": []any{"Person/b", nil, "Person/gone", "Person/a", map[string]any{"@id": "Person/c"}, 7}}},
		"Person/b": {ID: "Person/b", Type: "Person", Fields: map[string]any{"name": "b", "best": nil, "friends": nil}},
		"Person/c": {ID: "Person/c", Type: "Person", Fields: map[string]any{"name": "c", "best": "Person/gone", "friends": []any{}}},
	}
	lookup := func(id string) *sluice.Document { return stored[id] }
	// The change's document Person/a, not as stored: a filter through a
	// reference back to it sees the stored one.
	changed := &sluice.Document{ID: "Person/a", Type: "Person", Fields: map[string]any{"name": "new", "best": "Person/a",
		"friends": []any{"Person/a", "Person/b"}}}
	for _, c := range []struct {
		doc  *sluice.Document
		src  string
		want bool
	}{
		{changed, `{"name":{"eq":"new"}}`, true},
		{changed, `{"best":{"name":{"eq":"a"}}}`, true},
		{changed, `{"best":{"name":{"eq":"new"}}}`, false},
		{changed, `{"best":{"best":{"_id":"Person/a"}}}`, true},
		{changed, `{"friends":{"allHave":{"name":{"ne":"new"}}}}`, true},
		{changed, `{"friends":{"someHave":{"friends":{"someHave":{"name":{"eq":"c"}}}}}}`, true},
		// Nulls, missing documents and non-references in a list: false
		// elements, so someHave skips them and allHave fails on them.
		{stored["Person/a"], `{"friends":{"allHave":{"name":{"ne":"zz"}}}}`, false},
		{stored["Person/a"], `{"friends":{"someHave":{"_not":{"name":{"eq":"a"}}}}}`, true},
		{stored["Person/a"], `{"friends":{"someHave":{"best":{"name":{"eq":"a"}}}}}`, true},
		{stored["Person/a"], `{"friends":{"allHave":{"_not":{"best":{"name":{"eq":"zz"}}}}}}`, false},
		// A null or missing reference, and a reference to no document,
		// are false; _not of them true.
		{stored["Person/b"], `{"best":{"name":{"ne":"zz"}}}`, false},
		{stored["Person/b"], `{"_not":{"best":{"name":{"ne":"zz"}}}}`, true},
		{stored["Person/c"], `{"best":{"_not":{"name":{"eq":"zz"}}}}`, false},
		// Null and empty lists: someHave false, allHave true.
		{stored["Person/b"], `{"friends":{"someHave":{"name":{"ne":"zz"}}}}`, false},
		{stored["Person/b"], `{"friends":{"allHave":{"name":{"eq":"zz"}}}}`, true},
		{stored["Person/c"], `{"friends":{"allHave":{"name":{"eq":"zz"}}}}`, true},
		{stored["Person/c"], `{"_not":{"friends":{"someHave":{"name":{"ne":"zz"}}}}}`, true},
		// The same filter node met on the same document through
		// different paths, in a cycle.
		{stored["Person/a"], `{"best":{"friends":{"someHave":{"best":{"friends":{"someHave":{"_id":"Person/c"}}}}}}}`, true},
		{stored["Person/a"], `{"_or":[{"best":{"best":{"name":{"eq":"b"}}}},{"friends":{"someHave":{"_ids":["Person/b"],"friends":{"allHave":{"name":{"eq":"x"}}}}}}]}`, true},
	} {
		e := parseFilter(t, fuzzSDL, "Person", c.src)
		got, err := filter.MatchContext(context.Background(), e, c.doc, lookup)
		if err != nil || got != c.want {
			t.Errorf("%s on %s: %v, %v; want %v", c.src, c.doc.ID, got, err, c.want)
		}
		if old, _, err := filter.MatchSteps(context.Background(), e, c.doc, lookup, false, 0); err != nil || old != got {
			t.Errorf("%s on %s: %v without memoization (%v), %v with", c.src, c.doc.ID, old, err, got)
		}
	}
}

// TestMatchMemoSameAsWithout compares the evaluation with memoization to
// the one without on small random graphs and filters.
func TestMatchMemoSameAsWithout(t *testing.T) {
	s, err := schema.Parse(fuzzSDL)
	if err != nil {
		t.Fatal(err)
	}
	n := 3000
	if testing.Short() {
		n = 300
	}
	for seed := range uint64(n) {
		checkMemo(t, s, seed)
	}
}

// FuzzMatchMemo is TestMatchMemoSameAsWithout for any seed.
func FuzzMatchMemo(f *testing.F) {
	s, err := schema.Parse(fuzzSDL)
	if err != nil {
		f.Fatal(err)
	}
	for seed := range uint64(16) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkMemo(t, s, seed) })
}

// checkMemo builds a random graph of up to 5 documents and random filters
// from seed, and fails unless each filter gives the same result on each
// document (and on a changed version of the first) with memoization and
// without.
func checkMemo(t *testing.T, s *sluice.Schema, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	g := &gen{r: r, n: 1 + r.IntN(5)}
	stored := map[string]*sluice.Document{}
	var roots []*sluice.Document
	for i := range g.n {
		d := &sluice.Document{ID: fmt.Sprintf("Person/%d", i), Type: "Person", Fields: g.fields()}
		stored[d.ID] = d
		roots = append(roots, d)
	}
	roots = append(roots, &sluice.Document{ID: "Person/0", Type: "Person", Fields: g.fields()})
	for range 5 {
		src, _ := json.Marshal(g.filter(4))
		dec := json.NewDecoder(bytes.NewReader(src))
		dec.UseNumber()
		var in map[string]any
		if err := dec.Decode(&in); err != nil {
			t.Fatal(err)
		}
		e, err := filter.Parse(s, "Person", in)
		if err != nil {
			t.Fatalf("seed %d: Parse(%s): %v", seed, src, err)
		}
		for _, d := range roots {
			lookups := map[string]int{}
			lookup := func(id string) *sluice.Document {
				lookups[id]++
				return stored[id]
			}
			got, steps, err := filter.MatchSteps(context.Background(), e, d, lookup, true, 0)
			if err != nil {
				t.Fatalf("seed %d: %s: %v", seed, src, err)
			}
			for id, n := range lookups {
				if n > 1 {
					t.Fatalf("seed %d: %s: %s looked up %d times", seed, src, id, n)
				}
			}
			want, old, err := filter.MatchSteps(context.Background(), e, d, func(id string) *sluice.Document { return stored[id] }, false, 0)
			if err != nil {
				t.Fatalf("seed %d: %s without memoization: %v", seed, src, err)
			}
			if got != want {
				t.Fatalf("seed %d: %s on %s %v: %v with memoization, %v without", seed, src, d.ID, d.Fields, got, want)
			}
			if steps > old {
				t.Fatalf("seed %d: %s: %d steps with memoization, %d without", seed, src, steps, old)
			}
		}
	}
}

// gen makes random documents and filters of fuzzSDL's Person over the
// documents Person/0..Person/n-1.
type gen struct {
	r *rand.Rand
	n int
}

func (g *gen) pick(vs ...any) any { return vs[g.r.IntN(len(vs))] }

// ref returns a reference: to one of the documents mostly, else to none,
// null, or not a reference.
func (g *gen) ref() any {
	switch g.r.IntN(10) {
	case 0:
		return "Person/gone"
	case 1:
		return nil
	case 2:
		return int64(7)
	case 3:
		return map[string]any{"@id": fmt.Sprintf("Person/%d", g.r.IntN(g.n))}
	}
	return fmt.Sprintf("Person/%d", g.r.IntN(g.n))
}

func (g *gen) fields() map[string]any {
	f := map[string]any{}
	set := func(k string, v func() any) {
		if g.r.IntN(5) > 0 {
			f[k] = v()
		}
	}
	set("name", func() any { return g.pick("a", "b", "", nil) })
	set("age", func() any { return g.pick(int64(0), int64(1), json.Number("2"), nil, "1") })
	set("active", func() any { return g.pick(true, false, nil) })
	set("best", g.ref)
	set("friends", func() any {
		if g.r.IntN(6) == 0 {
			return nil
		}
		l := []any{}
		for range g.r.IntN(5) {
			l = append(l, g.ref())
		}
		return l
	})
	addr := func() any {
		if g.r.IntN(6) == 0 {
			return g.pick(nil, "x")
		}
		return map[string]any{"city": g.pick("x", "y", nil), "zip": g.pick(int64(1), int64(2))}
	}
	set("home", addr)
	set("homes", func() any {
		l := []any{}
		for range g.r.IntN(3) {
			l = append(l, addr())
		}
		return l
	})
	set("tags", func() any {
		l := []any{}
		for range g.r.IntN(3) {
			l = append(l, g.pick("t", "u", nil))
		}
		return l
	})
	return f
}

// filter returns a random filter of Person, nested at most depth levels
// through references and logical operators.
func (g *gen) filter(depth int) map[string]any {
	out := map[string]any{}
	for range 1 + g.r.IntN(2) {
		k := g.r.IntN(14)
		if depth == 0 {
			k = g.r.IntN(6)
		}
		switch k {
		case 0:
			out["name"] = map[string]any{g.pick("eq", "ne", "lt", "startsWith").(string): g.pick("a", "b", "")}
		case 1:
			out["age"] = map[string]any{g.pick("eq", "ge", "lt").(string): g.pick(0, 1, 2)}
		case 2:
			out["active"] = map[string]any{"eq": g.pick(true, false)}
		case 3:
			out["_id"] = fmt.Sprintf("Person/%d", g.r.IntN(g.n+1))
		case 4:
			out["homes"] = map[string]any{g.quant(): map[string]any{"city": map[string]any{"eq": g.pick("x", "y")}}}
		case 5:
			out["tags"] = map[string]any{g.quant(): map[string]any{g.pick("eq", "ne").(string): g.pick("t", "u")}}
		case 6, 7, 8:
			out["friends"] = map[string]any{g.quant(): g.filter(depth - 1)}
		case 9, 10:
			out["best"] = g.filter(depth - 1)
		case 11:
			out["_not"] = g.filter(depth - 1)
		case 12:
			out[g.pick("_and", "_or").(string)] = []any{g.filter(depth - 1), g.filter(depth - 1)}
		case 13:
			out["home"] = map[string]any{"zip": map[string]any{"ge": g.pick(1, 2)}}
		}
	}
	return out
}

func (g *gen) quant() string { return g.pick("someHave", "allHave").(string) }

// TestMatchUnknown: a filter on a document whose field f holds a value
// that cannot be shown (left out, not null) is decided when its outcome
// does not depend on f, whatever f holds, and is unknown when it does.
func TestMatchUnknown(t *testing.T) {
	const sdl = `type V { f: Float s: String fs: [Float] }`
	doc := &sluice.Document{ID: "V/1", Type: "V", Fields: map[string]any{"s": "a", "fs": []any{json.Number("1")}}}
	for _, c := range []struct {
		src       string
		ok, known bool
	}{
		{`{"s": {"eq": "a"}}`, true, true},
		{`{"f": {"gt": 0}}`, false, false},
		{`{"f": {"lt": 0}}`, false, false},
		{`{"_not": {"f": {"gt": 0}}}`, false, false},
		{`{"s": {"eq": "b"}, "f": {"gt": 0}}`, false, true},
		{`{"s": {"eq": "a"}, "f": {"gt": 0}}`, false, false},
		{`{"_or": [{"s": {"eq": "a"}}, {"f": {"gt": 0}}]}`, true, true},
		{`{"_or": [{"s": {"eq": "b"}}, {"f": {"gt": 0}}]}`, false, false},
		{`{"_not": {"_or": [{"s": {"eq": "a"}}, {"f": {"gt": 0}}]}}`, false, true},
		{`{"fs": {"someHave": {"gt": 0}}}`, true, true},
		{`{"s": {"eq": "a"}, "fs": {"someHave": {"gt": 0}}}`, true, true},
	} {
		e := parseFilter(t, sdl, "V", c.src)
		ok, known, err := filter.MatchUnknown(context.Background(), e, doc, nil, []string{"f"})
		if err != nil || ok != c.ok || known != c.known {
			t.Errorf("%s: %v, known %v (%v), want %v, known %v", c.src, ok, known, err, c.ok, c.known)
		}
		// Without unknown fields it is MatchContext.
		want, _ := filter.MatchContext(context.Background(), e, doc, nil)
		if ok, known, _ := filter.MatchUnknown(context.Background(), e, doc, nil, nil); ok != want || !known {
			t.Errorf("%s without unknown fields: %v, known %v, want %v", c.src, ok, known, want)
		}
	}
}

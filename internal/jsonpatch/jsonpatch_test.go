package jsonpatch

import (
	"encoding/json"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// equal reports whether two decoded JSON values are equal.
func equal(a, b any) bool { return (&differ{}).equal(a, b) }

// roundTrip checks that applying Diff(a, b, max) to a gives b.
func roundTrip(t *testing.T, a, b string, max int) string {
	t.Helper()
	patch, err := Diff([]byte(a), []byte(b), max)
	if err != nil {
		t.Fatalf("Diff(%s, %s): %v", a, b, err)
	}
	out, err := Apply([]byte(a), patch)
	if err != nil {
		t.Fatalf("apply %s to %s: %v", patch, a, err)
	}
	got, _ := decode(out)
	want, _ := decode([]byte(b))
	if !equal(got, want) {
		t.Fatalf("Diff(%s, %s) = %s, which gives %v", a, b, patch, got)
	}
	return string(patch)
}

func TestDiff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ a, b, patch string }{
		{`{"P":[]}`, `{"P":[]}`, `[]`},
		{`{"P":[{"n":"a"}]}`, `{"P":[{"n":"b"}]}`, `[{"op":"replace","path":"/P/0/n","value":"b"}]`},
		// One document into a sorted list: one add at its place.
		{`{"P":[{"n":"a"},{"n":"c"}]}`, `{"P":[{"n":"a"},{"n":"b"},{"n":"c"}]}`, `[{"op":"add","path":"/P/1","value":{"n":"b"}}]`},
		{`{"P":[{"n":"a"},{"n":"b"},{"n":"c"}]}`, `{"P":[{"n":"a"},{"n":"c"}]}`, `[{"op":"remove","path":"/P/1"}]`},
		{`{"P":[1,2,3,4]}`, `{"P":[1,4]}`, `[{"op":"remove","path":"/P/1"},{"op":"remove","path":"/P/1"}]`},
		{`{"a":1,"b":2}`, `{"b":2,"c":3}`, `[{"op":"remove","path":"/a"},{"op":"add","path":"/c","value":3}]`},
		{`{"a/b~":1}`, `{"a/b~":2}`, `[{"op":"replace","path":"/a~1b~0","value":2}]`},
		{`{"a":{"x":1}}`, `{"a":[1]}`, `[{"op":"replace","path":"/a","value":[1]}]`},
		{`{"a":"<&>"}`, `{"a":"<&>!"}`, `[{"op":"replace","path":"/a","value":"<&>!"}]`},
		{`{"n":1.50}`, `{"n":1.5}`, `[{"op":"replace","path":"/n","value":1.5}]`},
		{`{"a":null}`, `{"a":false}`, `[{"op":"replace","path":"/a","value":false}]`},
	} {
		if got := roundTrip(t, c.a, c.b, math.MaxInt); got != c.patch {
			t.Errorf("Diff(%s, %s) = %s, want %s", c.a, c.b, got, c.patch)
		}
	}
}

func TestDiffRefusesNonJSON(t *testing.T) {
	t.Parallel()
	if _, err := Diff([]byte(`{`), []byte(`{}`), math.MaxInt); err == nil {
		t.Error("Diff of a truncated document succeeded")
	}
	if _, err := Diff([]byte(`{}`), []byte(`x`), math.MaxInt); err == nil {
		t.Error("Diff to a non-JSON document succeeded")
	}
}

// FuzzDiff checks that Diff's patch turns any JSON document into any
// other, and so does the patch it returns within a budget smaller than the
// whole replace, whichever it is.
func FuzzDiff(f *testing.F) {
	f.Add(`{"P":[{"n":"a"},{"n":"c"}]}`, `{"P":[{"n":"c"},{"n":"b","x":[1,2]}]}`)
	f.Add(`[1,2,3]`, `[3,2,1,0]`)
	f.Add(`{"~":{"/":null}}`, `{"~":{"/":[true]}}`)
	f.Add(`"x"`, `{"a":1}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		if _, err := decode([]byte(a)); err != nil || !json.Valid([]byte(a)) {
			return
		}
		if _, err := decode([]byte(b)); err != nil || !json.Valid([]byte(b)) {
			return
		}
		roundTrip(t, a, b, math.MaxInt)
		if p := roundTrip(t, a, b, len(b)); len(p) > len(b) && len(p) > ReplaceSize([]byte(b)) {
			t.Errorf("Diff(%s, %s, %d) = %s, larger than the whole replace", a, b, len(b), p)
		}
	})
}

// deepDocument returns a document whose field "deep" holds depth nested
// objects, each under a key of keyLen bytes, the innermost holding leaves
// numbers (leaf i is i+add), and whose field "n" is n.
func deepDocument(depth, keyLen, leaves, add, n int) []byte {
	var b strings.Builder
	b.WriteString(`{"n":` + strconv.Itoa(n) + `,"deep":`)
	for i := range depth {
		b.WriteString(`{"` + strings.Repeat(string(rune('a'+i%26)), keyLen) + `":`)
	}
	b.WriteByte('{')
	for i := range leaves {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"l` + strconv.Itoa(i) + `":` + strconv.Itoa(i+add))
	}
	b.WriteString(strings.Repeat("}", depth+2))
	return []byte(b.String())
}

// allocated returns the bytes f allocates (the test must not be parallel:
// the count is the process's).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDiffCostIsBounded: the patch of a deep document with long keys
// costs about its two documents, not its leaves times their paths. 2,000
// leaves under 40 keys of 500 bytes (a 40 KB document, each leaf's path
// 20 KB): with another field changed the patch is one replace and Diff
// allocates about what decoding them takes (it built every leaf's
// path, 40 MB, before); with every leaf changed the patch would be 40 MB,
// and past its budget Diff returns the whole replace having allocated
// about the decoded documents and the budget. Not parallel: it counts the process's allocations.
func TestDiffCostIsBounded(t *testing.T) {
	a := deepDocument(40, 500, 2000, 0, 1)
	b := deepDocument(40, 500, 2000, 0, 2)
	// What decoding the two documents costs, which Diff cannot avoid,
	// and room for the patch and the keys it sorts: ten times its budget
	// (it takes 5 to 8; building each leaf's path took 900).
	decoding := allocated(func() {
		if _, err := decode(a); err != nil {
			t.Fatal(err)
		}
		if _, err := decode(b); err != nil {
			t.Fatal(err)
		}
	})
	limit := decoding + uint64(10*ReplaceSize(b))
	var p []byte
	n := allocated(func() {
		var err error
		if p, err = Diff(a, b, ReplaceSize(b)); err != nil {
			t.Fatal(err)
		}
	})
	if string(p) != `[{"op":"replace","path":"/n","value":2}]` {
		t.Errorf("one field changed: patch %.200s", p)
	}
	if n > limit {
		t.Errorf("one field changed: Diff of two %d-byte documents allocated %d bytes, more than %d", len(a), n, limit)
	}

	c := deepDocument(40, 500, 2000, 1, 1) // every leaf changed
	n = allocated(func() {
		var err error
		if p, err = Diff(a, c, ReplaceSize(c)); err != nil {
			t.Fatal(err)
		}
	})
	if want := replacePrefix + string(c) + replaceSuffix; string(p) != want {
		t.Errorf("every leaf changed: patch of %d bytes, not the whole replace (%d bytes): %.200s", len(p), len(want), p)
	}
	if n > limit {
		t.Errorf("every leaf changed: Diff of two %d-byte documents allocated %d bytes, more than %d", len(a), n, limit)
	}
	if got, err := Apply(a, p); err != nil || !sameJSON(got, c) {
		t.Errorf("the whole replace gives %.200s (%v)", got, err)
	}
}

func sameJSON(a, b []byte) bool {
	va, err := decode(a)
	if err != nil {
		return false
	}
	vb, err := decode(b)
	return err == nil && equal(va, vb)
}

// deepLists returns a list nested depth levels deep, each level holding
// a list of width numbers before the next level, the innermost holding
// leaf: [[0,…,0,1],[[0,…,0,1],[…,leaf]]].
func deepLists(depth, width int, leaf string) []byte {
	var b strings.Builder
	wide := "[" + strings.Repeat("0,", width) + "1]"
	for range depth {
		b.WriteString("[" + wide + ",")
	}
	b.WriteString(strconv.Quote(leaf))
	b.WriteString(strings.Repeat("]", depth))
	return []byte(b.String())
}

// TestDiffOfDeepListsComparesEachValueOnce: Diff of two documents of
// lists nested 400 levels deep, differing only in the innermost value,
// compares each of their values a few times, not once for each level
// above it. diffLists compares a list's first and last elements to find
// what it walks into, and each of those held every level below: two
// documents of 2 MB (1,000,000 numbers) took 7 s of a core, about 200
// comparisons a value, for /api/diff and a live query's patch alike.
func TestDiffOfDeepListsComparesEachValueOnce(t *testing.T) {
	t.Parallel()
	const depth, width = 400, 50
	a, b := deepLists(depth, width, "a"), deepLists(depth, width, "b")
	va, err := decode(a)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	d := newDiffer(ReplaceSize(b))
	d.buf.WriteByte('[')
	d.diff(va, vb)
	values := depth * (width + 3) // each level's list, its numbers and the wide list
	if d.compared > 4*values {
		t.Errorf("Diff compared %d values of documents of %d: more than 4 times each", d.compared, values)
	}
	want := `[{"op":"replace","path":"` + strings.Repeat("/1", depth) + `","value":"b"}]`
	if p := roundTrip(t, string(a), string(b), ReplaceSize(b)); p != want {
		t.Errorf("patch %.200s, want %.200s", p, want)
	}
}

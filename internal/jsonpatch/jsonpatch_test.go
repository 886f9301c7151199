package jsonpatch

import (
	"encoding/json"
	"testing"
)

// roundTrip checks that applying Diff(a, b) to a gives b.
func roundTrip(t *testing.T, a, b string) string {
	t.Helper()
	patch, err := Diff([]byte(a), []byte(b))
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
		if got := roundTrip(t, c.a, c.b); got != c.patch {
			t.Errorf("Diff(%s, %s) = %s, want %s", c.a, c.b, got, c.patch)
		}
	}
}

func TestDiffRefusesNonJSON(t *testing.T) {
	t.Parallel()
	if _, err := Diff([]byte(`{`), []byte(`{}`)); err == nil {
		t.Error("Diff of a truncated document succeeded")
	}
	if _, err := Diff([]byte(`{}`), []byte(`x`)); err == nil {
		t.Error("Diff to a non-JSON document succeeded")
	}
}

// FuzzDiff checks that Diff's patch turns any JSON document into any other.
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
		roundTrip(t, a, b)
	})
}

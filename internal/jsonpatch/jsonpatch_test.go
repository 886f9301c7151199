package jsonpatch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// apply applies patch to doc as RFC 6902 says (add, remove, replace),
// the way the standard appliers do; the tests check Diff with it, and the
// client tests with fast-json-patch.
func apply(doc any, patch []byte) (any, error) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, err
	}
	for _, op := range ops {
		var v any
		if op.Op != "remove" {
			var err error
			if v, err = decode(op.Value); err != nil {
				return nil, err
			}
		}
		var err error
		if doc, err = applyOp(doc, op.Op, pointer(op.Path), v); err != nil {
			return nil, fmt.Errorf("%s %s: %w", op.Op, op.Path, err)
		}
	}
	return doc, nil
}

func pointer(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts
}

func applyOp(doc any, op string, path []string, v any) (any, error) {
	if len(path) == 0 {
		if op == "remove" {
			return nil, nil
		}
		return v, nil
	}
	k, rest := path[0], path[1:]
	switch d := doc.(type) {
	case map[string]any:
		if len(rest) > 0 {
			child, ok := d[k]
			if !ok {
				return nil, fmt.Errorf("no key %q", k)
			}
			nv, err := applyOp(child, op, rest, v)
			d[k] = nv
			return d, err
		}
		_, has := d[k]
		switch op {
		case "add":
			d[k] = v
		case "replace":
			if !has {
				return nil, fmt.Errorf("replace of missing key %q", k)
			}
			d[k] = v
		case "remove":
			if !has {
				return nil, fmt.Errorf("remove of missing key %q", k)
			}
			delete(d, k)
		}
		return d, nil
	case []any:
		i, err := strconv.Atoi(k)
		if len(rest) > 0 {
			if err != nil || i < 0 || i >= len(d) {
				return nil, fmt.Errorf("bad index %q", k)
			}
			nv, err := applyOp(d[i], op, rest, v)
			d[i] = nv
			return d, err
		}
		switch op {
		case "add":
			if k == "-" {
				return append(d, v), nil
			}
			if err != nil || i < 0 || i > len(d) {
				return nil, fmt.Errorf("bad index %q", k)
			}
			d = append(d, nil)
			copy(d[i+1:], d[i:])
			d[i] = v
			return d, nil
		case "replace", "remove":
			if err != nil || i < 0 || i >= len(d) {
				return nil, fmt.Errorf("bad index %q", k)
			}
			if op == "replace" {
				d[i] = v
				return d, nil
			}
			return append(d[:i], d[i+1:]...), nil
		}
	}
	return nil, fmt.Errorf("%q is not in a container", k)
}

// roundTrip checks that applying Diff(a, b) to a gives b.
func roundTrip(t *testing.T, a, b string) string {
	t.Helper()
	patch, err := Diff([]byte(a), []byte(b))
	if err != nil {
		t.Fatalf("Diff(%s, %s): %v", a, b, err)
	}
	va, _ := decode([]byte(a))
	got, err := apply(va, patch)
	if err != nil {
		t.Fatalf("apply %s to %s: %v", patch, a, err)
	}
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

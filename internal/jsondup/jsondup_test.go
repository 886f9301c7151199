package jsondup

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	for _, tc := range []struct {
		in, path string
		offset   int
	}{
		{in: `{"@type":"Dog","@type":"Person","@id":"d3"}`, path: "@type", offset: 15},
		{in: `{"@id":"d1","@id":"d2"}`, path: "@id", offset: 12},
		{in: `{"home":{"street":"a","street":"b"}}`, path: "home.street", offset: 22},
		{in: `{"friends":[{"n":1},{"n":2,"n":3}]}`, path: "friends[1].n", offset: 27},
		{in: `[{"a":1},[{"b":1,"b":2}]]`, path: "[1][0].b", offset: 17},
		// Names compare as decoded: an escape or invalid UTF-8 (which
		// decodes to U+FFFD) names the same member.
		{in: `{"@type":"A","@\u0074ype":"B"}`, path: "@type", offset: 13},
		{in: "{\"\xff\":1,\"\xfe\":2}", path: "\ufffd", offset: 7},
		{in: `{"a":1,"b":{"a":1},"c":[{"a":1}]}`},
		{in: `{"a":1,"A":2}`},
		{in: `{}`}, {in: `[]`}, {in: `"x"`}, {in: `12`},
		// Not JSON: what was met before the error.
		{in: `{"a":1,"a"`, path: "a", offset: 7},
		{in: `{"a":1,"b"`},
		{in: `{"a":{"b":1},"a":}`, path: "a", offset: 13},
	} {
		r, ok := Find([]byte(tc.in))
		if ok != (tc.path != "") || r.Path != tc.path || ok && r.Offset != tc.offset {
			t.Errorf("Find(%s) = %+v, %v; want %q at %d", tc.in, r, ok, tc.path, tc.offset)
		}
	}
}

func TestFindManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{`)
	for i := range 100 {
		b.WriteString(`"m` + strconv.Itoa(i) + `":{"x":1,"y":2},`)
	}
	ok := b.String() + `"last":0}`
	if r, found := Find([]byte(ok)); found {
		t.Fatalf("100 distinct members: %+v", r)
	}
	dup := b.String() + `"m7":0}`
	if r, found := Find([]byte(dup)); !found || r.Path != "m7" || r.Offset != strings.LastIndex(dup, `"m7"`) {
		t.Fatalf("m7 twice among 100: %+v, %v", r, found)
	}
}

func TestFindFold(t *testing.T) {
	for _, tc := range []struct {
		in, path string
	}{
		{`{"schema":"a","Schema":"b"}`, "Schema"},
		{`{"SCHEMA":"a","schema":"b"}`, "schema"},
		{"{\"k\":1,\"\u212a\":2}", "\u212a"}, // the Kelvin sign folds to k
		{`{"a":{"x":1,"X":2}}`, ""},          // below the top level, as Find
		{`{"a":{"x":1,"x":2}}`, "a.x"},
		{`{"schema":"a","label":"b"}`, ""},
	} {
		r, ok := FindFold([]byte(tc.in))
		if ok != (tc.path != "") || r.Path != tc.path {
			t.Errorf("FindFold(%s) = %+v, %v; want %q", tc.in, r, ok, tc.path)
		}
	}
}

// TestFindAllocates checks that an object of few members, without escapes,
// is checked without allocating: the check is on the write path.
func TestFindAllocates(t *testing.T) {
	b := []byte(`{"@type":"Person","@id":"p1","name":"Ann","home":{"street":"Main","city":"X"},"tags":["a","b"],"age":3,"ok":true}`)
	if n := testing.AllocsPerRun(100, func() { Find(b) }); n != 0 {
		t.Fatalf("Find allocated %v times", n)
	}
}

// repeated is what Find must say, read with encoding/json's tokens: the
// path of the first member named twice, in the order of the text.
func repeated(b []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func() (string, bool, error)
	walk = func() (string, bool, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", false, err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return "", false, err
				}
				name := k.(string)
				if seen[name] {
					return name, true, nil
				}
				seen[name] = true
				if p, ok, err := walk(); ok || err != nil {
					return join(name, p), ok, err
				}
			}
			_, err = dec.Token()
			return "", false, err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if p, ok, err := walk(); ok || err != nil {
					return join("["+strconv.Itoa(i)+"]", p), ok, err
				}
			}
			_, err = dec.Token()
			return "", false, err
		}
		return "", false, nil
	}
	p, ok, err := walk()
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false
	}
	return p, ok
}

// FuzzFind: for any valid JSON, Find reports a member named twice when
// encoding/json's tokens show one, the same one at the same path, and at
// the offset of its name; for anything else it does not panic.
func FuzzFind(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":[1,{"c":1,"c":2}]}}`, `{"\u0061":1,"a":2}`, "{\"\xff\":1,\"\xfe\":2}", `[{"a":1},{"a":1}]`, `{"a":1,"b":2}`, `{`, `"`, `{"a":"\"","a":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		r, ok := Find(b)
		FindFold(b)
		if !json.Valid(b) {
			return
		}
		path, want := repeated(b)
		if ok != want || r.Path != path {
			t.Fatalf("%q: Find = %+v, %v; encoding/json's tokens: %q, %v", s, r, ok, path, want)
		}
		if ok {
			var name string
			end, _ := skipString(b, r.Offset)
			if end < 0 || json.Unmarshal(b[r.Offset:end], &name) != nil || !strings.HasSuffix(path, name) {
				t.Fatalf("%q: offset %d is not at the name of %q", s, r.Offset, path)
			}
		}
	})
}

// BenchmarkFind against BenchmarkDecode: the check's cost beside the
// decoding it follows, for a document with a subdocument and a list.
var benchDoc = []byte(`{"@type":"Person","@id":"p1","name":"Ann","email":"ann@example.com","age":41,"score":1.5,"active":true,"home":{"street":"Main 1","city":"Oslo","geo":{"lat":59.9,"lon":10.7}},"tags":["a","b","c"],"friends":[{"@id":"Person/b"},{"@id":"Person/c"}]}`)

func BenchmarkFind(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		Find(benchDoc)
	}
}

func BenchmarkDecode(b *testing.B) {
	b.SetBytes(int64(len(benchDoc)))
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(benchDoc))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			b.Fatal(err)
		}
	}
}

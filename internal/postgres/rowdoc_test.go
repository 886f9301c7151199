package postgres

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// rowDocClassSDL has a field of every type: each scalar, enum, reference
// and subdocument (nesting another, with a list), and a list of each.
const rowDocClassSDL = `enum Color { RED GREEN }
type Point @subdocument { x: Float y: Float tags: [String!] }
type Address @subdocument { city: String! zip: Int at: Point }
type Thing {
	s: String
	key: ID
	i: Int
	f: Float
	b: Boolean
	t: DateTime
	big: BigInt
	j: JSON
	color: Color
	friend: Thing
	home: Address
	ss: [String!]
	is: [Int!]
	fs: [Float!]
	bs: [Boolean!]
	ts: [DateTime!]
	bigs: [BigInt!]
	js: [JSON!]
	colors: [Color!]
	friends: [Thing!]
	homes: [Address!]
}`

func rowDocClass(tb testing.TB) *sluice.Class {
	tb.Helper()
	s, err := schema.Parse(rowDocClassSDL)
	if err != nil {
		tb.Fatal(err)
	}
	return s.Class("Thing")
}

// oldRowDocument is how rows were read before transcodeRow, through Go
// values: the oracle transcodeRow must match.
func oldRowDocument(c *sluice.Class, raw []byte, versioned bool) (b []byte, id string, unreadable []string, version string, err error) {
	row, err := decodeRow(raw)
	if err != nil {
		return nil, "", nil, "", err
	}
	doc, unreadable := rowToDocument(c, row)
	if versioned {
		doc.Version = rowVersion(row)
	}
	b, err = DocumentJSON(c, doc)
	return b, doc.ID, unreadable, doc.Version, err
}

// checkRowDocument checks transcodeRow against oldRowDocument on raw,
// and returns what transcodeRow made of it.
func checkRowDocument(t *testing.T, c *sluice.Class, raw string, versioned bool) (rowDoc, error) {
	t.Helper()
	want, wantID, wantUnreadable, wantVersion, wantErr := oldRowDocument(c, []byte(raw), versioned)
	got, err := transcodeRow(c, []byte(raw), versioned)
	if wantErr != nil {
		return got, err // anything but a panic
	}
	if err != nil {
		t.Fatalf("row %q: %v; the old path read %s", raw, err, want)
	}
	if string(got.JSON) != string(want) {
		t.Fatalf("row %q:\n got %s\nwant %s", raw, got.JSON, want)
	}
	if !slices.Equal(got.Unreadable, wantUnreadable) {
		t.Fatalf("row %q: unreadable %q, want %q", raw, got.Unreadable, wantUnreadable)
	}
	if got.Version != wantVersion {
		t.Fatalf("row %q: version %q, want %q", raw, got.Version, wantVersion)
	}
	if len(wantUnreadable) > 0 && got.ID != wantID {
		t.Fatalf("row %q: id %q, want %q", raw, got.ID, wantID)
	}
	return got, nil
}

// rowDocSeeds are rows as to_jsonb writes them (keys by length, then
// bytes; a space after ':' and ','), and some no Sluice write makes.
var rowDocSeeds = []string{
	`{"b": true, "f": 1.50, "i": 42, "j": {"b": 1, "aa": {"d": "<&>", "cc": 1E+2, "bbb": [1, -0, 1e400, "x\u2028y"]}}, "s": "Ann \"Q\" é <b>&amp;", "t": "2024-01-01T10:00:00.123456+01:00", "_id": "Thing/a", "big": 12345678901234567890123, "key": "k-1", "color": "RED", "friend": "Thing/b", "_commit_uid": 1234567}`,
	`{"bs": [true, false], "fs": [1.5, -0, 1E+2, 0.000001, 1e-7, 1e21, 123456789.125], "is": [0, -2147483648, 2147483647], "js": [{"z": null, "a": [{}]}, 1.0, "s", true], "ss": ["a", "\n\t\\", "\u0000", "𝄞", "\ud834\udd1e"], "ts": ["2024-02-29T23:59:59.999999+00:00"], "_id": "Thing/lists", "bigs": ["007", -12, "123456789012345678901234567890"], "home": {"at": {"x": 1, "y": 2.5, "tags": ["p", "q"], "@type": "Point"}, "zip": 75001, "city": "Paris", "@type": "Address"}, "homes": [{"city": "Oslo", "@type": "Address"}], "colors": ["GREEN", "RED"], "friends": ["Thing/a"], "_commit_uid": 9}`,
	`{"f": "NaN", "i": 2147483648, "t": "infinity", "_id": "Thing/odd", "big": 1.5, "color": 3, "is": [2147483648], "fs": ["Infinity"], "ts": ["10000-01-01T00:00:00+00:00"], "bs": [null], "bigs": ["1.5"], "home": [], "homes": [1], "gone": {"x": 1}, "_commit_uid": 1.5}`,
	`{"s": null, "_id": "Thing/nulls", "j": null, "ss": [], "js": [], "_commit_uid": -1}`,
	`{"j": [1e400, -0.0, 1.0E-7, {"\u0061": 1, "a": 2, "ab": 3, "b\u00e9": 4, "bé": 5}], "_id": "Thing/\u00e9<>"}`,
	`{"j": "\u2029\u007f\ud800", "s": 5, "key": {"b": 1, "a": 2}, "_id": 7}`,
	`{"_id":"Thing/compact","i":-0,"f":-0,"big":-0,"j":{"é":1,"e":2,"z":3}}`,
	"{\"j\": \"\xff\xfe\", \"s\": \"a\xc3\", \"_id\": \"Thing/\xff\"}",
	` { "i" : 1 , "i" : 2 , "j" : { "a" : 1 , "a" : null } } trailing`,
	`null`,
	`{}`,
	`[]`,
	`{"i": 1`,
	`{"j": [[[[[[[[[[]]]]]]]]]], "s": "x"}`,
}

// FuzzRowDocumentMatches checks the direct transcoding of rows against
// the old path through Go values: where that reads a row, the same bytes,
// unreadable fields and version; where it cannot, no panic.
func FuzzRowDocumentMatches(f *testing.F) {
	for _, s := range rowDocSeeds {
		f.Add(s, true)
		f.Add(s, false)
	}
	c := rowDocClass(f)
	f.Fuzz(func(t *testing.T, raw string, versioned bool) {
		checkRowDocument(t, c, raw, versioned)
	})
}

func TestRowDocumentCases(t *testing.T) {
	c := rowDocClass(t)
	deep := func(n int) string {
		return `{"_id": "Thing/deep", "j": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	}
	manyInts := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"is": [`)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("0")
		}
		b.WriteString(`], "_id": "Thing/many", "s": "x"}`)
		return b.String()
	}
	for _, tc := range []struct {
		name, raw  string
		versioned  bool
		want       string // "" when the row is refused
		unreadable []string
	}{
		{"scalars", `{"b": true, "f": 1.50, "i": -0, "s": "<é>", "t": "2024-01-01T10:00:00+01:00", "_id": "Thing/a", "big": 123456789012345678901, "key": "k"}`, false,
			`{"@id":"Thing/a","@type":"Thing","s":"\u003cé\u003e","key":"k","i":0,"f":1.5,"b":true,"t":"2024-01-01T09:00:00Z","big":"123456789012345678901"}`, nil},
		{"version", `{"_id": "Thing/a", "_commit_uid": 35}`, true, `{"@id":"Thing/a","@type":"Thing","@version":"z"}`, nil},
		{"no version unasked", `{"_id": "Thing/a", "_commit_uid": 35}`, false, `{"@id":"Thing/a","@type":"Thing"}`, nil},
		{"floats", `{"_id": "Thing/f", "fs": [1E+2, -0, 1e-7, 1e21, 0.1], "f": 1e400}`, false,
			`{"@id":"Thing/f","@type":"Thing","fs":[100,0,1e-7,1e+21,0.1]}`, []string{"f"}},
		{"JSON keys in Go's order", `{"_id": "Thing/j", "j": {"b": 1, "aa": {"d": "<&>\u2028", "cc": 1E+2}, "a\u0062": 1.50}}`, false,
			`{"@id":"Thing/j","@type":"Thing","j":{"aa":{"cc":1E+2,"d":"\u003c\u0026\u003e\u2028"},"ab":1.50,"b":1}}`, nil},
		{"repeated keys", `{"_id": "Thing/r", "i": 1, "j": {"a": 1, "b": 2, "a": 3}, "i": 2}`, false,
			`{"@id":"Thing/r","@type":"Thing","i":2,"j":{"a":3,"b":2}}`, nil},
		{"escapes", `{"_id": "Thing/e\u0021", "ss": ["\n\"\\\/", "\u00e9", "\ud834\udd1e"]}`, false,
			`{"@id":"Thing/e!","@type":"Thing","ss":["\n\"\\/","é","𝄞"]}`, nil},
		{"Int elements are 32-bit", `{"_id": "Thing/i", "i": 2147483648, "is": [2147483648]}`, false,
			`{"@id":"Thing/i","@type":"Thing","i":2147483648}`, []string{"is"}},
		{"unreadable values", `{"_id": "Thing/u", "f": "NaN", "t": "infinity", "big": 1.5, "bs": [true, null], "bigs": ["7", "x"], "home": [1], "colors": [1]}`, false,
			`{"@id":"Thing/u","@type":"Thing"}`, []string{"f", "t", "big", "home", "bs", "bigs", "colors"}},
		{"BigInt elements", `{"_id": "Thing/b", "bigs": ["007", -3, 12345678901234567890123]}`, false,
			`{"@id":"Thing/b","@type":"Thing","bigs":["007","-3","12345678901234567890123"]}`, nil},
		{"subdocuments", `{"_id": "Thing/s", "home": {"at": {"x": 1.50, "tags": ["<"]}, "city": "Oslo", "@type": "Address"}}`, false,
			`{"@id":"Thing/s","@type":"Thing","home":{"@type":"Address","at":{"tags":["\u003c"],"x":1.50},"city":"Oslo"}}`, nil},
		{"nulls and unknown columns", `{"s": null, "gone": [1, {"a": "}"}], "_id": "Thing/n", "j": null}`, false,
			`{"@id":"Thing/n","@type":"Thing"}`, nil},
		{"null row", `null`, true, `{"@id":"","@type":"Thing"}`, nil},
		{"not an object", `[1]`, false, "", nil},
		{"cut short", `{"_id": "Thing/x", "j": [1, `, false, "", nil},
		{"deep but readable", deep(9999), false, `{"@id":"Thing/deep","@type":"Thing","j":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, nil},
		{"too deep", deep(10000), false, "", nil},
		{"values at the bound", manyInts(schema.MaxValues - 1), false, "", nil},
		{"values past the bound", manyInts(schema.MaxValues), false, `{"@id":"Thing/many","@type":"Thing","s":"x"}`, []string{"is"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkRowDocument(t, c, tc.raw, tc.versioned)
			if tc.name == "values at the bound" {
				if err != nil || len(got.Unreadable) != 0 || len(got.JSON) < 2*(schema.MaxValues-1) {
					t.Fatalf("%d bytes, unreadable %q, %v", len(got.JSON), got.Unreadable, err)
				}
				return
			}
			if tc.want == "" {
				if err == nil {
					t.Fatalf("read %s, want an error", got.JSON)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got.JSON) != tc.want || !slices.Equal(got.Unreadable, tc.unreadable) {
				t.Fatalf("got %s %q,\nwant %s %q", got.JSON, got.Unreadable, tc.want, tc.unreadable)
			}
		})
	}
}

// BenchmarkRowDocument compares reading a row through Go values (old)
// with transcoding it (new): a typical row, a list of small ints and a
// JSON value of small objects.
func BenchmarkRowDocument(b *testing.B) {
	c := rowDocClass(b)
	var ints strings.Builder
	ints.WriteString(`{"is": [`)
	for i := range schema.MaxValues - 1 { // the most a field may hold, itself counted
		if i > 0 {
			ints.WriteString(", ")
		}
		fmt.Fprint(&ints, i%1000)
	}
	ints.WriteString(`], "_id": "Thing/ints", "_commit_uid": 12345}`)
	var objs strings.Builder
	objs.WriteString(`{"j": [`)
	for i := range 100_000 {
		if i > 0 {
			objs.WriteString(", ")
		}
		fmt.Fprintf(&objs, `{"n": %d, "at": "x%d", "ok": true}`, i, i%10)
	}
	objs.WriteString(`], "_id": "Thing/objects", "_commit_uid": 12345}`)
	for _, row := range []struct{ name, raw string }{
		{"typical", `{"b": true, "f": 1.5, "i": 42, "j": {"n": 1, "tag": "x"}, "s": "Ann Smith", "t": "2024-01-01T10:00:00.123456+00:00", "ss": ["a", "b", "c"], "_id": "Thing/a1b2c3", "big": 12345678901234567890, "key": "k-1", "color": "RED", "friend": "Thing/b", "_commit_uid": 1234567}`},
		{"ints", ints.String()},
		{"objects", objs.String()},
	} {
		raw := []byte(row.raw)
		if _, _, u, _, err := oldRowDocument(c, raw, true); err != nil || len(u) > 0 {
			b.Fatal(err, u)
		}
		b.Run(row.name+"/old", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, _, err := oldRowDocument(c, raw, true); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(row.name+"/new", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := transcodeRow(c, raw, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRowDocumentReorderBound checks that a big value under many levels
// of objects to reorder (Postgres's key order, not Go's) is not moved once
// for each level: past 8 times the row's bytes moved, the row is read
// through Go values, with the same result.
func TestRowDocumentReorderBound(t *testing.T) {
	c := rowDocClass(t)
	const depth = 300
	value := strings.Repeat(`{"b": `, depth) + `"` + strings.Repeat("x", 200_000) + `"` + strings.Repeat(`, "aa": 1}`, depth)
	tr := &rowTranscoder{in: []byte(value), maxMoved: 8 * len(value)}
	if _, err := tr.value(0, 1); err != errMovedMuch {
		t.Fatalf("moved %d bytes: %v", tr.moved, err)
	}
	got, err := checkRowDocument(t, c, `{"j": `+value+`, "_id": "Thing/deep"}`, false)
	if err != nil || !strings.HasPrefix(string(got.JSON), `{"@id":"Thing/deep","@type":"Thing","j":{"aa":1,"b":{"aa":1,"b":`) {
		t.Fatalf("%.100s: %v", got.JSON, err)
	}
}

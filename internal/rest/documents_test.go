package rest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
)

// TestDeleteBody: a DELETE body's ids and preconditions; an element that
// is neither an id nor an {"@id", "@version"} object is refused naming
// its index and what is wrong with it.
func TestDeleteBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body   string
		ids    []string
		expect []sluice.Precondition
	}{
		{`"Person/a"`, []string{"Person/a"}, nil},
		{`["Person/a","Person/b"]`, []string{"Person/a", "Person/b"}, nil},
		{`["Person/a",{"@id":"Person/b","@version":null}]`, []string{"Person/a", "Person/b"}, nil},
		{`["Person/a",{"@id":"Person/b","@version":"3f"}]`, []string{"Person/a", "Person/b"}, []sluice.Precondition{{}, {Version: "3f"}}},
		{`[{"@version":"*","@id":"Person/b"}]`, []string{"Person/b"}, []sluice.Precondition{{Version: "*"}}},
	} {
		ids, expect, err := deleteBody([]byte(tc.body))
		if err != nil || !reflect.DeepEqual(ids, tc.ids) || !reflect.DeepEqual(expect, tc.expect) {
			t.Errorf("%s: %q %+v (%v), want %q %+v", tc.body, ids, expect, err, tc.ids, tc.expect)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{`[{"@id":"Person/p","@version":""}]`, `element 0 (counting from 0): "@version" must be a version string as Sluice gave it (or null), got an empty string`},
		{`["Person/a",{"@id":"Person/p","@version":3}]`, `element 1 (counting from 0): "@version" must be a version string as Sluice gave it (or null), got a number`},
		{`[{"@id":"Person/p","@type":"Person"}]`, `element 0 (counting from 0): unknown member "@type"`},
		{`[{"@version":"3f"}]`, `element 0 (counting from 0): "@id" is missing`},
		{`[{"@id":null}]`, `element 0 (counting from 0): "@id" must be a string, got null`},
		{`["Person/a",["Person/b"]]`, `element 1 (counting from 0): expected a string or an object, got an array`},
		{`[7]`, `element 0 (counting from 0): expected a string or an object, got a number`},
		{`{"@id":"Person/a"}`, `give ?id=<id> or a body with a JSON array`},
	} {
		_, _, err := deleteBody([]byte(tc.body))
		if sluice.ErrorCode(err) != sluice.CodeInvalid || !strings.Contains(sluice.ErrorMessage(err), tc.want) {
			t.Errorf("%s: %v, want a BadRequest saying %q", tc.body, err, tc.want)
		}
	}
}

// FuzzDeleteBody: any DELETE body is read or refused as a client error,
// never with a panic; what is read has an id per precondition and no
// empty version.
func FuzzDeleteBody(f *testing.F) {
	for _, s := range []string{`"Person/a"`, `["a",{"@id":"b","@version":"3f"}]`, `[{"@id":"b","@version":""}]`, `[{"@id":1}]`, `[{}]`, `[null]`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		ids, expect, err := deleteBody([]byte(body))
		if err != nil {
			if sluice.ErrorCode(err) != sluice.CodeInvalid {
				t.Fatalf("%q: error %v is not a BadRequest", body, err)
			}
			return
		}
		if expect != nil && len(expect) != len(ids) {
			t.Fatalf("%q: %d ids, %d preconditions", body, len(ids), len(expect))
		}
		for _, p := range expect {
			if p.Exists || p.Absent {
				t.Fatalf("%q: precondition %+v", body, p)
			}
		}
	})
}

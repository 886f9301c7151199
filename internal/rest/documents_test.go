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
		{`[]`, []string{}, nil},
	} {
		ids, expect, err := deleteBody(strings.NewReader(tc.body), nil)
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
		{`null`, `give ?id=<id> or a body with a JSON array`},
		{`["Person/a"] ["Person/b"]`, `give ?id=<id> or a body with a JSON array`},
		{`["Person/a"`, `give ?id=<id> or a body with a JSON array`},
		{``, `give ?id=<id> or a body with a JSON array`},
	} {
		_, _, err := deleteBody(strings.NewReader(tc.body), nil)
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
		ids, expect, err := deleteBody(strings.NewReader(body), nil)
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

// TestDeleteBodyStopsAtTheLimit: a DELETE body of more ids than a write
// may hold is refused at the first one too many, before the rest of it is
// read, let alone decoded.
func TestDeleteBodyStopsAtTheLimit(t *testing.T) {
	t.Parallel()
	tooMany := sluice.Errorf(sluice.CodeTooLarge, "too many")
	count := func(n int64) error {
		if n > 3 {
			return tooMany
		}
		return nil
	}
	if ids, _, err := deleteBody(strings.NewReader(`["a","b","c"]`), count); err != nil || len(ids) != 3 {
		t.Fatalf("3 ids: %q, %v", ids, err)
	}
	// An endless body: only what comes before the fourth id is read.
	r := &endless{prefix: `["a",{"@id":"b"},"c",`, item: `"x",`}
	if _, _, err := deleteBody(r, count); err != tooMany {
		t.Fatalf("endless body: %v", err)
	}
	if r.read > 1<<20 {
		t.Fatalf("read %d bytes of it", r.read)
	}
}

// endless is a reader of prefix followed by item for ever.
type endless struct {
	prefix, item string
	read         int
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		var s string
		if e.read+n < len(e.prefix) {
			s = e.prefix[e.read+n:]
		} else {
			s = e.item[(e.read+n-len(e.prefix))%len(e.item):]
		}
		n += copy(p[n:], s)
	}
	e.read += n
	return n, nil
}

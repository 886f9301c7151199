package schema

import (
	"strings"
	"testing"
)

// TestCheckPatch: every member of a merge patch names a field, at any
// depth of the subdocuments it merges into, whatever its value (a review
// found a patch removing a field the class lacks accepted, as a commit
// that changed nothing); inside a JSON value, and in a list that replaces
// the stored one whole, names are left to validation of the result.
func TestCheckPatch(t *testing.T) {
	t.Parallel()
	s := mustParse(t, docSchema)
	person := s.Class("Person")
	for _, tt := range []struct{ patch, want string }{
		{`{"age":null,"home":{"street":null,"geo":{"lat":1}},"meta":{"any":null,"x":{"y":null}}}`, ""},
		{`{"home":{"@type":"Address","city":"Oslo"},"homes":[{"bogus":1}],"friends":{"a":null}}`, ""},
		{`{"agee":null}`, `Person: unknown field "agee": Person has no such field`},
		{`{"agee":3}`, `Person: unknown field "agee": Person has no such field`},
		{`{"home":{"ctiy":null}}`, `Person: unknown field "home.ctiy": Address has no such field`},
		{`{"home":{"geo":{"la":null}}}`, `Person: unknown field "home.geo.la": Geo has no such field`},
		{`{"@nick":null}`, `Person: unknown key "@nick": only "@id", "@type" and "@version" start with @`},
		{`{"home":{"@id":null}}`, `Person: field "home": a subdocument has no "@id"`},
		{`{"home":{"@type":"Geo","lat":null}}`, `Person: field "home": "@type" must be "Address", got string "Geo"`},
	} {
		err := CheckPatch(s, person, decode(t, tt.patch))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckPatch(%s) = %v, want no error", tt.patch, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckPatch(%s) = %v, want %q", tt.patch, err, tt.want)
		}
	}
}

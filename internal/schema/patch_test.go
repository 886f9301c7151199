package schema

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
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

// TestValidateKept: the values a write keeps of fields its writer cannot
// read (Kept) are validated, but an error in one names neither the field
// nor the value, and the bound of values is checked on the writer's own
// values, the kept ones making it fail without being counted (a review
// found both told in the errors of patches and replaces).
func TestValidateKept(t *testing.T) {
	t.Parallel()
	s := mustParse(t, docSchema)
	private := func(f *sluice.Field) bool { return f.Name == "ssn" }
	doc, err := ValidateKept(s, map[string]any{"@type": "Person", "name": "n", "ssn": Kept{Value: "S-1"}}, private)
	if err != nil || doc.Fields["ssn"] != "S-1" {
		t.Fatalf("a valid kept value: %v %v", doc, err)
	}
	_, err = ValidateKept(s, map[string]any{"@type": "Person", "name": "n", "ssn": Kept{Value: json.Number("12345")}}, private)
	if err == nil || strings.Contains(err.Error(), "ssn") || strings.Contains(err.Error(), "12345") || !strings.Contains(err.Error(), "your role cannot read") {
		t.Errorf("a kept value not valid: %v", err)
	}
	// The writer's 999,992 values and 10 kept ones: past the bound, not
	// counted.
	meta := make([]any, 999_990)
	for i := range meta {
		meta[i] = json.Number("0")
	}
	homes := []any{}
	for range 3 {
		homes = append(homes, map[string]any{"@type": "Address", "city": "c"})
	}
	raw := map[string]any{"@type": "Person", "name": "n", "meta": meta, "homes": Kept{Value: homes}}
	_, err = ValidateKept(s, raw, private)
	if err == nil || !strings.Contains(err.Error(), "more than 1000000 values") || strings.Contains(err.Error(), "1000002") || strings.Contains(err.Error(), "999992") {
		t.Errorf("past the bound with the kept values: %v", err)
	}
	for range 9 {
		meta = append(meta, json.Number("0"))
	}
	raw["meta"] = meta
	if _, err = ValidateKept(s, raw, private); err == nil || !strings.Contains(err.Error(), "holds 1000001 values in the fields your role reads or the write gives") {
		t.Errorf("past the bound with the writer's values: %v", err)
	}
}

package filter_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/schema"
)

const fuzzSDL = `
type Person { name: String! age: Int score: Float born: DateTime wealth: BigInt active: Boolean
  friends: [Person!] best: Person home: Address homes: [Address!] color: Color colors: [Color!] tags: [String!] extra: JSON }
type Address @subdocument { city: String zip: Int }
enum Color { RED GREEN }
`

// FuzzParse feeds arbitrary JSON to Parse: it must never panic, and a
// filter it accepts must evaluate without panicking.
func FuzzParse(f *testing.F) {
	s, err := schema.Parse(fuzzSDL)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"name":{"eq":"a","regex":"^a"}}`,
		`{"age":{"ge":1,"le":2},"_not":{"score":{"gt":1.5}}}`,
		`{"_or":[{"born":{"lt":"2000-01-01T00:00:00Z"}},{"wealth":{"gt":"123456789012345678901234567890"}}]}`,
		`{"friends":{"someHave":{"best":{"name":{"startsWith":"x"}}},"allHave":{"age":{"ne":3}}}}`,
		`{"home":{"city":{"eq":"x"}},"homes":{"someHave":{"zip":{"lt":3}}},"colors":{"allHave":{"eq":"RED"}}}`,
		`{"tags":{"someHave":{"regex":"("}}}`,
		`{"_ids":["Person/a"],"_id":"Person/b","extra":{"eq":1}}`,
		`{"age":{"eq":"x"}}`,
	} {
		f.Add([]byte(seed))
	}
	doc := &sluice.Document{ID: "Person/a", Type: "Person", Fields: map[string]any{
		"name": "a", "age": int64(3), "score": 1.5, "born": "1999-01-01T00:00:00Z", "wealth": "12",
		"active": true, "friends": []any{"Person/a"}, "best": "Person/a",
		"home":  map[string]any{"@type": "Address", "city": "x", "zip": json.Number("3")},
		"homes": []any{map[string]any{"city": "y"}}, "color": "RED", "colors": []any{"GREEN"}, "tags": []any{"t"},
	}}
	lookup := func(id string) *sluice.Document {
		if id == doc.ID {
			return doc
		}
		return nil
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var in map[string]any
		if dec.Decode(&in) != nil {
			return
		}
		e, err := filter.Parse(s, "Person", in)
		if err != nil {
			if sluice.ErrorCode(err) != sluice.CodeInvalid {
				t.Fatalf("error is not CodeInvalid: %v", err)
			}
			return
		}
		filter.Match(e, doc, lookup)
	})
}

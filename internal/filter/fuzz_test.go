package filter_test

import (
	"bytes"
	"context"
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

// FuzzParse feeds arbitrary JSON to Parse: it must never panic, must
// refuse only with CodeInvalid, and a filter it accepts must evaluate
// without panicking, the same with memoization as without, and be within
// the limits.
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
		// Regexes of the dialect and outside it.
		`{"name":{"regex":"(?i)^k\\d+\\s*[^a-c]?.$"},"tags":{"someHave":{"regex":"a.b|\\x{1F600}{2,3}"}}}`,
		`{"_or":[{"name":{"regex":"\\bAl"}},{"name":{"regex":"\\pL"}},{"name":{"regex":"(?m)^a"}},{"name":{"regex":"a{256}"}}]}`,
		`{"name":{"regex":"(?:a?b?){255}"}}`,
		// Limits: terms, depth, ids, numbers, strings Postgres cannot hold.
		`{"_or":[{},{},{"_and":[{},{"_not":{"_not":{"_not":{}}}}]}]}`,
		`{"best":{"best":{"best":{"friends":{"someHave":{"best":{"home":{"zip":{"ge":1}}}}}}}}}`,
		`{"_ids":["Person/a","Person/b","Person/c"],"_id":"\u0000"}`,
		`{"score":{"eq":1e1000000},"wealth":{"lt":"1e5"},"age":{"gt":-0.0}}`,
		`{"name":{"startsWith":"\ud800"}}`,
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
		if n := countNodes(e); n > 2*filter.MaxTerms+1 {
			t.Fatalf("accepted a filter of %d nodes", n)
		}
		got := filter.Match(e, doc, lookup)
		if want, _, err := filter.MatchSteps(context.Background(), e, doc, lookup, false, 0); err == nil && got != want {
			t.Fatalf("Match = %v with memoization, %v without", got, want)
		}
	})
}

// countNodes returns the number of nodes of e, which the term limit
// bounds: each term makes at most two nodes (a reference: Ref and the
// And of the referenced document), and the root And makes one more.
func countNodes(e filter.Expr) int {
	switch x := e.(type) {
	case *filter.And:
		n := 1
		for _, s := range x.Exprs {
			n += countNodes(s)
		}
		return n
	case *filter.Or:
		n := 1
		for _, s := range x.Exprs {
			n += countNodes(s)
		}
		return n
	case *filter.Not:
		return 1 + countNodes(x.Expr)
	case *filter.Ref:
		return 1 + countNodes(x.Expr)
	case *filter.Sub:
		return 1 + countNodes(x.Expr)
	case *filter.Quant:
		return 1 + countNodes(x.Elem)
	}
	return 1
}

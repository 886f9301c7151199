package postgres

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/schema"
)

// FuzzCompileFilter compiles every filter that filter.Parse accepts: it
// must never panic, and values must only ever be parameters.
func FuzzCompileFilter(f *testing.F) {
	s, err := schema.Parse(`
type Person { name: String! age: Int score: Float born: DateTime wealth: BigInt active: Boolean
  friends: [Person!] best: Animal home: Address homes: [Address!] color: Color tags: [String!] }
interface Animal { name: String }
type Dog implements Animal { breed: String }
type Address @subdocument { city: String zip: Int }
enum Color { RED GREEN }`)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"name":{"eq":"x'); DROP TABLE t; --","regex":"^a"},"age":{"ge":1,"le":2}}`,
		`{"_or":[{"born":{"lt":"2000-01-01T00:00:00Z"}},{"wealth":{"gt":"1"}}],"_not":{"active":{"eq":true}}}`,
		`{"friends":{"someHave":{"best":{"name":{"startsWith":"x"}}},"allHave":{"age":{"ne":3}}}}`,
		`{"home":{"city":{"eq":"x"}},"homes":{"someHave":{"zip":{"lt":3}}},"tags":{"allHave":{"eq":"t"}}}`,
		`{"_ids":["Person/a"],"color":{"gt":"RED"},"score":{"eq":1.5}}`,
	} {
		f.Add([]byte(seed))
	}
	d := &sluice.Database{ID: 1}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var in map[string]any
		if dec.Decode(&in) != nil {
			return
		}
		e, err := filter.Parse(s, "Person", in)
		if err != nil {
			return
		}
		b := &sqlBuilder{db: d, schema: s}
		sql, err := b.compileFilter(e, scope{alias: "t"})
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		for _, a := range b.args {
			if str, ok := a.(string); ok && strings.Contains(str, "'") && strings.Contains(sql, str) {
				t.Fatalf("value %q appears in the SQL text: %s", str, sql)
			}
		}
	})
}

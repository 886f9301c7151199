package graphiql

import (
	"strings"

	"github.com/sluice-dev/sluice"
)

// sampleFields bounds the fields a sample query selects.
const sampleFields = 6

// SampleQuery returns the query GraphiQL opens with on database db
// (org/name) whose schema is s, for a reader with role: the documents of
// its first class that can be queried, with their id and the first of
// their fields that hold a value (not a reference or a subdocument) and
// the role may read; for a schema without classes, a comment saying how
// to give it some.
func SampleQuery(db string, s *sluice.Schema, role sluice.Role) string {
	for _, name := range s.Order {
		c := s.Classes[name]
		if c.Kind == sluice.KindSubdocument {
			continue
		}
		var b strings.Builder
		b.WriteString("# The first documents of " + name + " in " + db + ". Run it with the ▶ button\n")
		b.WriteString("# (Ctrl-Enter); the Docs pane lists every query, mutation and subscription.\n")
		b.WriteString("{\n  " + name + "(limit: 10) {\n    _id\n")
		n := 0
		for _, f := range c.Fields {
			if n == sampleFields {
				break
			}
			if f.ReadRole > role || f.Type.Kind == sluice.TypeReference || f.Type.Kind == sluice.TypeSubdocument {
				continue
			}
			b.WriteString("    " + f.Name + "\n")
			n++
		}
		b.WriteString("  }\n}\n")
		return b.String()
	}
	return "# " + db + " has no classes yet: give it a schema with\n" +
		"# PUT /api/schema/" + db + " (its body GraphQL SDL, such as\n" +
		"# type Person { name: String! }), then reload this page.\n{\n  __typename\n}\n"
}

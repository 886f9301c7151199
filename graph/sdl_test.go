package graph_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/schema"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestSDLGolden compares the generated schema of a representative SDL
// (inheritance both ways, enums, references, subdocuments, protected
// fields) with testdata, for a reader and for an admin.
func TestSDLGolden(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(testSDL)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		role sluice.Role
		file string
	}{{sluice.RoleRead, "people.read.graphql"}, {sluice.RoleAdmin, "people.admin.graphql"}} {
		got := graph.SDL(s, c.role)
		if _, err := graph.BuildSchema(s, c.role); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		path := filepath.Join("testdata", c.file)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestSDLGolden -update)", err)
		}
		if got != string(want) {
			t.Errorf("%s: generated SDL differs from the golden file (go test -run TestSDLGolden -update, then review the diff)", c.file)
		}
	}
}

func TestSDLHidesProtectedFields(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(testSDL)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		role        sluice.Role
		ssn, salary bool
	}{{sluice.RoleRead, false, false}, {sluice.RoleWrite, false, true}, {sluice.RoleAdmin, true, true}} {
		sdl := graph.SDL(s, c.role)
		person := sdl[strings.Index(sdl, "type Person {"):]
		person = person[:strings.Index(person, "}")]
		filter := sdl[strings.Index(sdl, "input Person_Filter {"):]
		filter = filter[:strings.Index(filter, "}")]
		for _, part := range []string{person, filter} {
			if got := strings.Contains(part, "ssn:"); got != c.ssn {
				t.Errorf("role %s: ssn shown %v, want %v", c.role, got, c.ssn)
			}
			if got := strings.Contains(part, "salary:"); got != c.salary {
				t.Errorf("role %s: salary shown %v, want %v", c.role, got, c.salary)
			}
		}
	}
}

// TestSDLLeavesOutEmptySubdocuments: a subdocument of which a role sees
// no field (Secret), or sees only fields of such subdocuments (Vault), is
// left out of that role's schema with its filters and every field of its
// type, in objects and filters; its input type stays for a role that may
// write, as a writer's input types hold every field, and goes for one
// that may not (a reader learns no name hidden from it). A subdocument
// that holds only itself is kept.
func TestSDLLeavesOutEmptySubdocuments(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(`type Secret @subdocument { pin: String @private }
type Vault @subdocument { secret: Secret secrets: [Secret!] code: Int @protected(role: "write") }
type Node @subdocument { next: Node }
type Person { name: String secret: Secret vault: Vault node: Node }`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		role          sluice.Role
		secret, vault bool
	}{{sluice.RoleRead, false, false}, {sluice.RoleWrite, false, true}, {sluice.RoleAdmin, true, true}} {
		writes := c.role >= sluice.RoleWrite
		gs, err := graph.BuildSchema(s, c.role)
		if err != nil {
			t.Fatalf("role %s: %v", c.role, err)
		}
		has := func(typ, field string) bool {
			d := gs.Types[typ]
			return d != nil && (field == "" || d.Fields.ForName(field) != nil)
		}
		for _, x := range []struct {
			typ, field string
			want       bool
		}{
			{"Secret", "", c.secret}, {"Secret_Filter", "", c.secret}, {"Secret_ListFilter", "", c.secret},
			{"Person", "secret", c.secret}, {"Person_Filter", "secret", c.secret},
			{"Vault", "secret", c.secret}, {"Vault", "secrets", c.secret}, {"Vault_Filter", "secret", c.secret},
			{"Vault", "", c.vault}, {"Vault_Filter", "", c.vault}, {"Person", "vault", c.vault}, {"Person_Filter", "vault", c.vault},
			{"Node", "next", true}, {"Person", "node", true}, {"Person", "name", true},
			{"Secret_Input", "pin", writes}, {"Vault_Input", "secret", writes}, {"Person_Input", "secret", writes}, {"Person_Patch", "vault", writes},
			{"Person_Input", "name", true}, {"Person_Patch", "node", true},
		} {
			if got := has(x.typ, x.field); got != x.want {
				t.Errorf("role %s: %s %s shown %v, want %v", c.role, x.typ, x.field, got, x.want)
			}
		}
	}
}

// FuzzGeneratedSchema checks that every SDL that Parse accepts generates a
// GraphQL schema that gqlparser validates, for every role.
func FuzzGeneratedSchema(f *testing.F) {
	f.Add(testSDL)
	f.Add(sluice.SystemSchemaSDL)
	f.Add("type A { b: [B!]! }\ntype B @subdocument { x: Int }")
	f.Add("interface A { x: Int }\ninterface B implements A @concrete { y: String }\ntype C implements B { z: A }")
	f.Add("enum E { X Y }\ntype T { e: [E] f: E! }")
	f.Add("type S @subdocument { pin: String @private }\ntype V @subdocument { s: [S!] }\ntype T { name: String s: S v: V }")
	f.Fuzz(func(t *testing.T, sdl string) {
		s, err := schema.Parse(sdl)
		if err != nil {
			return
		}
		for _, role := range []sluice.Role{sluice.RoleRead, sluice.RoleWrite, sluice.RoleAdmin} {
			if _, err := graph.BuildSchema(s, role); err != nil {
				t.Fatalf("role %s: %v\nSDL:\n%s", role, err, sdl)
			}
		}
	})
}

// TestDescriptionsOfAnyText: a schema whose descriptions hold control
// characters (escaped, as \u0001, or raw, as DEL) and characters past
// U+FFFF is served, and its descriptions read back as written.
func TestDescriptionsOfAnyText(t *testing.T) {
	t.Parallel()
	st := newStack(t, "\"a\\u0001b\U000e0001\" type Person { \"c\x7fd\\u0085\\u0000\" name: String }")
	st.insert(t, `[{"@type":"Person","@id":"alice","name":"Alice"}]`)
	res := st.query(t, `{ Person { name } __type(name: "Person") { description fields { name description } } }`, nil).mustOK(t)
	var data struct {
		Person []struct{ Name string }
		Type   struct {
			Description string
			Fields      []struct{ Name, Description string }
		} `json:"__type"`
	}
	if err := json.Unmarshal(res.Data, &data); err != nil {
		t.Fatal(err)
	}
	if len(data.Person) != 1 || data.Person[0].Name != "Alice" {
		t.Errorf("the query: %s", res.raw)
	}
	if data.Type.Description != "a\x01b\U000e0001" {
		t.Errorf("the class's description: %q", data.Type.Description)
	}
	fields := map[string]string{}
	for _, f := range data.Type.Fields {
		fields[f.Name] = f.Description
	}
	if fields["name"] != "c\x7fd\u0085\x00" {
		t.Errorf("the field's description: %q", fields["name"])
	}
}

// FuzzDescriptions checks that any description, of a class or of a
// field, is read back as it was from the generated GraphQL schema.
func FuzzDescriptions(f *testing.F) {
	for _, d := range []string{"a\x01b", "\x7f", "\U000e0001", "\U0001F600", `"""`, `\`, `\u0041`, "a\r\nb\tc\b\f", "\u2028\u0085\ufeff\x00", " lead and trail "} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, d string) {
		if !utf8.ValidString(d) {
			return // Parse refuses it
		}
		s, err := schema.Parse("type Person { name: String }")
		if err != nil {
			t.Fatal(err)
		}
		c := s.Class("Person")
		c.Description, c.Fields[0].Description = d, d
		gs, err := graph.BuildSchema(s, sluice.RoleRead)
		if err != nil {
			t.Fatalf("%q: %v", d, err)
		}
		if got := gs.Types["Person"].Description; got != d {
			t.Errorf("the class's description %q reads back as %q", d, got)
		}
		if got := gs.Types["Person"].Fields.ForName("name").Description; got != d {
			t.Errorf("the field's description %q reads back as %q", d, got)
		}
		if got := gs.Query.Fields.ForName("Person").Description; got != d {
			t.Errorf("the query field's description %q reads back as %q", d, got)
		}
	})
}

// TestSDLKeepsEnumDescriptions: an enum's description and its values'
// are in the generated schema, as a class's and its fields' are
// (introspection showed them as null).
func TestSDLKeepsEnumDescriptions(t *testing.T) {
	t.Parallel()
	s, err := schema.Parse(`"A colour." enum Color { "Like blood." RED GREEN "Like the sky." BLUE }
type Car { color: Color }`)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := graph.BuildSchema(s, sluice.RoleRead)
	if err != nil {
		t.Fatal(err)
	}
	d := gs.Types["Color"]
	if d == nil || d.Description != "A colour." {
		t.Fatalf("Color: %+v, want its description", d)
	}
	for _, v := range []struct{ name, want string }{{"RED", "Like blood."}, {"GREEN", ""}, {"BLUE", "Like the sky."}} {
		if ev := d.EnumValues.ForName(v.name); ev == nil || ev.Description != v.want {
			t.Errorf("Color.%s: %+v, want description %q", v.name, ev, v.want)
		}
	}
}

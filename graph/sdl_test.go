package graph_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// FuzzGeneratedSchema checks that every SDL that Parse accepts generates a
// GraphQL schema that gqlparser validates, for every role.
func FuzzGeneratedSchema(f *testing.F) {
	f.Add(testSDL)
	f.Add(sluice.SystemSchemaSDL)
	f.Add("type A { b: [B!]! }\ntype B @subdocument { x: Int }")
	f.Add("interface A { x: Int }\ninterface B implements A @concrete { y: String }\ntype C implements B { z: A }")
	f.Add("enum E { X Y }\ntype T { e: [E] f: E! }")
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

package graph_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/schema"
)

// interfaceChain returns a chain of n interfaces without fields, each
// implementing the one before, and classes types implementing the last.
func interfaceChain(n, classes int) string {
	var b strings.Builder
	b.WriteString("interface I0\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "interface I%d implements I%d\n", i, i-1)
	}
	for i := range classes {
		fmt.Fprintf(&b, "type T%d implements I%d\n", i, n-1)
	}
	return b.String()
}

// largestHierarchies are the deepest inheritance the bound on what a
// schema expands to admits: a chain of 199 interfaces (19,900 counted:
// 19,701 ancestors and one for each class), and a chain of 100 with 148
// classes implementing it (5,050, and 101 for each class: 19,998).
var largestHierarchies = map[string]string{
	"a chain of 199":                   interfaceChain(199, 0),
	"148 classes under a chain of 100": interfaceChain(100, 148),
}

// implementsWork counts the steps gqlparser's validation of gs's
// implements lists takes: for each definition, each of its interfaces is
// looked for among those before it, and each of that interface's own
// interfaces among the definition's. It grows with the fourth power of a
// chain's length: a chain of 600 took 30 s.
func implementsWork(gs *ast.Schema) int {
	n := 0
	for _, def := range gs.Types {
		for i, name := range def.Interfaces {
			n += i
			if intf := gs.Types[name]; intf != nil {
				n += len(intf.Interfaces) * len(def.Interfaces)
			}
		}
	}
	return n
}

// TestLargestAdmittedHierarchiesBuild: the deepest hierarchies ParseNew
// admits build their GraphQL schema for every role, with at most about
// 2×10⁸ steps of implements validation (about 0.15 s; a chain of 600,
// admitted before ancestors counted, takes 1.6×10¹⁰), and one more
// interface is refused. BenchmarkBuildLargestAdmittedSchemas times them.
func TestLargestAdmittedHierarchiesBuild(t *testing.T) {
	t.Parallel()
	for name, sdl := range largestHierarchies {
		s, err := schema.ParseNew(sdl)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, role := range []sluice.Role{sluice.RoleRead, sluice.RoleWrite, sluice.RoleAdmin} {
			gs, err := graph.BuildSchema(s, role)
			if err != nil {
				t.Fatalf("%s as %s: %v", name, role, err)
			}
			if w := implementsWork(gs); w > 2.1e8 {
				t.Errorf("%s as %s: %d steps of implements validation", name, role, w)
			}
		}
	}
	for _, sdl := range []string{interfaceChain(200, 0), interfaceChain(100, 149)} {
		if _, err := schema.ParseNew(sdl); err == nil {
			t.Errorf("admitted %d bytes of hierarchy past the bound", len(sdl))
		}
	}
}

// BenchmarkBuildLargestAdmittedSchemas times graph.BuildSchema, for the
// admin role, of the largest schemas of each shape that ParseNew admits.
func BenchmarkBuildLargestAdmittedSchemas(b *testing.B) {
	var wide strings.Builder // 20 classes of 999 fields
	wide.WriteString("interface W {")
	for i := range 999 {
		fmt.Fprintf(&wide, " f%d: Int", i)
	}
	wide.WriteString(" }\n")
	for i := range 19 {
		fmt.Fprintf(&wide, "type T%d implements W\n", i)
	}
	shapes := map[string]string{"20 classes of 999 fields": wide.String()}
	for name, sdl := range largestHierarchies {
		shapes[name] = sdl
	}
	for name, sdl := range shapes {
		s, err := schema.ParseNew(sdl)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := graph.BuildSchema(s, sluice.RoleAdmin); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

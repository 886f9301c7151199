package config

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestConfigurationDoc keeps docs/configuration.md in step with options():
// run `make generate` after changing a key.
func TestConfigurationDoc(t *testing.T) {
	t.Parallel()
	want := Reference()
	for _, o := range options() {
		if !strings.Contains(want, "| `"+o.key+"` | `"+o.env()+"` | `--"+o.flag()+"` |") {
			t.Errorf("Reference() has no row for %s", o.key)
		}
	}
	// Tests run in the package's directory, internal/config.
	got, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/configuration.md is out of date with options(); run make generate")
	}
}

// TestFieldDocs checks that each Config field's comment names exactly one
// key, with that key's env var, flag and default, and that every key has a
// field.
func TestFieldDocs(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var fields []*ast.Field
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "Config" {
			fields = ts.Type.(*ast.StructType).Fields.List
			return false
		}
		return true
	})
	if len(fields) == 0 {
		t.Fatal("no Config struct in config.go")
	}

	line := func(o option) string {
		def := o.def
		if o.kind == kindString {
			def = strconv.Quote(def)
		}
		return fmt.Sprintf("Key %s, env %s, flag --%s, default %s.", o.key, o.env(), o.flag(), def)
	}
	documented := map[string]string{} // key -> field
	for _, field := range fields {
		name := field.Names[0].Name
		doc := field.Doc.Text()
		if !strings.HasPrefix(doc, name+" ") {
			t.Errorf("Config.%s: comment does not start with %q", name, name)
		}
		var keys []string
		for _, o := range options() {
			if strings.Contains(doc, line(o)) {
				keys = append(keys, o.key)
				documented[o.key] = name
			}
		}
		if len(keys) != 1 {
			t.Errorf("Config.%s: comment names keys %q, want exactly one line like %q", name, keys, line(options()[0]))
		}
	}
	for _, o := range options() {
		if documented[o.key] == "" {
			t.Errorf("no Config field comment has %q", line(o))
		}
	}
}

package config

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite README.fragment.md from options()")

const fragmentFile = "README.fragment.md"

// renderFragment renders the README's configuration section from options().
func renderFragment() string {
	var b strings.Builder
	b.WriteString("<!-- Generated from internal/config/options.go by `go test ./internal/config -update`. -->\n")
	b.WriteString(`Every setting can be given as a flag, as an environment variable, or as a
key in a config file named by ` + "`--config` or `SLUICE_CONFIG`" + ` (YAML, TOML or JSON,
chosen by the file's extension). A flag you give beats the environment, which
beats the file, which beats the default. An empty environment variable counts
as unset. An unknown key in the file or an invalid value stops Sluice with an
error naming the key. Durations use Go syntax: ` + "`90s`, `15m`, `1h30m`" + `.

| Key | Environment | Flag | Default | Meaning |
|-----|-------------|------|---------|---------|
`)
	for _, o := range options() {
		def := "`" + o.def + "`"
		if o.def == "" {
			def = "empty"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | `--%s` | %s | %s |\n", o.key, o.env(), o.flag(), def, markdownEscape(o.usage))
	}
	b.WriteString("\nFor example, `sluice.yaml`:\n\n```yaml\n" + `listen: ":8080"
database_url: "postgres://sluice@db.internal/sluice"
log_format: json
log_retention: 720h
` + "```\n")
	return b.String()
}

func markdownEscape(s string) string {
	return strings.NewReplacer("*", `\*`, "<", "&lt;", ">", "&gt;", "|", `\|`).Replace(s)
}

// TestReadmeFragment keeps README.fragment.md in step with options(). Run
// `go test ./internal/config -update` after changing a key.
func TestReadmeFragment(t *testing.T) {
	t.Parallel()
	want := renderFragment()
	if *update {
		if err := os.WriteFile(fragmentFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(fragmentFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is out of date; run `go test ./internal/config -update`. Want:\n%s", fragmentFile, want)
	}
	for _, o := range options() {
		if !strings.Contains(string(got), "| `"+o.key+"` | `"+o.env()+"` | `--"+o.flag()+"` |") {
			t.Errorf("%s has no row for %s", fragmentFile, o.key)
		}
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

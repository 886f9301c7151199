package schema

import (
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/sluice-dev/sluice"
)

// VisibleSDL returns the schema text sdl as a user with role on its
// database may see it: the source itself for an admin, and otherwise the
// schema without the fields role may not read (@private, or @protected
// by a stronger role), printed again. A reader learns no more from the
// schema than from the GraphQL schema its role is served, which leaves
// those fields out too.
//
// The reprint drops comments: a comment may describe a hidden field, and
// the parser attaches a comment to the token after it, so a comment
// cannot be told apart from its neighbour's. Descriptions stay with their
// fields and types.
func VisibleSDL(sdl string, role sluice.Role) (string, error) {
	if role >= sluice.RoleAdmin {
		return sdl, nil
	}
	doc, err := parser.ParseSchema(&ast.Source{Name: "schema", Input: sdl})
	if err != nil {
		return "", err
	}
	for _, defs := range []ast.DefinitionList{doc.Definitions, doc.Extensions} {
		for _, def := range defs {
			kept := def.Fields[:0]
			for _, fd := range def.Fields {
				need, err := readRole(fd, def.Name)
				if err != nil {
					return "", err
				}
				if need <= role {
					kept = append(kept, fd)
				}
			}
			def.Fields = kept
		}
	}
	var b strings.Builder
	formatter.NewFormatter(&b, formatter.WithIndent("  ")).FormatSchemaDocument(doc)
	return b.String(), nil
}

package graph

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// Names of generated types and fields that do not depend on the user's
// schema. User class and enum names have no underscore, so none of these,
// nor any "<Class>_<suffix>" name, can collide with a user type.
const (
	typeCommitMetadata = "_CommitMetadata"
	typeChangeSet      = "_ChangeSet"
	typeOrder          = "_Order"
	typeQuery          = "Query"
	typeSubscription   = "Subscription"
	fieldID            = "_id"
	fieldType          = "_type"
	fieldVersion       = "_version"
	fieldCommit        = "_CommitMetadata"
	fieldChangeSet     = "_ChangeSet"
	fieldInsertDocs    = "_insertDocuments"
	fieldReplaceDocs   = "_replaceDocuments"
	fieldDeleteDocs    = "_deleteDocuments"
	// typeDocumentVersion is the input type of a conditional delete's
	// documents.
	typeDocumentVersion = "_DocumentVersion"
)

// The suffixes of per-class generated names.
const (
	suffixFilter     = "_Filter"
	suffixListFilter = "_ListFilter"
	suffixOrdering   = "_Ordering"
	suffixInput      = "_Input"
	suffixPatch      = "_Patch"
	suffixInsert     = "_insert"
	suffixReplace    = "_replace"
	suffixUpdate     = "_update"
	suffixAdded      = "_added"
	suffixUpdated    = "_updated"
	suffixDeleted    = "_deleted"
	suffixChanged    = "_changed"
)

// SDL returns the GraphQL schema generated from s for a reader with role:
// output types, filters and orderings leave out every field the role may not
// read, so a hidden field can be neither selected nor filtered or sorted on,
// and every subdocument the role sees no field of, with the fields of its
// type (schema.Visibility). Input types (typed mutations) keep every field
// for a role that may write, as writing a field is not reading it (the
// engine checks what a writer may write); for one that may not, whose
// mutations are all refused, they hold only what it reads, so that a
// reader learns no name of a field hidden from it there either. The text is deterministic: the same
// schema and role always give the same bytes.
func SDL(s *sluice.Schema, role sluice.Role) string {
	g := &sdlGen{s: s, role: role, vis: schema.VisibilityOf(s, role)}
	return g.generate()
}

// BuildSchema returns the parsed and validated gqlparser schema of SDL(s,
// role). An error here is a bug in the generator, never the user's fault.
func BuildSchema(s *sluice.Schema, role sluice.Role) (*ast.Schema, error) {
	src := SDL(s, role)
	gs, err := gqlparser.LoadSchema(&ast.Source{Name: "sluice", Input: src})
	if err != nil {
		return nil, fmt.Errorf("generated schema does not validate: %w", err)
	}
	return gs, nil
}

type sdlGen struct {
	s    *sluice.Schema
	role sluice.Role
	vis  *schema.Visibility
	b    strings.Builder
	// links holds each class's backlinks, made when first needed.
	links map[string][]backlink
	// order holds each class's place in the schema's Order, made when
	// first needed.
	order map[string]int
}

func (g *sdlGen) p(format string, args ...any) { fmt.Fprintf(&g.b, format, args...) }

func (g *sdlGen) generate() string {
	g.p(`"An instant, as an RFC 3339 string in UTC."
scalar DateTime
"An arbitrary precision integer, as a string of decimal digits (a whole JSON number is accepted as input)."
scalar BigInt
"Any JSON value."
scalar JSON

"Makes a query a live query on a streaming transport: its result, then the new result after each commit that changes it (as the Subscription field of the same name does)."
directive @live(if: Boolean = true) on QUERY

"A sort direction."
enum %s { ASC DESC }

"The commit that last wrote a document, or the commit of a change set."
type %s {
  "The commit id: its sequence number in the database."
  _id: ID!
  "The commit time in seconds since the Unix epoch."
  _timestamp: Float!
  "The commit time."
  _datetime: DateTime!
  "Who the writer said made the commit (?author=, author:): any writer may set it to any name."
  _author: String!
  _message: String!
  "The signed-in user who made the commit, as Sluice authenticated them (pg:<role> for a write made in SQL)."
  _user: String!
  "added, updated or deleted in a subscription event; commit in a change set; null in queries."
  _change_type: String
}

"A document to delete only at a version (_deleteDocuments)."
input %s {
  "The document id."
  _id: ID!
  "Delete the document only if its _version is this one; otherwise the request fails, deleting nothing, and names each such document with its current version."
  _version: String!
}

`, typeOrder, typeCommitMetadata, typeDocumentVersion)
	g.scalarFilters()
	for _, name := range g.s.EnumOrder {
		e := g.s.Enums[name]
		g.description("", e.Description)
		g.p("enum %s {\n", name)
		for i, v := range e.Values {
			if i < len(e.ValueDescriptions) {
				g.description("  ", e.ValueDescriptions[i])
			}
			g.p("  %s\n", v)
		}
		g.p("}\n\n")
		g.p("input %s%s {\n  eq: %s\n  ne: %s\n  lt: %s\n  le: %s\n  gt: %s\n  ge: %s\n}\n\n", name, suffixFilter, name, name, name, name, name, name)
		g.p("input %s%s {\n  someHave: %s%s\n  allHave: %s%s\n}\n\n", name, suffixListFilter, name, suffixFilter, name, suffixFilter)
	}
	for _, name := range g.s.Order {
		g.class(g.s.Classes[name])
	}
	for _, c := range queryClasses(g.s) {
		g.aggregateTypes(c)
	}
	g.query()
	g.changeSet()
	g.mutation()
	g.subscription()
	return g.b.String()
}

// scalarOps lists the filter operators of each scalar.
func scalarOps(scalar string) []string {
	switch scalar {
	case sluice.ScalarString:
		return []string{"eq", "ne", "lt", "le", "gt", "ge", "regex", "startsWith"}
	case sluice.ScalarBoolean, sluice.ScalarID:
		return []string{"eq", "ne"}
	case sluice.ScalarJSON:
		return nil
	}
	return []string{"eq", "ne", "lt", "le", "gt", "ge"}
}

var filterScalars = []string{sluice.ScalarString, sluice.ScalarInt, sluice.ScalarFloat, sluice.ScalarBoolean,
	sluice.ScalarID, sluice.ScalarDateTime, sluice.ScalarBigInt}

func (g *sdlGen) scalarFilters() {
	for _, sc := range filterScalars {
		g.p("input %s%s {\n", sc, suffixFilter)
		for _, op := range scalarOps(sc) {
			t := sc
			if op == "regex" || op == "startsWith" {
				t = sluice.ScalarString
			}
			g.p("  %s: %s\n", op, t)
		}
		g.p("}\n\n")
		g.p("input %s%s {\n  someHave: %s%s\n  allHave: %s%s\n}\n\n", sc, suffixListFilter, sc, suffixFilter, sc, suffixFilter)
	}
}

// visible returns the fields of c the reader sees.
func (g *sdlGen) visible(c *sluice.Class) []*sluice.Field { return g.vis.Fields(c) }

// abstractAncestors returns every abstract ancestor of c, in schema order.
// It walks c's own ancestors, each once, rather than asking IsA of every
// class of the schema: that cost each class the whole schema, and 10,000
// classes took seconds to generate.
func (g *sdlGen) abstractAncestors(c *sluice.Class) []string {
	if g.order == nil {
		g.order = make(map[string]int, len(g.s.Order))
		for i, n := range g.s.Order {
			g.order[n] = i
		}
	}
	var out []string
	seen := map[string]bool{c.Name: true}
	stack := slices.Clone(c.Parents)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		p := g.s.Classes[n]
		if seen[n] || p == nil {
			continue
		}
		seen[n] = true
		if p.Kind == sluice.KindAbstract {
			out = append(out, n)
		}
		stack = append(stack, p.Parents...)
	}
	slices.SortFunc(out, func(a, b string) int { return g.order[a] - g.order[b] })
	return out
}

func (g *sdlGen) description(indent, d string) {
	if d == "" {
		return
	}
	g.p("%s%s\n", indent, gqlString(d))
}

// gqlString returns s as a GraphQL string value: in double quotes, with
// the quote, the backslash and every control character escaped (\n, \t
// and the like, and \uXXXX for the others, DEL and the C1 controls
// among them), and any other character, past U+FFFF too, as it is in
// UTF-8, which GraphQL parsers read as itself. So every description a
// schema holds is read back as it was. (Go's %q is not GraphQL: its
// \x01, \x7f and \U000e0001 do not parse.)
func gqlString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if unicode.IsControl(r) {
				fmt.Fprintf(&b, `\u%04X`, r)
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func (g *sdlGen) class(c *sluice.Class) {
	if g.vis.Class(c) {
		g.outputTypes(c)
	}
	if g.role >= sluice.RoleWrite || g.vis.Class(c) {
		g.inputTypes(c)
	}
}

// inputFields returns the fields of c's input types: every field for a
// role that may write, those it reads for one that may not (see SDL).
func (g *sdlGen) inputFields(c *sluice.Class) []*sluice.Field {
	if g.role >= sluice.RoleWrite {
		return c.Fields
	}
	return g.visible(c)
}

// outputTypes writes c's object or interface type, its filters and its
// ordering, with the fields the reader sees.
func (g *sdlGen) outputTypes(c *sluice.Class) {
	fields := g.visible(c)
	g.description("", c.Description)
	switch c.Kind {
	case sluice.KindSubdocument:
		g.p("type %s {\n", c.Name)
	case sluice.KindAbstract:
		g.p("interface %s%s {\n", c.Name, implements(g.abstractAncestors(c)))
	default:
		g.p("type %s%s {\n", c.Name, implements(g.abstractAncestors(c)))
	}
	if c.Kind != sluice.KindSubdocument {
		g.p("  %s: ID!\n  %s: String!\n", fieldID, fieldType)
		g.p("  \"The document's version: new with every change of the document, by any writer, and the same on every replica (in an event, the version its change made, or \\\"\\\" when a later change of the same commit changes the document again: that state has none). Give it back as _version to write only what you read. In a read as of a position (asOf), the version it had then, or \\\"\\\" when the log does not record it or it had none; to write, read the current one.\"\n")
		g.p("  %s: String!\n  %s: %s\n", fieldVersion, fieldCommit, typeCommitMetadata)
	}
	for _, f := range fields {
		g.description("  ", indexedDescription(c, f, f.Description))
		g.p("  %s: %s\n", f.Name, outputType(f))
	}
	g.backlinks(c)
	g.p("}\n\n")

	// The filter.
	g.p("input %s%s {\n  _and: [%s%s!]\n  _or: [%s%s!]\n  _not: %s%s\n", c.Name, suffixFilter, c.Name, suffixFilter, c.Name, suffixFilter, c.Name, suffixFilter)
	if c.Kind != sluice.KindSubdocument {
		g.p("  %s: ID\n  _ids: [ID!]\n", fieldID)
	}
	for _, f := range fields {
		if t := filterType(f); t != "" {
			g.description("  ", indexedDescription(c, f, ""))
			g.p("  %s: %s\n", f.Name, t)
		}
	}
	g.p("}\n\n")
	g.p("input %s%s {\n  someHave: %s%s\n  allHave: %s%s\n}\n\n", c.Name, suffixListFilter, c.Name, suffixFilter, c.Name, suffixFilter)

	if c.Kind != sluice.KindSubdocument {
		g.description("", g.indexedOrders(c, fields))
		g.p("input %s%s {\n  %s: %s\n", c.Name, suffixOrdering, fieldID, typeOrder)
		for _, f := range fields {
			if orderable(f) {
				g.description("  ", indexedDescription(c, f, ""))
				g.p("  %s: %s\n", f.Name, typeOrder)
			}
		}
		g.p("}\n\n")
	}
}

// inputTypes writes c's input types, with inputFields.
func (g *sdlGen) inputTypes(c *sluice.Class) {
	if c.Kind != sluice.KindAbstract {
		g.p("input %s%s {\n", c.Name, suffixInput)
		if c.Kind == sluice.KindDocument {
			g.p("  \"The document id, \\\"%s/<key>\\\" or just the key; a new key is made when it is left out.\"\n  %s: ID\n", c.Name, fieldID)
			g.p("  \"For %s%s. %s\"\n  %s: String\n", c.Name, suffixReplace, versionInputDescription, fieldVersion)
		}
		for _, f := range g.inputFields(c) {
			g.p("  %s: %s\n", f.Name, inputType(f))
		}
		g.p("}\n\n")
	}
	if c.Kind == sluice.KindDocument {
		g.p("\"A partial write of a %s document (%s%s): a field given replaces the document's (a subdocument is merged into the document's, as a JSON Merge Patch does), null removes an optional field, and a field left out is kept.\"\n", c.Name, c.Name, suffixUpdate)
		g.p("input %s%s {\n  \"The document id, \\\"%s/<key>\\\" or just the key.\"\n  %s: ID!\n", c.Name, suffixPatch, c.Name, fieldID)
		g.p("  \"%s\"\n  %s: String\n", versionInputDescription, fieldVersion)
		for _, f := range g.inputFields(c) {
			g.p("  %s: %s\n", f.Name, strings.TrimSuffix(inputType(f), "!"))
		}
		g.p("}\n\n")
	}
}

// versionInputDescription describes _version in input types.
const versionInputDescription = "Write the document only if its _version is this one; otherwise the request fails, writing nothing, and names each such document with its current version."

// indexedDescription returns the description of field f of class c in
// the generated schema: desc, followed by a sentence saying that an index
// serves it when an index of c (@index) starts with f.
func indexedDescription(c *sluice.Class, f *sluice.Field, desc string) string {
	if c.Kind == sluice.KindSubdocument || c.IndexedBy(f.Name) == nil {
		return desc
	}
	const note = "Indexed (@index): filters and orderBy on this field are served by an index."
	if desc == "" {
		return note
	}
	return desc + "\n\n" + note
}

// indexedOrders returns the description of c's ordering type: the orders
// an index serves, each of c's indexes whose fields the reader may see
// (an index on a hidden field is not mentioned).
func (g *sdlGen) indexedOrders(c *sluice.Class, visible []*sluice.Field) string {
	seen := map[string]bool{}
	for _, f := range visible {
		seen[f.Name] = true
	}
	orders := []string{fieldID}
	for _, ix := range c.Indexes {
		ok := true
		for _, name := range ix.Fields {
			ok = ok && seen[name]
		}
		if ok {
			orders = append(orders, "{"+strings.Join(ix.Fields, ", ")+"}")
		}
	}
	return "How to sort " + c.Name + " documents; the id is always the last key. Orders an index serves (each key ascending, or each descending with _id: DESC last): " + strings.Join(orders, "; ") + "."
}

func implements(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " implements " + strings.Join(names, " & ")
}

// outputType is the GraphQL type of field f as read. A single reference
// is nullable even when the field is required: a write checks a
// reference's id and class, not that its document exists, so it may name
// one that does not (any more), which reads as null; a non-null type would
// promise clients typed from the schema what the answer breaks. (A list
// of references leaves such ids out.)
func outputType(f *sluice.Field) string {
	t := f.Type.Name
	if f.List {
		t = "[" + t + "!]"
	}
	if f.Required && (f.List || f.Type.Kind != sluice.TypeReference) {
		t += "!"
	}
	return t
}

func inputType(f *sluice.Field) string {
	t := f.Type.Name
	switch f.Type.Kind {
	case sluice.TypeReference:
		t = sluice.ScalarID
	case sluice.TypeSubdocument:
		t += suffixInput
	}
	if f.List {
		t = "[" + t + "!]"
	}
	if f.Required {
		t += "!"
	}
	return t
}

// filterType returns the filter input type of f, or "" when f cannot be
// filtered on (JSON).
func filterType(f *sluice.Field) string {
	if f.Type.Kind == sluice.TypeScalar && f.Type.Name == sluice.ScalarJSON {
		return ""
	}
	if f.List {
		return f.Type.Name + suffixListFilter
	}
	return f.Type.Name + suffixFilter
}

// orderable reports whether documents can be sorted by f: single scalar
// (not JSON), enum and reference values.
func orderable(f *sluice.Field) bool {
	if f.List || f.Type.Kind == sluice.TypeSubdocument {
		return false
	}
	return !(f.Type.Kind == sluice.TypeScalar && f.Type.Name == sluice.ScalarJSON)
}

// queryClasses returns the classes that get a query field: every class
// with an id (document classes and abstract parents).
func queryClasses(s *sluice.Schema) []*sluice.Class {
	var out []*sluice.Class
	for _, n := range s.Order {
		if c := s.Classes[n]; c.Kind != sluice.KindSubdocument {
			out = append(out, c)
		}
	}
	return out
}

func (g *sdlGen) query() {
	g.p("type Query {\n")
	for _, c := range queryClasses(g.s) {
		g.description("  ", c.Description)
		g.p("  %s%s: [%s!]!\n", c.Name, withAsOf(queryArgs(c)), c.Name)
		g.aggregateField(c, false)
	}
	g.p("  \"The changes of a retained commit (the newest when commit is left out).\"\n")
	g.p("  %s(commit: ID): %s\n", fieldChangeSet, typeChangeSet)
	g.p("}\n\n")
}

// queryArgs returns the arguments of the query field of class c (and of
// its live query field, which takes the same).
func queryArgs(c *sluice.Class) string {
	return fmt.Sprintf("(id: ID, ids: [ID!], filter: %s%s, orderBy: %s%s, limit: Int, offset: Int, include_children: Boolean = true)",
		c.Name, suffixFilter, c.Name, suffixOrdering)
}

func (g *sdlGen) changeSet() {
	g.p("\"The changes one commit made, by class and operation.\"\ntype %s {\n  %s: %s!\n", typeChangeSet, fieldCommit, typeCommitMetadata)
	for _, c := range queryClasses(g.s) {
		args := fmt.Sprintf("(filter: %s%s, include_children: Boolean = true)", c.Name, suffixFilter)
		for _, suf := range []string{suffixAdded, suffixUpdated, suffixDeleted} {
			g.p("  %s%s%s: [%s!]!\n", c.Name, suf, args, c.Name)
		}
		g.p("  %s%s%s: [%s!]! @deprecated(reason: \"Use %s%s.\")\n", c.Name, suffixChanged, args, c.Name, c.Name, suffixUpdated)
	}
	g.p("}\n\n")
}

func (g *sdlGen) mutation() {
	g.p(`type Mutation {
  "Inserts documents (a JSON object, an array of them, or a string holding either) in one commit and returns their ids."
  %s(json: JSON!, author: String, message: String): [ID!]!
  "Replaces documents (inserting missing ones when create is true) in one commit and returns their ids."
  %s(json: JSON!, create: Boolean, author: String, message: String): [ID!]!
  "Deletes documents in one commit and returns their ids: by id (ids), or, to delete each only at the version read, by id and _version (documents); give one of the two."
  %s(ids: [ID!], documents: [%s!], author: String, message: String): [ID!]!
`, fieldInsertDocs, fieldReplaceDocs, fieldDeleteDocs, typeDocumentVersion)
	for _, n := range g.s.Order {
		c := g.s.Classes[n]
		if c.Kind != sluice.KindDocument {
			continue
		}
		g.p("  %s%s(documents: [%s%s!]!, author: String, message: String): [ID!]!\n", c.Name, suffixInsert, c.Name, suffixInput)
		g.p("  %s%s(documents: [%s%s!]!, create: Boolean, author: String, message: String): [ID!]!\n", c.Name, suffixReplace, c.Name, suffixInput)
		g.p("  \"Changes some fields of existing documents (see %s%s) in one commit and returns their ids.\"\n", c.Name, suffixPatch)
		g.p("  %s%s(documents: [%s%s!]!, author: String, message: String): [ID!]!\n", c.Name, suffixUpdate, c.Name, suffixPatch)
	}
	g.p("}\n\n")
}

func (g *sdlGen) subscription() {
	g.p("\"Subscriptions are served as server-sent events (Accept: text/event-stream), graphql-ws and multipart.\"\ntype Subscription {\n")
	for _, c := range queryClasses(g.s) {
		for _, suf := range []string{suffixAdded, suffixUpdated, suffixDeleted} {
			g.p("  %s%s(filter: %s%s): %s\n", c.Name, suf, c.Name, suffixFilter, c.Name)
		}
	}
	// The live queries: each class query field again, whose result is
	// pushed again whenever a commit changes it (graph/live.go).
	for _, c := range queryClasses(g.s) {
		g.p("  \"The live query of Query.%s: its current result, then the new result after each commit that changes it.\"\n", c.Name)
		g.p("  %s%s: [%s!]!\n", c.Name, queryArgs(c), c.Name)
		g.aggregateField(c, true)
	}
	g.p("  %s(include_children: Boolean = true): %s\n", fieldChangeSet, typeChangeSet)
	g.p("}\n")
}

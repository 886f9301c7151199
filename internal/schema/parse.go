package schema

import (
	"errors"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/sluice-dev/sluice"
)

// The directives Sluice understands.
const (
	dirConcrete    = "concrete"
	dirSubdocument = "subdocument"
	dirPrivate     = "private"
	dirProtected   = "protected"
	dirIndex       = "index"
)

// maxIndexFields bounds the fields of one @index: Postgres allows 32 keys
// in an index, and the document id is the last.
const maxIndexFields = 31

// Parse parses sdl (see the package documentation for the language) into a
// schema. Empty input, or input of only whitespace and comments, is a valid
// empty schema. Every error is a CodeInvalid *sluice.Error whose message
// starts with "line L, column C: " and names the offending definition.
func Parse(sdl string) (*sluice.Schema, error) { return parse(sdl, limits{}) }

// ParseNew is Parse of a schema a client sends, which must also declare
// at most MaxClasses classes, MaxEnumValues values in each enum and
// MaxIndexes indexes on each class (inherited ones included), carry at
// most MaxDescriptionBytes of descriptions (each class counting those of
// the fields it inherits),
// expand to at most MaxExpandedFields fields, ancestors, enum values and
// backlinks (it stops as soon as what it counts passes the bound: enums
// and ancestors are counted before any class is built, fields as the
// classes are), and must not
// name a field of a type or interface as one of Postgres's system columns
// (isSystemColumn). A stored schema is not held to these: it was accepted
// when it was made, and must load.
func ParseNew(sdl string) (*sluice.Schema, error) { return parse(sdl, newLimits) }

// ParseChange is ParseNew of a schema that replaces stored, whose own
// counts raise the bounds it is held to: a schema stored before a bound
// existed (or was lowered) and already past it can still be changed, as
// long as the change does not make it larger in what is past the bound
// (it was refused outright, its database's schema frozen).
func ParseChange(sdl string, stored *sluice.Schema) (*sluice.Schema, error) {
	lim := newLimits
	if stored != nil {
		// Counted, not bounded: it was accepted when it was stored.
		b, err := build(stored.SDL, limits{expanded: math.MaxInt})
		if err != nil {
			return nil, err
		}
		lim.expanded = max(lim.expanded, b.expanded)
		lim.classes = max(lim.classes, len(b.schema.Order))
		lim.enumValues = max(lim.enumValues, b.maxEnumValues)
		lim.indexes = max(lim.indexes, b.maxIndexes)
		lim.descriptions = max(lim.descriptions, b.descriptions)
	}
	return parse(sdl, lim)
}

// limits are the bounds a new schema is held to (0: none).
type limits struct {
	isNew                                                bool
	expanded, classes, enumValues, indexes, descriptions int
}

// newLimits are ParseNew's.
var newLimits = limits{isNew: true, expanded: MaxExpandedFields, classes: MaxClasses, enumValues: MaxEnumValues, indexes: MaxIndexes, descriptions: MaxDescriptionBytes}

// parse is Parse, within lim.
func parse(sdl string, lim limits) (*sluice.Schema, error) {
	b, err := build(sdl, lim)
	if err != nil {
		return nil, err
	}
	return b.schema, nil
}

// build parses sdl within lim, and returns its builder, which holds the
// schema and what was counted of it.
func build(sdl string, lim limits) (*builder, error) {
	isNew := lim.isNew
	// Text Postgres cannot store, and that the GraphQL schema built from
	// it (descriptions are carried over) would not parse again.
	if err := checkText(sdl); err != nil {
		line := 1 + strings.Count(sdl[:badTextAt(sdl)], "\n")
		return nil, sluice.Errorf(sluice.CodeInvalid, "line %d: the schema holds text that is not valid UTF-8, or a NUL character", line)
	}
	doc, err := parser.ParseSchema(&ast.Source{Name: "schema", Input: sdl})
	if err != nil {
		return nil, syntaxError(err)
	}
	if err := refuseUnsupported(doc); err != nil {
		return nil, err
	}
	b := &builder{
		schema:  &sluice.Schema{SDL: sdl, Classes: map[string]*sluice.Class{}, Enums: map[string]*sluice.Enum{}},
		classes: map[string]*classDef{},
		names:   map[string]*ast.Position{},
		isNew:   isNew,
		limit:   lim.expanded,
		lim:     lim,
	}
	for _, def := range doc.Definitions {
		if err := b.declare(def); err != nil {
			return nil, err
		}
	}
	if err := b.countAncestors(); err != nil {
		return nil, err
	}
	for _, name := range b.schema.Order {
		if err := b.ownFields(b.classes[name]); err != nil {
			return nil, err
		}
	}
	for _, name := range b.schema.Order {
		if err := b.inherit(b.classes[name], nil); err != nil {
			return nil, err
		}
	}
	if err := b.checkSubdocumentCycles(); err != nil {
		return nil, err
	}
	if err := b.checkBacklinks(); err != nil {
		return nil, err
	}
	setSeenFrom(b.schema)
	return b, nil
}

// setSeenFrom sets each subdocument class's SeenFrom: read when a reader
// sees it, else write when a writer does, else admin.
func setSeenFrom(s *sluice.Schema) {
	read, write := VisibilityOf(s, sluice.RoleRead), VisibilityOf(s, sluice.RoleWrite)
	for _, c := range s.Classes {
		if c.Kind != sluice.KindSubdocument {
			continue
		}
		switch {
		case read.Class(c):
			c.SeenFrom = sluice.RoleRead
		case write.Class(c):
			c.SeenFrom = sluice.RoleWrite
		default:
			c.SeenFrom = sluice.RoleAdmin
		}
	}
}

// builder holds the state of one Parse call.
type builder struct {
	schema  *sluice.Schema
	classes map[string]*classDef
	// names holds the position of every declared class and enum, to report
	// duplicates.
	names map[string]*ast.Position
	// limit bounds expanded, the fields of the classes built so far,
	// inherited ones included, and then their backlinks (0: no bound).
	limit, expanded int
	// isNew is set for a schema a client sends (ParseNew), and lim holds
	// the bounds it is held to; maxEnumValues counts the values of its
	// largest enum, maxIndexes the indexes of the class with the most,
	// descriptions the bytes of descriptions (see describe).
	isNew                                   bool
	lim                                     limits
	maxEnumValues, maxIndexes, descriptions int
}

// describe counts n more bytes of descriptions, as the generated GraphQL
// schema carries them, against the bound: what describes pos.
func (b *builder) describe(n int, pos *ast.Position, what string) error {
	if b.descriptions += n; b.lim.descriptions > 0 && b.descriptions > b.lim.descriptions {
		return errorAt(pos, "%s: the schema's descriptions come to more than %d bytes, each class counting those of the fields it inherits (the GraphQL schema repeats an inherited field's description on every class that implements its interface); shorten the descriptions, those of fields many classes inherit first", what, b.lim.descriptions)
	}
	return nil
}

// errExpanded is the error of a schema that expands past limit fields,
// ancestors, enum values and backlinks.
func errExpanded(limit int) error {
	return sluice.Errorf(sluice.CodeInvalid, "the schema expands to more than %d fields: its classes' fields, each class counting those it inherits and at least one, the interfaces each class inherits from (directly or not), its enums and their values, and the backlinks its references make, one on each document class a reference can point at; declare fewer classes, shallower interface hierarchies or smaller enums, or split the schema over several databases", limit)
}

// countAncestors counts each class's ancestors against limit, before any
// class is built: the generated GraphQL schema lists them all on the
// class, and validating a class costs its ancestors times theirs, so a
// chain of interfaces without fields, which adds no field, cost time
// growing with the fourth power of its length. Each class's walk visits
// an ancestor once, and the count stops once past the bound, so this
// costs at most the bound and the schema's text. Unknown parents are
// left for inherit to report.
func (b *builder) countAncestors() error {
	if b.limit == 0 {
		return nil
	}
	for _, name := range b.schema.Order {
		seen := map[string]bool{name: true}
		stack := []string{name}
		for len(stack) > 0 {
			cd := b.classes[stack[len(stack)-1]]
			stack = stack[:len(stack)-1]
			for _, p := range cd.class.Parents {
				if seen[p] || b.classes[p] == nil {
					continue
				}
				seen[p] = true
				if b.expanded++; b.expanded > b.limit {
					return errExpanded(b.limit)
				}
				stack = append(stack, p)
			}
		}
	}
	return nil
}

// checkBacklinks counts the backlinks of the schema against limit: a
// reference field of a document class (inherited ones included) makes one
// on its target class and each document class below it. Each class's
// backlinks are counted from its ancestors, the sum stopping once past
// the bound.
func (b *builder) checkBacklinks() error {
	if b.limit == 0 {
		return nil
	}
	s := b.schema
	targets := map[string]int{} // the reference fields pointing at each class
	for _, name := range s.Order {
		c := s.Classes[name]
		if c.Kind == sluice.KindSubdocument {
			continue
		}
		for _, f := range c.Fields {
			if f.Type.Kind == sluice.TypeReference {
				targets[f.Type.Name]++
			}
		}
	}
	for _, name := range s.Order {
		if s.Classes[name].Kind == sluice.KindSubdocument {
			continue
		}
		seen := map[string]bool{}
		stack := []string{name}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[n] {
				continue
			}
			seen[n] = true
			if b.expanded += targets[n]; b.expanded > b.limit {
				return errExpanded(b.limit)
			}
			stack = append(stack, s.Classes[n].Parents...)
		}
	}
	return nil
}

// classDef is a class being built from its definition.
type classDef struct {
	def   *ast.Definition
	class *sluice.Class
	// own are the fields the definition declares, with their positions.
	own    []*sluice.Field
	ownPos []*ast.Position
	// origin names, for each field of class.Fields, the class that declares
	// it, for error messages.
	origin map[string]string
	// indexes are the @index directives of the definition: the class's
	// own, then its fields', in order.
	indexes []indexDef
	// state is 0 before inherit, 1 while inherit works on the class's
	// ancestors (so meeting it again is a cycle), 2 after.
	state int
}

// indexDef is one @index of a definition, checked once the class's
// fields (inherited ones included) are known.
type indexDef struct {
	index sluice.Index
	pos   *ast.Position
}

// errorAt returns a CodeInvalid error whose message starts with pos.
func errorAt(pos *ast.Position, format string, args ...any) error {
	if pos == nil {
		return sluice.Errorf(sluice.CodeInvalid, format, args...)
	}
	args = append([]any{pos.Line, pos.Column}, args...)
	return sluice.Errorf(sluice.CodeInvalid, "line %d, column %d: "+format, args...)
}

// syntaxError converts a gqlparser error to a CodeInvalid error with the
// position the parser reported.
func syntaxError(err error) error {
	var ge *gqlerror.Error
	if !errors.As(err, &ge) {
		return sluice.Errorf(sluice.CodeInvalid, "%s", err.Error())
	}
	if len(ge.Locations) > 0 && ge.Locations[0].Line > 0 {
		loc := ge.Locations[0]
		return sluice.Errorf(sluice.CodeInvalid, "line %d, column %d: %s", loc.Line, loc.Column, ge.Message)
	}
	return sluice.Errorf(sluice.CodeInvalid, "%s", ge.Message)
}

// refuseUnsupported reports the first schema definition, directive
// definition or extension in doc: Sluice generates the root types and has a
// fixed set of directives, and a type is defined in one place.
func refuseUnsupported(doc *ast.SchemaDocument) error {
	if len(doc.Schema) > 0 {
		return errorAt(doc.Schema[0].Position, "schema definitions are not supported: Sluice generates Query, Mutation and Subscription")
	}
	if len(doc.SchemaExtension) > 0 {
		return errorAt(doc.SchemaExtension[0].Position, "schema extensions (extend schema) are not supported")
	}
	if len(doc.Directives) > 0 {
		d := doc.Directives[0]
		return errorAt(d.Position, "directive definitions are not supported: @%s", d.Name)
	}
	if len(doc.DirectiveExtensions) > 0 {
		d := doc.DirectiveExtensions[0]
		return errorAt(d.Position, "directive extensions are not supported: extend directive @%s", d.Name)
	}
	if len(doc.Extensions) > 0 {
		d := doc.Extensions[0]
		return errorAt(d.Position, "type extensions are not supported: extend %s %s; put everything in the definition of %s",
			keyword(d.Kind), d.Name, d.Name)
	}
	return nil
}

// keyword returns the SDL keyword that declares a definition of kind k.
func keyword(k ast.DefinitionKind) string {
	switch k {
	case ast.Scalar:
		return "scalar"
	case ast.Object:
		return "type"
	case ast.Interface:
		return "interface"
	case ast.Union:
		return "union"
	case ast.Enum:
		return "enum"
	case ast.InputObject:
		return "input"
	}
	return strings.ToLower(string(k))
}

// declare records a class or enum definition. Fields are resolved later,
// once every name is known.
func (b *builder) declare(def *ast.Definition) error {
	switch def.Kind {
	case ast.Scalar:
		if isBuiltinScalar(def.Name) {
			return errorAt(def.Position, "scalar %s is built in; remove its declaration", def.Name)
		}
		return errorAt(def.Position, "custom scalars are not supported: %s; use String, Int, Float, Boolean, ID, DateTime, BigInt or JSON", def.Name)
	case ast.Union:
		return errorAt(def.Position, "union types are not supported: %s; use an interface", def.Name)
	case ast.InputObject:
		return errorAt(def.Position, "input types are not supported: %s; Sluice generates input types from the classes", def.Name)
	}
	what := keyword(def.Kind)
	if !isTypeName(def.Name) {
		return errorAt(def.Position, "invalid %s name %s: use only letters and digits, starting with a letter (no underscores: the names Sluice makes for each class, such as Note_Filter and Note_aggregate, use them)", what, def.Name)
	}
	if len(def.Name) > maxNameBytes {
		return errorAt(def.Position, "%s name %s is longer than %d bytes", what, def.Name, maxNameBytes)
	}
	if isReservedTypeName(def.Name) {
		return errorAt(def.Position, "%s is a reserved name", def.Name)
	}
	if prev := b.names[def.Name]; prev != nil {
		return errorAt(def.Position, "%s is declared twice (first on line %d)", def.Name, prev.Line)
	}
	b.names[def.Name] = def.Position
	if def.Kind == ast.Enum {
		return b.declareEnum(def)
	}
	return b.declareClass(def)
}

func (b *builder) declareEnum(def *ast.Definition) error {
	if len(def.Directives) > 0 {
		d := def.Directives[0]
		return errorAt(d.Position, "unknown directive @%s on enum %s: enums take no directives", d.Name, def.Name)
	}
	if len(def.EnumValues) == 0 {
		return errorAt(def.Position, "enum %s has no values", def.Name)
	}
	if b.lim.enumValues > 0 && len(def.EnumValues) > b.lim.enumValues {
		return errorAt(def.Position, "enum %s has %d values; at most %d are allowed", def.Name, len(def.EnumValues), b.lim.enumValues)
	}
	b.maxEnumValues = max(b.maxEnumValues, len(def.EnumValues))
	// The enum's GraphQL type and each value count as a field.
	if b.expanded += 1 + len(def.EnumValues); b.limit > 0 && b.expanded > b.limit {
		return errExpanded(b.limit)
	}
	n := len(def.Description)
	for _, v := range def.EnumValues {
		n += len(v.Description)
	}
	if err := b.describe(n, def.Position, "enum "+def.Name); err != nil {
		return err
	}
	e := &sluice.Enum{Name: def.Name, Description: def.Description}
	seen := map[string]bool{}
	for _, v := range def.EnumValues {
		if !isEnumValue(v.Name) {
			return errorAt(v.Position, "invalid value %s of enum %s: use letters, digits and underscores, not true, false or null, and not starting with __", v.Name, def.Name)
		}
		if len(v.Name) > maxNameBytes {
			return errorAt(v.Position, "value %s of enum %s is longer than %d bytes", v.Name, def.Name, maxNameBytes)
		}
		if seen[v.Name] {
			return errorAt(v.Position, "value %s of enum %s is declared twice", v.Name, def.Name)
		}
		if len(v.Directives) > 0 {
			d := v.Directives[0]
			return errorAt(d.Position, "unknown directive @%s on value %s.%s: enum values take no directives", d.Name, def.Name, v.Name)
		}
		seen[v.Name] = true
		e.Values = append(e.Values, v.Name)
		e.ValueDescriptions = append(e.ValueDescriptions, v.Description)
	}
	b.schema.Enums[e.Name] = e
	b.schema.EnumOrder = append(b.schema.EnumOrder, e.Name)
	return nil
}

func (b *builder) declareClass(def *ast.Definition) error {
	if b.lim.classes > 0 && len(b.schema.Order) >= b.lim.classes {
		return errorAt(def.Position, "%s %s: the schema declares more than %d types and interfaces; at most %d are allowed", keyword(def.Kind), def.Name, b.lim.classes, b.lim.classes)
	}
	kind := sluice.KindDocument
	if def.Kind == ast.Interface {
		kind = sluice.KindAbstract
	}
	what := keyword(def.Kind) + " " + def.Name
	seen := map[string]bool{}
	var indexes []indexDef
	for _, d := range def.Directives {
		if d.Name == dirIndex {
			ix, err := typeIndex(d, what)
			if err != nil {
				return err
			}
			// Bounded as they are read: inheritance only adds to them.
			if b.lim.indexes > 0 && len(indexes) >= b.lim.indexes {
				return errorAt(d.Position, "%s declares more than %d indexes; at most %d are allowed on a class, inherited ones included", what, b.lim.indexes, b.lim.indexes)
			}
			indexes = append(indexes, indexDef{index: ix, pos: d.Position})
			continue
		}
		switch {
		case d.Name == dirSubdocument && def.Kind == ast.Object:
			kind = sluice.KindSubdocument
		case d.Name == dirConcrete && def.Kind == ast.Interface:
			kind = sluice.KindDocument
		case d.Name == dirSubdocument:
			return errorAt(d.Position, "@subdocument applies to types, not to %s", what)
		case d.Name == dirConcrete:
			return errorAt(d.Position, "@concrete applies to interfaces, not to %s: a type already has documents of its own", what)
		default:
			return errorAt(d.Position, "unknown directive @%s on %s: types take @subdocument and @index(fields: […]), interfaces @concrete and @index(fields: […])", d.Name, what)
		}
		if seen[d.Name] {
			return errorAt(d.Position, "@%s is given twice on %s", d.Name, what)
		}
		seen[d.Name] = true
		if len(d.Arguments) > 0 {
			return errorAt(d.Position, "@%s takes no arguments", d.Name)
		}
	}
	if kind == sluice.KindSubdocument && len(indexes) > 0 {
		return errorAt(indexes[0].pos, "@index on subdocument %s: a subdocument is stored inside its documents, with no table to index", def.Name)
	}
	if kind == sluice.KindSubdocument && len(def.Interfaces) > 0 {
		return errorAt(def.Position, "subdocument %s cannot implement interfaces", def.Name)
	}
	if kind == sluice.KindSubdocument && len(def.Fields) == 0 {
		// A subdocument has no id, so without fields it could hold nothing,
		// and GraphQL has no empty input types to write it with.
		return errorAt(def.Position, "subdocument %s has no fields", def.Name)
	}
	c := &sluice.Class{Name: def.Name, Kind: kind, Description: def.Description, Parents: def.Interfaces}
	b.classes[c.Name] = &classDef{def: def, class: c, indexes: indexes}
	b.schema.Classes[c.Name] = c
	b.schema.Order = append(b.schema.Order, c.Name)
	return nil
}

// ownFields resolves the fields cd declares itself.
func (b *builder) ownFields(cd *classDef) error {
	name := cd.class.Name
	seen := map[string]bool{}
	for _, fd := range cd.def.Fields {
		if !isFieldName(fd.Name) {
			return errorAt(fd.Position, "invalid field name %s.%s: use letters, digits and underscores, starting with a letter (a leading underscore is kept for the fields Sluice makes, such as _id and the backlinks _<field>_of_<Class>)", name, fd.Name)
		}
		if len(fd.Name) > maxNameBytes {
			return errorAt(fd.Position, "field name %s.%s is longer than %d bytes", name, fd.Name, maxNameBytes)
		}
		if b.isNew && cd.class.Kind != sluice.KindSubdocument && isSystemColumn(fd.Name) {
			return errorAt(fd.Position, "invalid field name %s.%s: Postgres gives every table a system column of that name (%s), and each class's documents are stored in a table with a column for each field; choose another name",
				name, fd.Name, systemColumns)
		}
		if seen[fd.Name] {
			return errorAt(fd.Position, "field %s.%s is declared twice", name, fd.Name)
		}
		seen[fd.Name] = true
		if len(fd.Arguments) > 0 {
			return errorAt(fd.Position, "field %s.%s: field arguments are not supported", name, fd.Name)
		}
		f := &sluice.Field{Name: fd.Name, Description: fd.Description}
		if err := b.fieldType(f, fd, name); err != nil {
			return err
		}
		role, err := readRole(fd, name)
		if err != nil {
			return err
		}
		f.ReadRole = role
		if ix, pos, err := fieldIndexDirective(fd, f, cd.class); err != nil {
			return err
		} else if ix != nil {
			cd.indexes = append(cd.indexes, indexDef{index: *ix, pos: pos})
		}
		cd.own = append(cd.own, f)
		cd.ownPos = append(cd.ownPos, fd.Position)
	}
	return nil
}

// fieldType sets f's Type, List and Required from its definition.
func (b *builder) fieldType(f *sluice.Field, fd *ast.FieldDefinition, class string) error {
	t := fd.Type
	f.Required = t.NonNull
	if t.Elem != nil {
		f.List = true
		t = t.Elem
		if t.Elem != nil {
			return errorAt(fd.Position, "field %s.%s: lists of lists are not supported", class, fd.Name)
		}
	}
	name := t.NamedType
	switch {
	case isBuiltinScalar(name):
		f.Type = sluice.FieldType{Kind: sluice.TypeScalar, Name: name}
	case b.schema.Enums[name] != nil:
		f.Type = sluice.FieldType{Kind: sluice.TypeEnum, Name: name}
	case b.schema.Classes[name] != nil && b.schema.Classes[name].Kind == sluice.KindSubdocument:
		f.Type = sluice.FieldType{Kind: sluice.TypeSubdocument, Name: name}
	case b.schema.Classes[name] != nil:
		f.Type = sluice.FieldType{Kind: sluice.TypeReference, Name: name}
	default:
		return errorAt(fd.Position, "field %s.%s: unknown type %s", class, fd.Name, name)
	}
	return nil
}

// readRole returns the role a reader needs to see the field fd declares.
func readRole(fd *ast.FieldDefinition, class string) (sluice.Role, error) {
	role := sluice.RoleRead
	var prev *ast.Directive
	for _, d := range fd.Directives {
		if d.Name == dirIndex {
			continue // see fieldIndex
		}
		if d.Name != dirPrivate && d.Name != dirProtected {
			return 0, errorAt(d.Position, "unknown directive @%s on field %s.%s: fields take @index, @private or @protected(role: …)", d.Name, class, fd.Name)
		}
		if prev != nil {
			return 0, errorAt(d.Position, "field %s.%s: give one of @private and @protected, once", class, fd.Name)
		}
		prev = d
		if d.Name == dirPrivate {
			if len(d.Arguments) > 0 {
				return 0, errorAt(d.Position, "@private takes no arguments; it means @protected(role: \"admin\")")
			}
			role = sluice.RoleAdmin
			continue
		}
		r, err := protectedRole(d)
		if err != nil {
			return 0, err
		}
		role = r
	}
	return role, nil
}

// protectedRole returns the role named by @protected(role: "…").
func protectedRole(d *ast.Directive) (sluice.Role, error) {
	const usage = `@protected takes one argument, role: "read", "write" or "admin"`
	if len(d.Arguments) != 1 || d.Arguments[0].Name != "role" {
		return 0, errorAt(d.Position, usage)
	}
	v := d.Arguments[0].Value
	if v == nil || (v.Kind != ast.StringValue && v.Kind != ast.BlockValue) {
		return 0, errorAt(d.Position, usage)
	}
	r, ok := sluice.ParseRole(v.Raw)
	if !ok {
		return 0, errorAt(d.Position, "unknown role %q in @protected: use \"read\", \"write\" or \"admin\"", v.Raw)
	}
	return r, nil
}

// inherit sets cd.class.Fields to the fields of its parents (each with its
// own inherited fields first) followed by its own. path lists the classes
// whose ancestors are being resolved, to name a cycle.
func (b *builder) inherit(cd *classDef, path []string) error {
	name := cd.class.Name
	switch cd.state {
	case 2:
		return nil
	case 1:
		i := 0
		for path[i] != name {
			i++
		}
		cycle := append(path[i:len(path):len(path)], name)
		return errorAt(cd.def.Position, "interface inheritance cycle: %s", strings.Join(cycle, " implements "))
	}
	cd.state = 1
	path = append(path, name)
	var fields []*sluice.Field
	index := map[string]int{} // field name → position in fields
	origin := map[string]string{}
	seen := map[string]bool{}
	for _, pname := range cd.class.Parents {
		parent := b.classes[pname]
		switch {
		case parent == nil && b.schema.Enums[pname] != nil:
			return errorAt(cd.def.Position, "%s implements %s, which is an enum; only interfaces can be implemented", name, pname)
		case parent == nil:
			return errorAt(cd.def.Position, "%s implements unknown interface %s", name, pname)
		case parent.def.Kind != ast.Interface:
			return errorAt(cd.def.Position, "%s implements %s, which is a type; only interfaces can be implemented", name, pname)
		}
		if seen[pname] {
			return errorAt(cd.def.Position, "%s implements %s twice", name, pname)
		}
		seen[pname] = true
		if err := b.inherit(parent, path); err != nil {
			return err
		}
		for _, f := range parent.class.Fields {
			if j, ok := index[f.Name]; ok {
				if !sameField(fields[j], f) {
					return errorAt(cd.def.Position, "%s inherits field %s as %s from %s and as %s from %s",
						name, f.Name, fieldString(fields[j]), origin[f.Name], fieldString(f), parent.origin[f.Name])
				}
				continue
			}
			inherited := *f
			index[f.Name] = len(fields)
			fields = append(fields, &inherited)
			origin[f.Name] = parent.origin[f.Name]
		}
	}
	for i, f := range cd.own {
		if j, ok := index[f.Name]; ok {
			if !sameField(fields[j], f) {
				return errorAt(cd.ownPos[i], "field %s.%s is %s but %s declares it %s; repeat an inherited field identically or leave it out",
					name, f.Name, fieldString(f), origin[f.Name], fieldString(fields[j]))
			}
			if f.Description != "" {
				fields[j].Description = f.Description
			}
			continue
		}
		index[f.Name] = len(fields)
		fields = append(fields, f)
		origin[f.Name] = name
	}
	if len(fields) > maxFields {
		return errorAt(cd.def.Position, "%s has %d fields, inherited ones included; at most %d are allowed", name, len(fields), maxFields)
	}
	described := len(cd.class.Description)
	for _, f := range fields {
		described += len(f.Description)
	}
	if err := b.describe(described, cd.def.Position, keyword(cd.def.Kind)+" "+name); err != nil {
		return err
	}
	// A class without fields still costs a table, or its GraphQL types.
	if b.expanded += max(len(fields), 1); b.limit > 0 && b.expanded > b.limit {
		return errExpanded(b.limit)
	}
	cd.class.Fields = fields
	cd.origin = origin
	if err := b.indexes(cd); err != nil {
		return err
	}
	cd.state = 2
	return nil
}

// indexes sets cd.class.Indexes: its ancestors' indexes, then its own,
// each once, after checking that its own name fields it has and can index,
// and that they are at most lim.indexes.
func (b *builder) indexes(cd *classDef) error {
	c := cd.class
	var out []sluice.Index
	// Keyed by the fields: a stored schema is not bounded, and comparing
	// each index with every other cost the square of their number.
	have := map[string]bool{}
	add := func(ix sluice.Index, pos *ast.Position) error {
		key := strings.Join(ix.Fields, "\x00")
		if have[key] {
			return nil
		}
		have[key] = true
		out = append(out, ix)
		if b.lim.indexes > 0 && len(out) > b.lim.indexes {
			return errorAt(pos, "%s has more than %d indexes, inherited ones included; at most %d are allowed", c.Name, b.lim.indexes, b.lim.indexes)
		}
		return nil
	}
	for _, p := range c.Parents {
		for _, ix := range b.classes[p].class.Indexes {
			if err := add(ix, cd.def.Position); err != nil {
				return err
			}
		}
	}
	for _, d := range cd.indexes {
		for _, name := range d.index.Fields {
			f := c.Field(name)
			if f == nil {
				return errorAt(d.pos, "@index on %s names field %s, which %s does not have", c.Name, name, c.Name)
			}
			if why := unindexable(f); why != "" {
				return errorAt(d.pos, "@index on %s: field %s cannot be indexed: %s", c.Name, name, why)
			}
		}
		if err := add(d.index, d.pos); err != nil {
			return err
		}
	}
	c.Indexes = out
	b.maxIndexes = max(b.maxIndexes, len(out))
	return nil
}

// typeIndex reads @index(fields: ["a", "b"]) on the type or interface
// described by what. The fields are checked later, against the class's
// fields.
func typeIndex(d *ast.Directive, what string) (sluice.Index, error) {
	usage := `@index on a type or interface takes one argument, fields: the list of field names to index, in key order, as in @index(fields: ["age", "name"])`
	if len(d.Arguments) != 1 || d.Arguments[0].Name != "fields" || d.Arguments[0].Value == nil {
		return sluice.Index{}, errorAt(d.Position, "%s (on %s)", usage, what)
	}
	v := d.Arguments[0].Value
	var names []string
	switch v.Kind {
	case ast.StringValue, ast.BlockValue:
		names = []string{v.Raw}
	case ast.ListValue:
		for _, ch := range v.Children {
			if ch.Value == nil || (ch.Value.Kind != ast.StringValue && ch.Value.Kind != ast.BlockValue) {
				return sluice.Index{}, errorAt(d.Position, "%s (on %s)", usage, what)
			}
			names = append(names, ch.Value.Raw)
		}
	default:
		return sluice.Index{}, errorAt(d.Position, "%s (on %s)", usage, what)
	}
	if len(names) == 0 {
		return sluice.Index{}, errorAt(d.Position, "@index on %s lists no fields", what)
	}
	if len(names) > maxIndexFields {
		return sluice.Index{}, errorAt(d.Position, "@index on %s lists %d fields; at most %d are allowed", what, len(names), maxIndexFields)
	}
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			return sluice.Index{}, errorAt(d.Position, "@index on %s lists field %s twice", what, n)
		}
	}
	return sluice.Index{Fields: names}, nil
}

// fieldIndexDirective reads @index on field f (declared by fd in class c): the
// index on f alone, or nil when fd has no @index.
func fieldIndexDirective(fd *ast.FieldDefinition, f *sluice.Field, c *sluice.Class) (*sluice.Index, *ast.Position, error) {
	var found *ast.Directive
	for _, d := range fd.Directives {
		if d.Name != dirIndex {
			continue
		}
		if found != nil {
			return nil, nil, errorAt(d.Position, "@index is given twice on field %s.%s", c.Name, f.Name)
		}
		found = d
	}
	if found == nil {
		return nil, nil, nil
	}
	if len(found.Arguments) > 0 {
		return nil, nil, errorAt(found.Position, `@index on a field takes no arguments; to index several fields together, put @index(fields: [...]) on the type`)
	}
	if c.Kind == sluice.KindSubdocument {
		return nil, nil, errorAt(found.Position, "@index on %s.%s: a subdocument is stored inside its documents, with no table to index", c.Name, f.Name)
	}
	if why := unindexable(f); why != "" {
		return nil, nil, errorAt(found.Position, "@index on %s.%s: the field cannot be indexed: %s", c.Name, f.Name, why)
	}
	return &sluice.Index{Fields: []string{f.Name}}, found.Position, nil
}

// unindexable says why field f cannot be indexed, or returns "" when it
// can: a single scalar (not JSON), enum value or reference, stored in a
// column of its own type.
func unindexable(f *sluice.Field) string {
	switch {
	case f.List:
		return "it is a list (stored as JSON); only a field holding one String, Int, Float, Boolean, ID, DateTime, BigInt, enum value or reference can be"
	case f.Type.Kind == sluice.TypeSubdocument:
		return "it holds a subdocument (stored as JSON); index a field of the documents instead"
	case f.Type.Kind == sluice.TypeScalar && f.Type.Name == sluice.ScalarJSON:
		return "JSON fields cannot be filtered or sorted"
	}
	return ""
}

// sameField reports whether a and b hold the same values under the same
// protection; descriptions may differ.
func sameField(a, b *sluice.Field) bool {
	return a.Type == b.Type && a.List == b.List && a.Required == b.Required && a.ReadRole == b.ReadRole
}

// checkSubdocumentCycles refuses a subdocument that requires itself through
// required, non-list subdocument fields: no finite value could satisfy it.
func (b *builder) checkSubdocumentCycles() error {
	type step struct{ class, field string }
	state := map[string]int{} // 1 while on the current path, 2 when done
	var visit func(name string, path []step) error
	visit = func(name string, path []step) error {
		switch state[name] {
		case 2:
			return nil
		case 1:
			i := 0
			for path[i].class != name {
				i++
			}
			var parts []string
			for _, s := range path[i:] {
				parts = append(parts, s.class+"."+s.field)
			}
			return errorAt(b.classes[name].def.Position, "subdocument %s can never be written: it requires itself through %s",
				name, strings.Join(append(parts, name), " → "))
		}
		state[name] = 1
		for _, f := range b.schema.Classes[name].Fields {
			if f.Type.Kind == sluice.TypeSubdocument && f.Required && !f.List {
				if err := visit(f.Type.Name, append(path, step{name, f.Name})); err != nil {
					return err
				}
			}
		}
		state[name] = 2
		return nil
	}
	for _, name := range b.schema.Order {
		if b.schema.Classes[name].Kind == sluice.KindSubdocument {
			if err := visit(name, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// badTextAt returns the offset of the first byte of s that is not valid
// UTF-8 or is a NUL (len(s) when there is none).
func badTextAt(s string) int {
	for i, r := range s {
		if r == 0 || r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			return i
		}
	}
	return len(s)
}

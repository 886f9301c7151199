package sluice

// ClassKind says how a class stores documents.
type ClassKind int

// The kinds of class.
const (
	// KindDocument is a class with documents of its own, stored in a table of
	// its own (SDL `type`, or `interface … @concrete` when it has subclasses).
	KindDocument ClassKind = iota
	// KindAbstract is a parent with no documents of its own (SDL `interface`).
	KindAbstract
	// KindSubdocument is embedded inside documents and has no id or table of
	// its own (SDL `type … @subdocument`).
	KindSubdocument
)

// TypeKind says what a field holds.
type TypeKind int

// The kinds of field type.
const (
	TypeScalar      TypeKind = iota // a built-in scalar (see Scalar*)
	TypeEnum                        // a value of an enum of the schema
	TypeReference                   // the id of a document of a class (or a subclass)
	TypeSubdocument                 // an embedded subdocument
)

// The built-in scalar names.
const (
	ScalarString   = "String"
	ScalarInt      = "Int"
	ScalarFloat    = "Float"
	ScalarBoolean  = "Boolean"
	ScalarID       = "ID"
	ScalarDateTime = "DateTime"
	ScalarBigInt   = "BigInt"
	ScalarJSON     = "JSON"
)

// Roles on a database, weakest first. A role includes the ones before it.
const (
	RoleNone  Role = 0
	RoleRead  Role = 1
	RoleWrite Role = 2
	RoleAdmin Role = 3
)

// Role is a user's level of access to one database.
type Role int

// String returns the role's name as used in the API: none, read, write, admin.
func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	default:
		return "none"
	}
}

// ParseRole returns the role named s, or false when s names none.
func ParseRole(s string) (Role, bool) {
	switch s {
	case "read":
		return RoleRead, true
	case "write":
		return RoleWrite, true
	case "admin":
		return RoleAdmin, true
	}
	return RoleNone, false
}

// Schema is a database's parsed schema. It is immutable once built and safe
// to share between goroutines.
type Schema struct {
	// SDL is the source text the schema was parsed from.
	SDL string
	// Classes holds every class by name.
	Classes map[string]*Class
	// Order lists class names in declaration order, for stable output.
	Order []string
	// Enums holds every enum by name.
	Enums map[string]*Enum
	// EnumOrder lists enum names in declaration order.
	EnumOrder []string
}

// Class returns the class named name, or nil.
func (s *Schema) Class(name string) *Class {
	if s == nil {
		return nil
	}
	return s.Classes[name]
}

// Enum returns the enum named name, or nil.
func (s *Schema) Enum(name string) *Enum {
	if s == nil {
		return nil
	}
	return s.Enums[name]
}

// Descendants returns name and every class that inherits from it, directly or
// not, in declaration order.
func (s *Schema) Descendants(name string) []string {
	var out []string
	for _, n := range s.Order {
		if n == name || s.IsA(n, name) {
			out = append(out, n)
		}
	}
	return out
}

// IsA reports whether class sub is ancestor or inherits from it. It visits
// each class at most once, so diamond-shaped hierarchies stay linear.
func (s *Schema) IsA(sub, ancestor string) bool {
	seen := map[string]bool{}
	stack := []string{sub}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == ancestor {
			return true
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		if c := s.Classes[n]; c != nil {
			stack = append(stack, c.Parents...)
		}
	}
	return false
}

// Class is a document class or a subdocument type.
type Class struct {
	Name        string
	Kind        ClassKind
	Description string
	// Parents are the direct parents, in declaration order.
	Parents []string
	// Fields holds every field, inherited ones first, in declaration order.
	Fields []*Field
	// Indexes are the indexes declared with @index on the class, on its
	// fields or on an ancestor (an ancestor's come first), without
	// duplicates. Each document class's table has one btree index per
	// entry; abstract classes pass theirs on to their descendants.
	Indexes []Index
	// SeenFrom is, for a subdocument class, the weakest role that sees a
	// field of it (internal/schema's Visibility): a reader with a weaker
	// role sees nothing of it, so a value of it is left out whole rather
	// than shown as an object with only its @type. Set by schema.Parse;
	// RoleNone (the zero value) counts as seen by every role.
	SeenFrom Role
}

// Index is an index of a document class's table, declared with @index.
type Index struct {
	// Fields are the indexed fields, in key order. The document id is
	// always the last key, so the index serves an order by its fields
	// then the id, and filters on its first field (or on a prefix of
	// its fields compared for equality, then a range on the next).
	Fields []string
}

// IndexedBy returns the first of c's indexes whose first key is field,
// or nil.
func (c *Class) IndexedBy(field string) *Index {
	for i := range c.Indexes {
		if c.Indexes[i].Fields[0] == field {
			return &c.Indexes[i]
		}
	}
	return nil
}

// Field returns the field named name, or nil.
func (c *Class) Field(name string) *Field {
	for _, f := range c.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Field is one field of a class.
type Field struct {
	Name        string
	Description string
	Type        FieldType
	// Required is true for `T!` (and for `[T]!`: the list must be present).
	Required bool
	// List is true for `[T]`; the elements are then never null.
	List bool
	// ReadRole is the role a reader needs to see the field (RoleRead unless
	// the field is protected with @private or @protected(role: …)).
	ReadRole Role
}

// FieldType is the element type of a field.
type FieldType struct {
	Kind TypeKind
	// Name is the scalar, enum or class name.
	Name string
}

// Enum is an enumeration of allowed string values.
type Enum struct {
	Name        string
	Description string
	Values      []string
	// ValueDescriptions holds the description of each value of Values, at
	// the same index ("" for none).
	ValueDescriptions []string
}

// Has reports whether v is one of the enum's values.
func (e *Enum) Has(v string) bool {
	for _, x := range e.Values {
		if x == v {
			return true
		}
	}
	return false
}

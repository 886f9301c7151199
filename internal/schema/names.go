package schema

import (
	"strings"

	"github.com/sluice-dev/sluice"
)

// maxNameBytes bounds class, enum, field and enum value names. Postgres
// silently truncates identifiers and enum labels to 63 bytes, so two longer
// names could collide once stored.
const maxNameBytes = 63

// maxFields bounds the fields of one class, inherited ones included. A
// document class is a Postgres table with a column per field, and a table
// has at most 1600 columns; the margin leaves room for Sluice's own.
const maxFields = 1000

// MaxExpandedFields bounds what a new schema expands to (ParseNew): the
// fields of all its classes, each class counting those it inherits (and
// at least one: a class without fields still has a table and its own
// GraphQL types), each class's ancestors (the interfaces it inherits
// from, directly or not), each enum and each of its values, and the
// backlinks its references make (one on each document class a reference
// can point at). Each costs the schema's GraphQL types several input
// fields, ordering values and resolvers, for each role: a schema of 56 KB,
// 2,000 classes implementing an interface of 999 fields, expanded to two
// million fields and took a replica 5.4 GB to serve. Ancestors count
// because the GraphQL schema lists each of a class's interfaces on it,
// and validating it looks for each of their own interfaces among them: a
// chain of 1,000 interfaces without fields, 31 KB, took 2 min 42 s to
// build (the largest chain admitted, 199, about 0.2 s). A stored schema
// is not held to it (it was accepted when it was made).
const MaxExpandedFields = 20000

// MaxClasses bounds the classes (types and interfaces) of a new schema
// (ParseNew). Each is a Postgres table or a set of generated GraphQL
// types, and the GraphQL schema's root types hold fields for each: their
// validation grows with the square of the classes (10,000 classes without
// fields took 6.6 s and 312 MB to build; 1,000 take about 0.1 s).
const MaxClasses = 1000

// MaxEnumValues bounds the values of one enum of a new schema (ParseNew):
// the GraphQL schema's validation compares each value with every other
// (one enum of 20,000 values took 0.45 s to build).
const MaxEnumValues = 1000

// MaxIndexes bounds the indexes (@index) of one class of a new schema
// (ParseNew), inherited ones included. Each is a btree of the class's
// table that every write of the class updates, made in the schema
// change's transaction, which holds a lock on each until it commits:
// without a bound, 450 KB of SDL (15,600 distinct @index on an interface
// implemented by 20 types) took 23 s to parse, on every replica that
// loaded it, and would then have asked Postgres for 312,000 indexes in
// one transaction (far past its shared lock table, which every session
// of the cluster uses).
const MaxIndexes = 64

// MaxDescriptionBytes bounds the descriptions of a new schema (ParseNew)
// as the GraphQL schema Sluice serves carries them: those of its classes,
// enums and enum values, and of each class's fields, inherited ones
// included (an interface's field is described again on every class that
// implements it). Within max_schema_bytes, one interface whose one field
// has a description of 975 KB and 999 types implementing it gave every
// role's generated GraphQL schema a gigabyte of descriptions to hold:
// 200 KB of such a schema (200 types) took 1.3 s and 300 MB to build for
// one role, and the server held 49 MB, counted as 400 fields by the
// cache of servers.
const MaxDescriptionBytes = 4 << 20

// isBuiltinScalar reports whether name is one of the scalars every schema has.
func isBuiltinScalar(name string) bool {
	switch name {
	case sluice.ScalarString, sluice.ScalarInt, sluice.ScalarFloat, sluice.ScalarBoolean,
		sluice.ScalarID, sluice.ScalarDateTime, sluice.ScalarBigInt, sluice.ScalarJSON:
		return true
	}
	return false
}

// isReservedTypeName reports whether a class or enum may not be called name
// because the generated GraphQL schema already uses it.
func isReservedTypeName(name string) bool {
	switch name {
	case "Query", "Mutation", "Subscription":
		return true
	}
	return isBuiltinScalar(name)
}

// isTypeName reports whether s is spelled like a class or enum name: ASCII
// letters and digits, starting with a letter. Underscores are refused
// because generated names (Person_Filter, Person_added) use them as the
// separator, so a class named Person_Filter would collide.
func isTypeName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && (i == 0 || !isDigit(c)) {
			return false
		}
	}
	return true
}

// isFieldName reports whether s is spelled like a field name: ASCII letters,
// digits and underscores, starting with a letter. A leading underscore is
// reserved for generated fields (_id, _type, _CommitMetadata).
func isFieldName(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

// systemColumns names the columns Postgres gives every table (since
// Postgres 12, which dropped oid), for messages.
const systemColumns = "tableoid, xmin, cmin, xmax, cmax and ctid"

// isSystemColumn reports whether a field of a type or interface may not
// be called name: Postgres gives every table a column of that name, so a
// table cannot have another, and each document class is a table with a
// column for each field, its inherited ones included. Names are compared
// exactly: Sluice quotes column names, so "XMin" is a column of its own.
// A subdocument's fields are kept inside its documents' JSON, not as
// columns, and may have these names.
func isSystemColumn(name string) bool {
	switch name {
	case "tableoid", "xmin", "cmin", "xmax", "cmax", "ctid":
		return true
	}
	return false
}

// isEnumValue reports whether s may be an enum value: a GraphQL name that is
// not true, false or null (GraphQL forbids them as enum values) and does not
// start with "__" (reserved for introspection).
func isEnumValue(s string) bool {
	if s == "" || strings.HasPrefix(s, "__") || s == "true" || s == "false" || s == "null" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && c != '_' && (i == 0 || !isDigit(c)) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// typeString spells f's type the way SDL would, with list elements always
// non-null because Sluice lists never hold nulls: Int, String!, [Person!]!.
func typeString(f *sluice.Field) string {
	s := f.Type.Name
	if f.List {
		s = "[" + s + "!]"
	}
	if f.Required {
		s += "!"
	}
	return s
}

// fieldString spells f's type and protection, for messages comparing two
// versions of a field.
func fieldString(f *sluice.Field) string {
	s := typeString(f)
	if f.ReadRole != sluice.RoleRead {
		s += ` @protected(role: "` + f.ReadRole.String() + `")`
	}
	return s
}

// Weight returns what s is counted as by the caches that keep it or its
// GraphQL servers (graph's servers, internal/schemacache): the fields of
// its classes, inherited ones included, each class counting at least one
// (one without fields still has its GraphQL types), and each enum and
// each of its values. Counted by fields alone, 10,000 classes without
// fields, which took 312 MB to serve, counted as one.
func Weight(s *sluice.Schema) int {
	n := 0
	for _, c := range s.Classes {
		n += max(len(c.Fields), 1)
	}
	for _, e := range s.Enums {
		n += 1 + len(e.Values)
	}
	return n
}

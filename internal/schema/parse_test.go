package schema

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
)

// render prints s compactly, one line per class, field and enum, so tests
// can compare whole schemas.
func render(s *sluice.Schema) string {
	var b strings.Builder
	for _, name := range s.Order {
		c := s.Classes[name]
		b.WriteString(describeClass(c) + " " + c.Name)
		if len(c.Parents) > 0 {
			b.WriteString(" implements " + strings.Join(c.Parents, " & "))
		}
		if c.Description != "" {
			b.WriteString(" # " + c.Description)
		}
		b.WriteString("\n")
		for _, f := range c.Fields {
			b.WriteString("  " + f.Name + ": " + fieldString(f))
			switch f.Type.Kind {
			case sluice.TypeEnum:
				b.WriteString(" (enum)")
			case sluice.TypeReference:
				b.WriteString(" (reference)")
			case sluice.TypeSubdocument:
				b.WriteString(" (subdocument)")
			}
			if f.Description != "" {
				b.WriteString(" # " + f.Description)
			}
			b.WriteString("\n")
		}
		for _, ix := range c.Indexes {
			b.WriteString("  @index(" + strings.Join(ix.Fields, ", ") + ")\n")
		}
	}
	for _, name := range s.EnumOrder {
		b.WriteString("enum " + name + " " + strings.Join(s.Enums[name].Values, " ") + "\n")
	}
	return b.String()
}

// mustParse parses sdl or fails the test.
func mustParse(t testing.TB, sdl string) *sluice.Schema {
	t.Helper()
	s, err := Parse(sdl)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

// representative is a schema using every feature: both kinds of
// inheritance, a diamond, enums, references, subdocuments, protection and
// descriptions.
const representative = `
"""A person."""
type Person {
  "Full name."
  name: String!
  age: Int
  friends: [Person!]
  home: Address
  addresses: [Address]!
  favorite: Color
  pet: Pet
  ssn: String @private
  salary: BigInt @protected(role: "write")
  id: ID
  type: String
}

type Address @subdocument {
  street: String
  city: String!
  next: Address
}

enum Color { RED GREEN }

interface Animal { name: String! }

type Dog implements Animal {
  breed: String
  name: String!
  owner: Person
}

interface Pet @concrete {
  name: String!
  born: DateTime
}

interface Puppy implements Pet @concrete { toy: JSON }

type Cat implements Pet & Animal {
  """Lives left."""
  lives: Int!
}

type Beagle implements Puppy & Animal { loud: Boolean! }

interface Ghost { boo: Float }
`

func TestParseRepresentative(t *testing.T) {
	t.Parallel()
	s := mustParse(t, representative)
	want := `class Person # A person.
  name: String! # Full name.
  age: Int
  friends: [Person!] (reference)
  home: Address (subdocument)
  addresses: [Address!]! (subdocument)
  favorite: Color (enum)
  pet: Pet (reference)
  ssn: String @protected(role: "admin")
  salary: BigInt @protected(role: "write")
  id: ID
  type: String
subdocument Address
  street: String
  city: String!
  next: Address (subdocument)
abstract class Animal
  name: String!
class Dog implements Animal
  name: String!
  breed: String
  owner: Person (reference)
class Pet
  name: String!
  born: DateTime
class Puppy implements Pet
  name: String!
  born: DateTime
  toy: JSON
class Cat implements Pet & Animal
  name: String!
  born: DateTime
  lives: Int! # Lives left.
class Beagle implements Puppy & Animal
  name: String!
  born: DateTime
  toy: JSON
  loud: Boolean!
abstract class Ghost
  boo: Float
enum Color RED GREEN
`
	if got := render(s); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if s.SDL != representative {
		t.Errorf("SDL not kept")
	}
	if got := s.Class("Person").Field("name").ReadRole; got != sluice.RoleRead {
		t.Errorf("unprotected field role = %v, want read", got)
	}
	if got, want := strings.Join(s.Descendants("Pet"), " "), "Pet Puppy Cat Beagle"; got != want {
		t.Errorf("Descendants(Pet) = %q, want %q", got, want)
	}
	if got, want := strings.Join(s.Descendants("Animal"), " "), "Animal Dog Cat Beagle"; got != want {
		t.Errorf("Descendants(Animal) = %q, want %q", got, want)
	}
	// Inherited fields are copies: a class's fields belong to it alone.
	if s.Class("Pet").Field("name") == s.Class("Cat").Field("name") {
		t.Errorf("Cat shares its inherited field with Pet")
	}
}

func TestParseGood(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, sdl, want string
	}{
		{"empty", "", ""},
		{"blank", " \n\t\r\n", ""},
		{"comments only", "# nothing here\n  # still nothing\n", ""},
		{"all scalars", "type T { a: String b: Int c: Float d: Boolean e: ID f: DateTime g: BigInt h: JSON }",
			"class T\n  a: String\n  b: Int\n  c: Float\n  d: Boolean\n  e: ID\n  f: DateTime\n  g: BigInt\n  h: JSON\n"},
		{"lists", "type T { a: [Int] b: [Int!] c: [Int]! d: [Int!]! e: Int! }",
			"class T\n  a: [Int!]\n  b: [Int!]\n  c: [Int!]!\n  d: [Int!]!\n  e: Int!\n"},
		{"forward reference", "type A { b: B c: C }\ntype B { x: Int }\nenum C { X }",
			"class A\n  b: B (reference)\n  c: C (enum)\nclass B\n  x: Int\nenum C X\n"},
		{"class without fields", "type Tag", "class Tag\n"},
		{"interface without fields", "interface Marker\ntype T implements Marker { a: Int }",
			"abstract class Marker\nclass T implements Marker\n  a: Int\n"},
		{"missing inherited field is added", "interface A { x: Int y: String }\ntype T implements A { z: Int }",
			"abstract class A\n  x: Int\n  y: String\nclass T implements A\n  x: Int\n  y: String\n  z: Int\n"},
		{"repeated inherited field keeps ancestor order", "interface A { x: Int y: String }\ntype T implements A { z: Int y: String x: Int }",
			"abstract class A\n  x: Int\n  y: String\nclass T implements A\n  x: Int\n  y: String\n  z: Int\n"},
		{"repeated field may describe itself", "interface A { \"a\" x: Int }\ntype T implements A { \"t\" x: Int }",
			"abstract class A\n  x: Int # a\nclass T implements A\n  x: Int # t\n"},
		{"child declared before parent", "type T implements A { b: Int }\ninterface A { a: Int }",
			"class T implements A\n  a: Int\n  b: Int\nabstract class A\n  a: Int\n"},
		{"diamond", "interface A { a: Int }\ninterface B implements A { b: Int }\ninterface C implements A { c: Int }\ntype D implements B & C { d: Int }",
			"abstract class A\n  a: Int\nabstract class B implements A\n  a: Int\n  b: Int\nabstract class C implements A\n  a: Int\n  c: Int\nclass D implements B & C\n  a: Int\n  b: Int\n  c: Int\n  d: Int\n"},
		{"same field from unrelated parents", "interface A { n: String! }\ninterface B { n: String! }\ntype T implements A & B",
			"abstract class A\n  n: String!\nabstract class B\n  n: String!\nclass T implements A & B\n  n: String!\n"},
		{"implements with leading ampersand", "interface A { a: Int }\ntype T implements & A",
			"abstract class A\n  a: Int\nclass T implements A\n  a: Int\n"},
		{"protection", `type T { a: Int @private b: Int @protected(role: "admin") c: Int @protected(role: "write") d: Int @protected(role: "read") }`,
			"class T\n  a: Int @protected(role: \"admin\")\n  b: Int @protected(role: \"admin\")\n  c: Int @protected(role: \"write\")\n  d: Int\n"},
		{"protected with block string", "type T { a: Int @protected(role: \"\"\"write\"\"\") }",
			"class T\n  a: Int @protected(role: \"write\")\n"},
		{"recursive optional subdocument", "type N @subdocument { v: Int next: N kids: [N!]! }",
			"subdocument N\n  v: Int\n  next: N (subdocument)\n  kids: [N!]! (subdocument)\n"},
		{"subdocument holds a reference", "type S @subdocument { p: P! }\ntype P { s: S! }",
			"subdocument S\n  p: P! (reference)\nclass P\n  s: S! (subdocument)\n"},
		{"required self reference", "type Node { next: Node! }", "class Node\n  next: Node! (reference)\n"},
		{"names", "type A1b2 { x_1: Int X: Int }\nenum E1 { a _b C_1 }",
			"class A1b2\n  x_1: Int\n  X: Int\nenum E1 a _b C_1\n"},
		{"1000 fields", "interface I { " + fieldList(0, 500) + " }\ntype T implements I { " + fieldList(500, 1000) + " }",
			"abstract class I\n" + renderedFields(0, 500) + "class T implements I\n" + renderedFields(0, 1000)},
		{"63-byte names", "type " + strings.Repeat("A", 63) + " { " + strings.Repeat("b", 63) + ": Int }",
			"class " + strings.Repeat("A", 63) + "\n  " + strings.Repeat("b", 63) + ": Int\n"},
		{"descriptions", "\"\"\"\n  Multi\n  line\n\"\"\"\ntype T { \"one\" a: Int }\n\"enum desc\" enum E { A }",
			"class T # Multi\nline\n  a: Int # one\nenum E A\n"},
		{"abstract without concrete descendant", "interface A { a: Int }\ntype T { a: A }",
			"abstract class A\n  a: Int\nclass T\n  a: A (reference)\n"},
		{"concrete interface alone", "interface P @concrete { a: Int }", "class P\n  a: Int\n"},
		{"index on fields", "enum C { R G }\ntype T { s: String @index n: Int! @index @private c: C @index r: T @index d: DateTime @index }",
			"class T\n  s: String\n  n: Int! @protected(role: \"admin\")\n  c: C (enum)\n  r: T (reference)\n  d: DateTime\n  @index(s)\n  @index(n)\n  @index(c)\n  @index(r)\n  @index(d)\nenum C R G\n"},
		{"index on a type", `type T @index(fields: ["a", "b"]) @index(fields: "b") { a: Int b: String @index }`,
			"class T\n  a: Int\n  b: String\n  @index(a, b)\n  @index(b)\n"},
		{"indexes are inherited once", "interface A @index(fields: [\"x\"]) { x: Int @index y: Int }\ntype T implements A @index(fields: [\"y\", \"x\"]) { y: Int @index }",
			"abstract class A\n  x: Int\n  y: Int\n  @index(x)\nclass T implements A\n  x: Int\n  y: Int\n  @index(x)\n  @index(y, x)\n  @index(y)\n"},
		{"type index on an inherited field", "interface A { x: Int }\ntype T implements A @index(fields: [\"x\"])",
			"abstract class A\n  x: Int\nclass T implements A\n  x: Int\n  @index(x)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.sdl)
			if got := render(s); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			if s.Classes == nil || s.Enums == nil {
				t.Errorf("nil maps in %+v", s)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A", 64)
	tests := []struct {
		name, sdl, want string
	}{
		// Syntax errors, as gqlparser reports them.
		{"syntax", "type {", "line 1, column 6: Expected Name, found {"},
		{"syntax on line 3", "type A {\n  a: Int\n  b Int\n}", "line 3, column 5: Expected :, found Name"},
		{"empty braces", "enum X {}", "line 1, column 9: expected at least one definition, found }"},
		{"bad character", "type A { a: Int }\n§", "line 2, column 1: Unexpected <Invalid>"},
		{"query document", "query { a }", "line 1, column 1: Unexpected Name \"query\""},

		// Unsupported definitions.
		{"schema definition", "schema { query: Q }\ntype Q { a: Int }", "line 1, column 8: schema definitions are not supported: Sluice generates Query, Mutation and Subscription"},
		{"schema extension", "extend schema @foo", "line 1, column 15: schema extensions (extend schema) are not supported"},
		{"directive definition", "directive @key on OBJECT", "line 1, column 12: directive definitions are not supported: @key"},
		{"type extension", "type A { a: Int }\nextend type A { b: Int }", "line 2, column 13: type extensions are not supported: extend type A; put everything in the definition of A"},
		{"enum extension", "enum E { A }\nextend enum E { B }", "line 2, column 13: type extensions are not supported: extend enum E; put everything in the definition of E"},
		{"union", "type A { a: Int }\nunion U = A", "line 2, column 7: union types are not supported: U; use an interface"},
		{"input", "input I { a: Int }", "line 1, column 7: input types are not supported: I; Sluice generates input types from the classes"},
		{"custom scalar", "scalar Date", "line 1, column 8: custom scalars are not supported: Date; use String, Int, Float, Boolean, ID, DateTime, BigInt or JSON"},
		{"built-in scalar declared", "scalar DateTime", "line 1, column 8: scalar DateTime is built in; remove its declaration"},

		// Names.
		{"underscore in class name", "type Person_Filter { a: Int }", "line 1, column 6: invalid type name Person_Filter: use only letters and digits, starting with a letter (no underscores: the names Sluice makes for each class, such as Note_Filter and Note_aggregate, use them)"},
		{"leading underscore", "interface _A { a: Int }", "line 1, column 11: invalid interface name _A: use only letters and digits, starting with a letter (no underscores: the names Sluice makes for each class, such as Note_Filter and Note_aggregate, use them)"},
		{"underscore in enum name", "enum Color_X { A }", "line 1, column 6: invalid enum name Color_X: use only letters and digits, starting with a letter (no underscores: the names Sluice makes for each class, such as Note_Filter and Note_aggregate, use them)"},
		{"long class name", "type " + long + " { a: Int }", "line 1, column 6: type name " + long + " is longer than 63 bytes"},
		{"Query", "type Query { a: Int }", "line 1, column 6: Query is a reserved name"},
		{"Mutation", "type Mutation { a: Int }", "line 1, column 6: Mutation is a reserved name"},
		{"Subscription", "interface Subscription { a: Int }", "line 1, column 11: Subscription is a reserved name"},
		{"scalar name as class", "type DateTime { a: Int }", "line 1, column 6: DateTime is a reserved name"},
		{"scalar name as enum", "enum String { A }", "line 1, column 6: String is a reserved name"},
		{"duplicate class", "type A { a: Int }\n\ntype A { b: Int }", "line 3, column 6: A is declared twice (first on line 1)"},
		{"class and enum of one name", "enum A { X }\ninterface A { a: Int }", "line 2, column 11: A is declared twice (first on line 1)"},
		{"field name with leading underscore", "type A { _id: Int }", "line 1, column 10: invalid field name A._id: use letters, digits and underscores, starting with a letter (a leading underscore is kept for the fields Sluice makes, such as _id and the backlinks _<field>_of_<Class>)"},
		// The generated names of backlinks and aggregates cannot be taken.
		{"a backlink's name", "type User { n: Int } type Note { owner: User } type B { _owner_of_Note: Int }", "line 1, column 57: invalid field name B._owner_of_Note: use letters, digits and underscores, starting with a letter (a leading underscore is kept for the fields Sluice makes, such as _id and the backlinks _<field>_of_<Class>)"},
		{"an aggregate field's name", "type Note_aggregate { a: Int }", "line 1, column 6: invalid type name Note_aggregate: use only letters and digits, starting with a letter (no underscores: the names Sluice makes for each class, such as Note_Filter and Note_aggregate, use them)"},
		{"an aggregate type's name", "type Note { a: Int } type Note_Aggregate { a: Int }", "line 1, column 27: invalid type name Note_Aggregate: use only letters and digits, starting with a letter (no underscores: the names Sluice makes for each class, such as Note_Filter and Note_aggregate, use them)"},
		{"long field name", "type A { " + strings.Repeat("b", 64) + ": Int }", "line 1, column 10: field name A." + strings.Repeat("b", 64) + " is longer than 63 bytes"},
		{"duplicate field", "type A {\n  a: Int\n  a: String\n}", "line 3, column 3: field A.a is declared twice"},
		{"enum value true", "enum E { A true }", "line 1, column 12: invalid value true of enum E: use letters, digits and underscores, not true, false or null, and not starting with __"},
		{"enum value null", "enum E { null }", "line 1, column 10: invalid value null of enum E: use letters, digits and underscores, not true, false or null, and not starting with __"},
		{"enum value __", "enum E { __A }", "line 1, column 10: invalid value __A of enum E: use letters, digits and underscores, not true, false or null, and not starting with __"},
		{"long enum value", "enum E { " + long + " }", "line 1, column 10: value " + long + " of enum E is longer than 63 bytes"},
		{"duplicate enum value", "enum E { A B A }", "line 1, column 14: value A of enum E is declared twice"},
		{"enum without values", "enum E", "line 1, column 6: enum E has no values"},

		// Fields and types.
		{"unknown type", "type A {\n  b: Bee\n}", "line 2, column 3: field A.b: unknown type Bee"},
		{"unknown type in list", "type A { b: [Bee!]! }", "line 1, column 10: field A.b: unknown type Bee"},
		{"list of lists", "type A { b: [[Int]] }", "line 1, column 10: field A.b: lists of lists are not supported"},
		{"field arguments", "type A { b(x: Int): Int }", "line 1, column 10: field A.b: field arguments are not supported"},

		// Directives.
		{"unknown type directive", "type A @key(fields: \"a\") { a: Int }", "line 1, column 9: unknown directive @key on type A: types take @subdocument and @index(fields: […]), interfaces @concrete and @index(fields: […])"},
		{"unknown field directive", "type A { a: Int @deprecated }", "line 1, column 18: unknown directive @deprecated on field A.a: fields take @index, @private or @protected(role: …)"},
		{"index on a list", "type A { a: [Int] @index }", "line 1, column 20: @index on A.a: the field cannot be indexed: it is a list (stored as JSON); only a field holding one String, Int, Float, Boolean, ID, DateTime, BigInt, enum value or reference can be"},
		{"index on JSON", "type A { a: JSON @index }", "line 1, column 19: @index on A.a: the field cannot be indexed: JSON fields cannot be filtered or sorted"},
		{"index on a subdocument field", "type S @subdocument { x: Int }\ntype A { s: S @index }", "line 2, column 16: @index on A.s: the field cannot be indexed: it holds a subdocument (stored as JSON); index a field of the documents instead"},
		{"index inside a subdocument", "type S @subdocument { x: Int @index }", "line 1, column 31: @index on S.x: a subdocument is stored inside its documents, with no table to index"},
		{"index on a subdocument type", "type S @index(fields: [\"x\"]) @subdocument { x: Int }", "line 1, column 9: @index on subdocument S: a subdocument is stored inside its documents, with no table to index"},
		{"field index with arguments", "type A { a: Int @index(fields: [\"a\"]) }", "line 1, column 18: @index on a field takes no arguments; to index several fields together, put @index(fields: [...]) on the type"},
		{"field index twice", "type A { a: Int @index @index }", "line 1, column 25: @index is given twice on field A.a"},
		{"type index without fields", "type A @index { a: Int }", "line 1, column 9: @index on a type or interface takes one argument, fields: the list of field names to index, in key order, as in @index(fields: [\"age\", \"name\"]) (on type A)"},
		{"type index with numbers", "type A @index(fields: [1]) { a: Int }", "line 1, column 9: @index on a type or interface takes one argument, fields: the list of field names to index, in key order, as in @index(fields: [\"age\", \"name\"]) (on type A)"},
		{"type index with an empty list", "type A @index(fields: []) { a: Int }", "line 1, column 9: @index on type A lists no fields"},
		{"type index repeats a field", `type A @index(fields: ["a", "a"]) { a: Int }`, "line 1, column 9: @index on type A lists field a twice"},
		{"type index of an unknown field", `type A @index(fields: ["a", "b"]) { a: Int }`, "line 1, column 9: @index on A names field b, which A does not have"},
		{"type index of a list field", `type A @index(fields: ["a"]) { a: [Int] }`, "line 1, column 9: @index on A: field a cannot be indexed: it is a list (stored as JSON); only a field holding one String, Int, Float, Boolean, ID, DateTime, BigInt, enum value or reference can be"},
		{"type index of 32 fields", "type A @index(fields: [" + strings.Repeat(`"a", `, 32) + "]) { a: Int }", "line 1, column 9: @index on type A lists 32 fields; at most 31 are allowed"},
		{"enum directive", "enum E @private { A }", "line 1, column 9: unknown directive @private on enum E: enums take no directives"},
		{"enum value directive", "enum E { A @deprecated }", "line 1, column 13: unknown directive @deprecated on value E.A: enum values take no directives"},
		{"concrete on type", "type A @concrete { a: Int }", "line 1, column 9: @concrete applies to interfaces, not to type A: a type already has documents of its own"},
		{"subdocument on interface", "interface A @subdocument { a: Int }", "line 1, column 14: @subdocument applies to types, not to interface A"},
		{"subdocument with arguments", "type A @subdocument(x: 1) { a: Int }", "line 1, column 9: @subdocument takes no arguments"},
		{"repeated subdocument", "type A @subdocument @subdocument { a: Int }", "line 1, column 22: @subdocument is given twice on type A"},
		{"private on type", "type A @private { a: Int }", "line 1, column 9: unknown directive @private on type A: types take @subdocument and @index(fields: […]), interfaces @concrete and @index(fields: […])"},
		{"subdocument implements", "interface I { a: Int }\ntype A implements I @subdocument { a: Int }", "line 2, column 6: subdocument A cannot implement interfaces"},
		{"subdocument without fields", "type A @subdocument", "line 1, column 6: subdocument A has no fields"},
		{"private with arguments", "type A { a: Int @private(role: \"admin\") }", "line 1, column 18: @private takes no arguments; it means @protected(role: \"admin\")"},
		{"private and protected", "type A { a: Int @private @protected(role: \"write\") }", "line 1, column 27: field A.a: give one of @private and @protected, once"},
		{"private twice", "type A { a: Int @private @private }", "line 1, column 27: field A.a: give one of @private and @protected, once"},
		{"protected without role", "type A { a: Int @protected }", "line 1, column 18: @protected takes one argument, role: \"read\", \"write\" or \"admin\""},
		{"protected with other argument", "type A { a: Int @protected(level: \"admin\") }", "line 1, column 18: @protected takes one argument, role: \"read\", \"write\" or \"admin\""},
		{"protected with enum literal", "type A { a: Int @protected(role: admin) }", "line 1, column 18: @protected takes one argument, role: \"read\", \"write\" or \"admin\""},
		{"protected with two arguments", "type A { a: Int @protected(role: \"admin\", x: 1) }", "line 1, column 18: @protected takes one argument, role: \"read\", \"write\" or \"admin\""},
		{"unknown role", "type A { a: Int @protected(role: \"owner\") }", "line 1, column 18: unknown role \"owner\" in @protected: use \"read\", \"write\" or \"admin\""},
		{"role none", "type A { a: Int @protected(role: \"none\") }", "line 1, column 18: unknown role \"none\" in @protected: use \"read\", \"write\" or \"admin\""},

		// Inheritance.
		{"implements unknown", "type A implements I { a: Int }", "line 1, column 6: A implements unknown interface I"},
		{"implements type", "type B { a: Int }\ntype A implements B { a: Int }", "line 2, column 6: A implements B, which is a type; only interfaces can be implemented"},
		{"implements subdocument", "type B @subdocument { a: Int }\ntype A implements B { a: Int }", "line 2, column 6: A implements B, which is a type; only interfaces can be implemented"},
		{"implements enum", "enum E { X }\ntype A implements E { a: Int }", "line 2, column 6: A implements E, which is an enum; only interfaces can be implemented"},
		{"implements twice", "interface I { a: Int }\ntype A implements I & I { a: Int }", "line 2, column 6: A implements I twice"},
		{"self cycle", "interface I implements I { a: Int }", "line 1, column 11: interface inheritance cycle: I implements I"},
		{"cycle", "interface A implements C { a: Int }\ninterface B implements A { b: Int }\ninterface C implements B { c: Int }",
			"line 1, column 11: interface inheritance cycle: A implements C implements B implements A"},
		{"cycle below a type", "type T implements A\ninterface A implements B { a: Int }\ninterface B implements A { b: Int }",
			"line 2, column 11: interface inheritance cycle: A implements B implements A"},
		{"repeated field of another type", "interface A { x: Int }\ntype T implements A {\n  x: String\n}",
			"line 3, column 3: field T.x is String but A declares it Int; repeat an inherited field identically or leave it out"},
		{"repeated field not required", "interface A { x: Int! }\ntype T implements A { x: Int }",
			"line 2, column 23: field T.x is Int but A declares it Int!; repeat an inherited field identically or leave it out"},
		{"repeated field as list", "interface A { x: Int }\ntype T implements A { x: [Int] }",
			"line 2, column 23: field T.x is [Int!] but A declares it Int; repeat an inherited field identically or leave it out"},
		{"repeated field unprotected", "interface A { x: Int @private }\ntype T implements A { x: Int }",
			"line 2, column 23: field T.x is Int but A declares it Int @protected(role: \"admin\"); repeat an inherited field identically or leave it out"},
		{"repeated field of grandparent", "interface A { x: Int }\ninterface B implements A { y: Int }\ntype T implements B { x: Float }",
			"line 3, column 23: field T.x is Float but A declares it Int; repeat an inherited field identically or leave it out"},
		{"1001 fields", "interface I { " + fieldList(0, 500) + " }\ntype T implements I { " + fieldList(500, 1001) + " }",
			"line 2, column 6: T has 1001 fields, inherited ones included; at most 1000 are allowed"},
		{"conflicting parents", "interface A { x: Int }\ninterface B { x: String }\ntype T implements A & B",
			"line 3, column 6: T inherits field x as Int from A and as String from B"},

		// Subdocuments that could never be written.
		{"subdocument requires itself", "type S @subdocument { s: S! }", "line 1, column 6: subdocument S can never be written: it requires itself through S.s → S"},
		{"subdocument cycle", "type A @subdocument { x: Int b: B! }\ntype B @subdocument { a: A! }",
			"line 1, column 6: subdocument A can never be written: it requires itself through A.b → B.a → A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tt.sdl)
			if err == nil {
				t.Fatalf("Parse succeeded:\n%s", render(s))
			}
			if code := sluice.ErrorCode(err); code != sluice.CodeInvalid {
				t.Errorf("code = %s, want %s", code, sluice.CodeInvalid)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestParseDiamonds checks that inheritance costs linear time: each of 40
// levels has two interfaces implementing both of the level above, so a
// walk over every path would take 2^40 steps.
func TestParseDiamonds(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("interface A0 { a0: Int }\ninterface B0 { b0: Int }\n")
	const levels = 40
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "interface A%d implements A%d & B%d { a%d: Int }\n", i, i-1, i-1, i)
		fmt.Fprintf(&b, "interface B%d implements A%d & B%d { b%d: Int }\n", i, i-1, i-1, i)
	}
	fmt.Fprintf(&b, "type T implements A%d & B%d { other: Other }\ntype Other { x: Int }\n", levels, levels)
	old := mustParse(t, b.String())
	if got, want := len(old.Class("T").Fields), 2*(levels+1)+1; got != want {
		t.Errorf("T has %d fields, want %d", got, want)
	}
	// A reference to a class that is not an ancestor walks the whole graph.
	_, err := ValidateDocument(old, map[string]any{"@type": "T", "other": "T/x"})
	if want := `T: field "other": "T/x": class T is neither Other nor a subclass of it`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
	next := mustParse(t, strings.Replace(b.String(), "interface A1 implements A0 & B0", "interface A1 implements B0", 1))
	if got := len(Diff(old, next)); got == 0 {
		t.Errorf("no changes")
	}
}

// fieldList returns SDL declaring Int fields f<from> to f<to-1>.
func fieldList(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "f%d: Int ", i)
	}
	return b.String()
}

// renderedFields returns what render prints for fieldList(from, to).
func renderedFields(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "  f%d: Int\n", i)
	}
	return b.String()
}

// TestParseNewBoundsWhatASchemaExpandsTo: a new schema may expand to at
// most MaxExpandedFields fields and backlinks, however short its text:
// classes counting the fields they inherit, references counting a
// backlink on each class they can point at. A stored schema (Parse) is
// not held to it.
func TestParseNewBoundsWhatASchemaExpandsTo(t *testing.T) {
	var wide strings.Builder
	wide.WriteString("interface I {")
	for i := range 999 {
		fmt.Fprintf(&wide, " f%d: Int", i)
	}
	wide.WriteString(" }\n")
	for i := range 25 { // 26 classes of 999 fields
		fmt.Fprintf(&wide, "type T%d implements I\n", i)
	}
	var linked strings.Builder
	linked.WriteString("interface J { x: Int }\ntype R {")
	for i := range 100 {
		fmt.Fprintf(&linked, " r%d: J", i)
	}
	linked.WriteString(" }\n")
	for i := range 200 { // 100 references, each a backlink on J and 200 classes
		fmt.Fprintf(&linked, "type K%d implements J { x: Int }\n", i)
	}
	for name, sdl := range map[string]string{"inherited fields": wide.String(), "backlinks": linked.String()} {
		if _, err := Parse(sdl); err != nil {
			t.Errorf("%s: a stored schema: %v", name, err)
		}
		_, err := ParseNew(sdl)
		if err == nil || !strings.Contains(err.Error(), "the schema expands to more than 20000 fields") {
			t.Errorf("%s: a new schema: %v", name, err)
		}
	}
	// Just within: 20 classes of 999 fields.
	var fits strings.Builder
	fits.WriteString("interface I {")
	for i := range 999 {
		fmt.Fprintf(&fits, " f%d: Int", i)
	}
	fits.WriteString(" }\n")
	for i := range 19 {
		fmt.Fprintf(&fits, "type T%d implements I\n", i)
	}
	if _, err := ParseNew(fits.String()); err != nil {
		t.Errorf("20 classes of 999 fields: %v", err)
	}
}

// TestParseNewRefusesSystemColumnNames: a field of a type or interface
// named as one of Postgres's system columns is refused in a new schema,
// naming the field and why; a stored schema still loads, and a
// subdocument's fields, another case and oid (no longer a system column)
// are names like any other.
func TestParseNewRefusesSystemColumnNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"} {
		for _, sdl := range []string{"type A {\n  b: Int\n  " + name + ": Int\n}", "interface A {\n  b: Int\n  " + name + ": Int\n}"} {
			want := "line 3, column 3: invalid field name A." + name + ": Postgres gives every table a system column of that name (tableoid, xmin, cmin, xmax, cmax and ctid), and each class's documents are stored in a table with a column for each field; choose another name"
			if _, err := ParseNew(sdl); err == nil || err.Error() != want || sluice.ErrorCode(err) != sluice.CodeInvalid {
				t.Errorf("%s: got %v, want %s", sdl, err, want)
			}
			if _, err := Parse(sdl); err != nil {
				t.Errorf("%s, stored: %v", sdl, err)
			}
		}
	}
	for _, sdl := range []string{"type S @subdocument { xmin: Int ctid: String }\ntype A { s: S }", "type A { XMin: Int CTID: String oid: Int }"} {
		if _, err := ParseNew(sdl); err != nil {
			t.Errorf("%s: %v", sdl, err)
		}
	}
}

// chainSDL returns a chain of n interfaces without fields, each
// implementing the one before.
func chainSDL(n int) string {
	var b strings.Builder
	b.WriteString("interface I0\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "interface I%d implements I%d\n", i, i-1)
	}
	return b.String()
}

// TestParseNewCountsAncestors: each class's ancestors count toward
// MaxExpandedFields, so a chain of interfaces without fields, which adds
// no field but whose GraphQL schema costs the fourth power of its length
// to build, is refused once it passes the bound: 199 interfaces (19,701
// ancestors and one for each class) fit, 200 do not, nor do 600, nor 900
// classes implementing a chain of 100 (all refused before any class is
// built; 20,000 took ParseNew 30 s, and is now past MaxClasses). A stored
// schema still loads.
func TestParseNewCountsAncestors(t *testing.T) {
	t.Parallel()
	if _, err := ParseNew(chainSDL(199)); err != nil {
		t.Errorf("199 interfaces: %v", err)
	}
	wide := chainSDL(100) // and 900 classes implementing it: 94,950
	for i := range 900 {
		wide += fmt.Sprintf("type T%d implements I99\n", i)
	}
	for name, sdl := range map[string]string{"200 interfaces": chainSDL(200), "600 interfaces": chainSDL(600), "900 classes under 100": wide} {
		_, err := ParseNew(sdl)
		if err == nil || !strings.Contains(err.Error(), "the schema expands to more than 20000 fields") ||
			!strings.Contains(err.Error(), "the interfaces each class inherits from") || sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Past MaxClasses, the bound on classes comes first.
	if _, err := ParseNew(chainSDL(20000)); err == nil || !strings.Contains(err.Error(), "more than 1000 types and interfaces") {
		t.Errorf("20,000 interfaces: %v", err)
	}
	if _, err := Parse(chainSDL(600)); err != nil {
		t.Errorf("a stored schema: %v", err)
	}
}

// TestParseNewBoundsClassesAndEnums: classes without fields and enums,
// which added nothing to the expanded count, are bounded: at most
// MaxClasses classes, MaxEnumValues values in an enum, and each class,
// enum and enum value counts toward MaxExpandedFields.
func TestParseNewBoundsClassesAndEnums(t *testing.T) {
	t.Parallel()
	classes := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "type A%d\n", i)
		}
		return b.String()
	}
	enum := func(name string, n int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "enum %s {", name)
		for i := range n {
			fmt.Fprintf(&b, " V%d", i)
		}
		b.WriteString(" }\n")
		return b.String()
	}
	var oneValue strings.Builder // 10,001 enums of one value: 20,002
	for i := range 10001 {
		fmt.Fprintf(&oneValue, "enum E%d { V }\n", i)
	}
	var manyValues strings.Builder // 20 enums of 1,000 values and a class: 20,021
	for i := range 20 {
		manyValues.WriteString(enum(fmt.Sprintf("E%d", i), 1000))
	}
	manyValues.WriteString("type A { x: Int }\n")
	for _, c := range []struct{ name, sdl, want string }{
		{"1,001 classes", classes(1001), "line 1001, column 6: type A1000: the schema declares more than 1000 types and interfaces; at most 1000 are allowed"},
		{"8,000 classes", classes(8000), "line 1001, column 6: type A1000: the schema declares more than 1000 types and interfaces"},
		{"an enum of 1,001 values", enum("E", 1001), "line 1, column 6: enum E has 1001 values; at most 1000 are allowed"},
		{"an enum of 60,000 values", enum("E", 60000), "enum E has 60000 values; at most 1000 are allowed"},
		{"10,001 enums of one value", oneValue.String(), "the schema expands to more than 20000 fields"},
		{"20 enums of 1,000 values", manyValues.String(), "the schema expands to more than 20000 fields"},
	} {
		_, err := ParseNew(c.sdl)
		if err == nil || !strings.Contains(err.Error(), c.want) || sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Errorf("%s: got %v, want %s", c.name, err, c.want)
		}
		if _, err := Parse(c.sdl); err != nil {
			t.Errorf("%s, stored: %v", c.name, err)
		}
	}
	// Just within: 1,000 classes without fields; 19 enums of 1,000
	// values, their 19 types and 980 classes (19,999).
	if _, err := ParseNew(classes(1000)); err != nil {
		t.Errorf("1,000 classes: %v", err)
	}
	var fits strings.Builder
	for i := range 19 {
		fits.WriteString(enum(fmt.Sprintf("E%d", i), 1000))
	}
	fits.WriteString(classes(980))
	if _, err := ParseNew(fits.String()); err != nil {
		t.Errorf("19 enums of 1,000 values and 980 classes: %v", err)
	}
}

// TestParseChangeKeepsStoredSchemasChangeable: a stored schema past the
// bounds a new one is held to (stored before they existed) can still be
// changed, held to its own counts where they are larger: adding a field
// or a class within them passes, growing what is past a bound is refused.
func TestParseChangeKeepsStoredSchemasChangeable(t *testing.T) {
	var types strings.Builder
	for i := range MaxClasses + 1 {
		fmt.Fprintf(&types, "type T%d { n: Int }\n", i)
	}
	values := make([]string, MaxEnumValues+500)
	for i := range values {
		values[i] = fmt.Sprintf("V%d", i)
	}
	enum := "enum E { " + strings.Join(values, " ") + " }\n"
	storedSDL := types.String() + enum
	stored, err := Parse(storedSDL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseNew(storedSDL); err == nil {
		t.Fatal("the stored schema passes ParseNew: the test needs one past its bounds")
	}
	withField := strings.Replace(storedSDL, "type T0 { n: Int }", "type T0 { n: Int m: String }", 1)
	if _, err := ParseChange(withField, stored); err != nil {
		t.Errorf("a field added to a stored schema past the bounds: %v", err)
	}
	if _, err := ParseChange(types.String()+"type More { n: Int }\n"+enum, stored); err == nil || !strings.Contains(err.Error(), "more than 1001 types") {
		t.Errorf("one more class than the stored schema's: %v, want it refused at the stored count", err)
	}
	if _, err := ParseChange(types.String()+strings.Replace(enum, " }", " VMORE }", 1), stored); err == nil || !strings.Contains(err.Error(), "at most 1500 are allowed") {
		t.Errorf("one more enum value than the stored schema's: %v, want it refused at the stored count", err)
	}
	if _, err := ParseChange("type A { n: Int }", &sluice.Schema{}); err != nil {
		t.Errorf("a small schema replacing an empty one: %v", err)
	}
}

// TestParseNewBoundsIndexes: a new schema's class has at most MaxIndexes
// indexes, inherited ones included, refused as the type's directives are
// read or as a class inherits them; a stored schema past the bound loads
// and stays changeable at its own count.
func TestParseNewBoundsIndexes(t *testing.T) {
	t.Parallel()
	// typeIndexes returns n distinct @index directives over pairs of the
	// fields a..z.
	typeIndexes := func(n int) string {
		var b strings.Builder
		for i := range n {
			first, second := i/25, i%25
			if second >= first {
				second++
			}
			fmt.Fprintf(&b, ` @index(fields: ["%c", "%c"])`, 'a'+first, 'a'+second)
		}
		return b.String()
	}
	var fields strings.Builder
	for c := 'a'; c <= 'z'; c++ {
		fmt.Fprintf(&fields, " %c: Int", c)
	}
	body := " {" + fields.String() + " }\n"
	for _, c := range []struct{ name, sdl, want string }{
		{"65 on a type", "type A" + typeIndexes(65) + body,
			"type A declares more than 64 indexes; at most 64 are allowed on a class, inherited ones included"},
		{"40 inherited and 25 of its own", "interface I" + typeIndexes(40) + body +
			"type T implements I" + strings.Replace(typeIndexes(65), typeIndexes(40), "", 1) + " { x: Int }\n",
			"T has more than 64 indexes, inherited ones included; at most 64 are allowed"},
		{"40 inherited and 25 on fields", "interface I" + typeIndexes(40) + body +
			"type T implements I {" + strings.ReplaceAll(fields.String(), "Int", "Int @index") + " }\n",
			"T has more than 64 indexes, inherited ones included; at most 64 are allowed"},
	} {
		_, err := ParseNew(c.sdl)
		if err == nil || !strings.Contains(err.Error(), c.want) || sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Errorf("%s: got %v, want %s", c.name, err, c.want)
		}
		if _, err := Parse(c.sdl); err != nil {
			t.Errorf("%s, stored: %v", c.name, err)
		}
	}
	// Just within: 64, some inherited, some repeated (counted once).
	within := "interface I" + typeIndexes(40) + body + "type T implements I" + typeIndexes(64) + " { x: Int @index }\n"
	if s, err := ParseNew(within); err == nil {
		t.Errorf("65 with x's index: admitted with %d indexes", len(s.Classes["T"].Indexes))
	}
	within = "interface I" + typeIndexes(40) + body + "type T implements I" + typeIndexes(64) + " { x: Int }\n"
	if s, err := ParseNew(within); err != nil {
		t.Errorf("64 indexes: %v", err)
	} else if n := len(s.Classes["T"].Indexes); n != 64 {
		t.Errorf("64 indexes: got %d", n)
	}
	// A stored schema of 70 on a class is held to 70.
	stored, err := Parse("type A" + typeIndexes(70) + body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseChange("type A"+typeIndexes(70)+" {"+fields.String()+" more: Int }\n", stored); err != nil {
		t.Errorf("a field added to a stored class of 70 indexes: %v", err)
	}
	if _, err := ParseChange("type A"+typeIndexes(71)+body, stored); err == nil || !strings.Contains(err.Error(), "at most 70 are allowed") {
		t.Errorf("one more index than the stored class's: %v, want it refused at the stored count", err)
	}
}

// TestParseNewBoundsDescriptions: a new schema's descriptions, each class
// counting those of the fields it inherits, come to at most
// MaxDescriptionBytes; a stored schema past it loads and stays
// changeable at its own count.
func TestParseNewBoundsDescriptions(t *testing.T) {
	t.Parallel()
	// inherited returns an interface whose field has a description of
	// 100,000 bytes, and n types implementing it: 100,000 bytes a class.
	inherited := func(n int) string {
		var b strings.Builder
		b.WriteString(`interface I { """` + strings.Repeat("x", 100000) + `""" a: Int }` + "\n")
		for i := range n {
			fmt.Fprintf(&b, "type T%d implements I\n", i)
		}
		return b.String()
	}
	if _, err := ParseNew(inherited(40)); err != nil { // 4,100,000 bytes
		t.Errorf("41 classes of 100,000 bytes of descriptions: %v", err)
	}
	const want = "line 42, column 6: type T40: the schema's descriptions come to more than 4194304 bytes, each class counting those of the fields it inherits"
	for _, n := range []int{41, 999} {
		if _, err := ParseNew(inherited(n)); err == nil || !strings.Contains(err.Error(), want) || sluice.ErrorCode(err) != sluice.CodeInvalid {
			t.Errorf("%d types inheriting 100,000 bytes of descriptions: got %v, want %s", n, err, want)
		}
	}
	enum := "enum E { \"\"\"" + strings.Repeat("y", 4<<20+1) + "\"\"\" V }"
	if _, err := ParseNew(enum); err == nil || !strings.Contains(err.Error(), "line 1, column 6: enum E: the schema's descriptions come to more than 4194304 bytes") {
		t.Errorf("an enum value's description past the bound: %v", err)
	}
	stored, err := Parse(inherited(50))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseChange(strings.Replace(inherited(50), " a: Int }", " a: Int b: Int }", 1), stored); err != nil {
		t.Errorf("a field added to a stored schema past the bound: %v", err)
	}
	if _, err := ParseChange(inherited(51), stored); err == nil || !strings.Contains(err.Error(), "more than 5100000 bytes") {
		t.Errorf("one more class than the stored schema's: %v, want it refused at the stored count", err)
	}
}

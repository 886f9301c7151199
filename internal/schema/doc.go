// Package schema turns a database's GraphQL SDL into a *sluice.Schema
// (Parse), checks documents against it (ValidateDocument, ParseID) and lists
// what changes between two schemas (Diff). It is pure Go: no database, no
// global state.
//
// # Schema language
//
// A schema is GraphQL SDL that declares only the user's classes; there is no
// Query, Mutation or Subscription type (Sluice generates those).
//
//	"""A person."""                      # descriptions are kept
//	type Person {                        # a document class
//	  name: String!                      # ! = required
//	  age: Int
//	  friends: [Person!]                 # a list of references to Person documents
//	  home: Address                      # an embedded subdocument
//	  favorite: Color                    # an enum value
//	  ssn: String @private               # only admins can read it
//	  salary: Int @protected(role: "write")
//	}
//
//	type Address @subdocument {          # embedded in documents; no id, no table
//	  street: String
//	  city: String
//	}
//
//	enum Color { RED GREEN }
//
//	interface Animal { name: String! }   # an abstract parent: no documents of its own
//	type Dog implements Animal { breed: String }
//
//	interface Pet @concrete { name: String! }  # a concrete parent: documents of its own and subclasses
//	interface Puppy implements Pet @concrete { age: Int }
//	type Cat implements Pet & Animal { indoor: Boolean }
//
// Scalars are String, Int (32-bit), Float, Boolean, ID, DateTime (RFC 3339),
// BigInt (arbitrary precision integer) and JSON (any JSON value). They are
// built in and may not be declared. A field whose type is a document class
// or an interface holds a reference (a document id); a field whose type is a
// @subdocument type holds the subdocument itself.
//
// Lists: [T], [T!], [T]! and [T!]! all mean a list whose elements are never
// null; a trailing ! means the list itself must be present (it may be
// empty). Lists of lists are not supported.
//
// Inheritance: a class inherits every field of every ancestor, in the
// ancestors' declaration order, before its own fields. Unlike GraphQL, a
// class need not repeat inherited fields; if it does, the repeated field
// must be identical (type, list, required, protection). Interfaces may
// implement interfaces; cycles are errors. A class that inherits one field
// name from two parents gets it once when both agree and is an error
// otherwise. Subdocuments neither inherit nor are inherited from.
//
// Indexes: @index on a field, or @index(fields: ["a", "b"]) on a type or
// interface (repeatable), declares an index of the class's table on those
// fields (sluice.Class.Indexes), inherited by every class that implements
// an interface declaring it. Only a single scalar other than JSON, an enum
// value or a reference can be indexed; lists, subdocuments, JSON and the
// fields of subdocument types are errors naming the field.
//
// Field protection: @private is @protected(role: "admin"); @protected(role:
// "write") hides the field from readers with less than the write role. Roles
// are "read", "write" and "admin". Unprotected fields need the read role.
//
// # Names
//
// Class and enum names are letters and digits, starting with a letter, at
// most 63 bytes: no underscore, so that the names Sluice generates
// (Person_Filter, Person_added, _ChangeSet, …) never collide with a user's
// class. Query, Mutation, Subscription and the built-in scalar names are
// reserved. Field names are letters, digits and underscores, starting with a
// letter, at most 63 bytes; a leading underscore is reserved for generated
// fields (_id, _type, _CommitMetadata). Plain "id" and "type" are ordinary
// field names: a document's own id and class travel as "@id" and "@type".
// Enum values are GraphQL names (not true, false or null, not starting with
// "__"), at most 63 bytes. A class has at most 1000 fields, inherited ones
// included (a Postgres table has at most 1600 columns).
//
// Not supported, and reported as errors naming them: union and input types,
// custom scalars, directives other than @concrete, @subdocument, @index,
// @private and @protected, directive definitions, schema definitions, type extensions
// (extend …) and field arguments. Every error is a CodeInvalid *sluice.Error
// whose message starts with "line L, column C: ".
//
// # Documents
//
// A document is a JSON object with "@type" (a document class) and an
// optional "@id". A document id is "Class/key"; "@id" may also be just the
// key. A key is 1 to 255 bytes of UTF-8 with no whitespace and no control
// characters. It may contain "/", but then "@id" must be written in full:
// an id is split at its first "/". A reference is always written in full,
// "Class/key" (or {"@id": "Class/key"}), where Class is the field's class or
// one that inherits from it. See ValidateDocument for how each field type is
// checked and normalized.
package schema

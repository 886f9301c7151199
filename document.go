package sluice

import "time"

// Document is one stored document in its API form: "@id" and "@type" plus its
// fields. Field values are normalized by schema validation to JSON-ready Go
// values: string (String, ID, enum, reference, DateTime in RFC 3339 UTC,
// BigInt in decimal), int64, float64, bool, []any, map[string]any
// (subdocuments, which carry "@type") and json.RawMessage (JSON). A field
// that is absent is not in Fields; there are no nulls.
//
// A document validated from a REST body's flat JSON object holds its
// values in Values instead, in the order of its class's fields (nil for an
// absent one), and Fields is nil: building a map for every document of a
// bulk write, only for the encoders to look each field up again, was a
// large share of the CPU the write spent. Such documents only go to the
// storage encoders, which read fields with Value.
//
// Version is the document's version (see VersionOf) when it was read from
// storage, "" otherwise. Expect is, in a write, what the request expects
// of the stored document (its "@version", If-Match, _version).
type Document struct {
	ID      string
	Type    string
	Version string
	Expect  Precondition
	Fields  map[string]any
	Values  []any
}

// Value returns the value of the document's field named name, the i-th
// field of its class, and whether the field is present.
func (d *Document) Value(i int, name string) (any, bool) {
	if d.Values != nil {
		return d.Values[i], d.Values[i] != nil
	}
	v, ok := d.Fields[name]
	return v, ok
}

// Database identifies and describes one user database.
type Database struct {
	// ID is the internal numeric id; it never changes and is never reused.
	ID      int64
	Org     string
	Name    string
	Label   string
	Comment string
	// Epoch is fixed when the database is created. Stream positions carry it
	// so that a position from a deleted and re-created database is refused.
	Epoch string
	// SchemaVersion counts schema changes, starting at 1.
	SchemaVersion int
	// LogRetention, when set, is how long the database keeps its
	// commits, 0 for ever; nil keeps them for the server's
	// log_retention. Pruning keeps them for the longer of the two.
	LogRetention *time.Duration
}

// Path returns "org/name", the way the API names a database.
func (d *Database) Path() string { return d.Org + "/" + d.Name }

// ErrNoDatabase returns the NotFound error for database org/name. A
// database of an organization the caller does not belong to answers with
// exactly this error too, so its existence is not revealed.
func ErrNoDatabase(org, name string) *Error {
	return Errorf(CodeNotFound, "database %s/%s does not exist", org, name)
}

// SystemOrg and SystemDB name the built-in system database, served at
// /api/graphql/_system.
const (
	SystemOrg = "_system"
	SystemDB  = "_system"
)

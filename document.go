package sluice

// Document is one stored document in its API form: "@id" and "@type" plus its
// fields. Field values are normalized by schema validation to JSON-ready Go
// values: string (String, ID, enum, reference, DateTime in RFC 3339 UTC,
// BigInt in decimal), int64, float64, bool, []any, map[string]any
// (subdocuments, which carry "@type") and json.RawMessage (JSON). A field
// that is absent is not in Fields; there are no nulls.
type Document struct {
	ID     string
	Type   string
	Fields map[string]any
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
}

// Path returns "org/name", the way the API names a database.
func (d *Database) Path() string { return d.Org + "/" + d.Name }

// SystemOrg and SystemDB name the built-in system database, served at
// /api/graphql/_system.
const (
	SystemOrg = "_system"
	SystemDB  = "_system"
)

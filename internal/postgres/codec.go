package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// Each document class is a table with these two columns followed by one
// column per field. User field names cannot start with "_", so they never
// collide with them.
const (
	colID        = "_id"
	colCommitUID = "_commit_uid"
)

// schemaName returns the Postgres schema that holds database id's tables.
// It is derived from the numeric id, never from a user-chosen name.
func schemaName(dbID int64) string { return "sluice_db_" + strconv.FormatInt(dbID, 10) }

// SchemaName returns the Postgres schema that holds database d's tables,
// one table per document class named as the class: what other roles are
// granted access to (see docs/reads-and-streams.md, "Writes made in SQL").
func SchemaName(d *sluice.Database) string { return schemaName(d.ID) }

// tableName returns the quoted, schema-qualified table of a class, for
// DDL; statements that read or write a class table name it with
// classTable.
func tableName(dbID int64, class string) string {
	return pgx.Identifier{schemaName(dbID), class}.Sanitize()
}

// classTable returns the table of a class as a statement built for
// schema version d.SchemaVersion names it: tableName followed by a
// comment with the version. pgx prepares each statement text once per
// connection and keeps it, with the types of its parameters and results,
// for as long as the connection lives; a schema change alters the tables
// under those statements (a column dropped and added with another type
// keeps its name), and Postgres then refuses the kept statement ("cached
// plan must not change result type") or reads its parameters with the old
// types. With the version in the text, a statement of a new version is
// another text, prepared afresh against the tables it finds, on every
// connection of every replica.
func classTable(d *sluice.Database, class string) string {
	return tableName(d.ID, class) + " /* schema " + strconv.Itoa(d.SchemaVersion) + " */"
}

// columnType returns the Postgres type that stores a field.
func columnType(f *sluice.Field) string {
	if f.List || f.Type.Kind == sluice.TypeSubdocument {
		return "jsonb"
	}
	if f.Type.Kind != sluice.TypeScalar {
		return "text" // enums and references
	}
	switch f.Type.Name {
	case sluice.ScalarInt:
		return "integer"
	case sluice.ScalarFloat:
		return "double precision"
	case sluice.ScalarBoolean:
		return "boolean"
	case sluice.ScalarDateTime:
		return "timestamptz"
	case sluice.ScalarBigInt:
		return "numeric"
	case sluice.ScalarJSON:
		return "jsonb"
	default:
		return "text"
	}
}

// columns returns the column names of a class table, in the order rowValues
// produces values.
func columns(c *sluice.Class) []string {
	cols := make([]string, 0, len(c.Fields)+2)
	cols = append(cols, colID, colCommitUID)
	for _, f := range c.Fields {
		cols = append(cols, f.Name)
	}
	return cols
}

// rowValues returns the values of doc for the columns of its class table.
func rowValues(c *sluice.Class, doc *sluice.Document, uid int64) ([]any, error) {
	vals := make([]any, 0, len(c.Fields)+2)
	vals = append(vals, doc.ID, uid)
	for i, f := range c.Fields {
		v, ok := doc.Value(i, f.Name)
		if !ok {
			vals = append(vals, nil)
			continue
		}
		cv, err := columnValue(f, v)
		if err != nil {
			return nil, fmt.Errorf("%s: field %s: %w", doc.ID, f.Name, err)
		}
		vals = append(vals, cv)
	}
	return vals, nil
}

// columnValue converts a normalized field value to what pgx encodes into the
// field's column.
func columnValue(f *sluice.Field, v any) (any, error) {
	if columnType(f) == "jsonb" {
		if raw, ok := v.(json.RawMessage); ok {
			return raw, nil
		}
		b, err := json.Marshal(v)
		return json.RawMessage(b), err
	}
	switch f.Type.Name {
	case sluice.ScalarDateTime:
		s, _ := v.(string)
		return time.Parse(time.RFC3339Nano, s)
	case sluice.ScalarBigInt:
		s, _ := v.(string)
		n, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("bad BigInt %q", s)
		}
		return pgtype.Numeric{Int: n, Valid: true}, nil
	}
	return v, nil
}

// rowVersion returns the version of a table row read as to_jsonb(row) and
// decoded with UseNumber (its _commit_uid), "" when it has none.
func rowVersion(row map[string]any) string {
	n, ok := row[colCommitUID].(json.Number)
	if !ok {
		return ""
	}
	uid, err := n.Int64()
	if err != nil {
		return ""
	}
	return sluice.VersionOf(uid)
}

// rowToDocument converts a table row, read as to_jsonb(row) and decoded with
// UseNumber, back to the normalized document that was written. Columns that
// the current schema no longer has are ignored. A column holding a value
// its field's type cannot (a Float NaN, an infinite DateTime, a list
// element of another type, more than schema.MaxValues values: what
// Postgres stores and the API never writes, possible in rows written in
// SQL before such rows were refused) is left out of the document and named in unreadable, so that one such
// row does not fail every read of its class.
func rowToDocument(c *sluice.Class, row map[string]any) (doc *sluice.Document, unreadable []string) {
	id, _ := row[colID].(string)
	doc = &sluice.Document{ID: id, Type: c.Name, Fields: make(map[string]any, len(c.Fields))}
	for _, f := range c.Fields {
		v, ok := row[f.Name]
		if !ok || v == nil {
			continue
		}
		nv, err := fromColumn(f, v)
		if err != nil {
			unreadable = append(unreadable, f.Name)
			continue
		}
		doc.Fields[f.Name] = nv
	}
	return doc, unreadable
}

// fromColumn returns the normalized value of field f from v, its column's
// value as to_jsonb gives it, or an error when v is not a value of f's
// type the API could have written.
func fromColumn(f *sluice.Field, v any) (any, error) {
	if _, ok := v.(tooManyValues); ok {
		return nil, errTooManyValues
	}
	if columnType(f) == "jsonb" {
		if f.Type.Kind == sluice.TypeScalar && f.Type.Name == sluice.ScalarJSON && !f.List {
			b, err := json.Marshal(v)
			return json.RawMessage(b), err
		}
		return normalizeJSON(f, v)
	}
	switch f.Type.Name {
	case sluice.ScalarInt:
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("not a number")
		}
		return n.Int64()
	case sluice.ScalarFloat:
		n, ok := v.(json.Number) // NaN and the infinities are strings
		if !ok {
			return nil, fmt.Errorf("not a finite number")
		}
		return floatValue(n)
	case sluice.ScalarDateTime:
		s, _ := v.(string)
		return dateTimeValue(s)
	case sluice.ScalarBigInt:
		n, ok := v.(json.Number)
		if !ok || !isInteger(string(n)) {
			return nil, fmt.Errorf("not a whole number")
		}
		return n.String(), nil
	}
	return v, nil
}

// dateTimeValue returns the normalized form of s, a timestamptz's text as
// to_jsonb gives it, or an error for a time the API cannot write: infinite,
// or outside years 1 to 9999 in UTC (which Postgres writes with a five
// digit year or "BC", and time.Parse refuses).
func dateTimeValue(s string) (string, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return "", err
	}
	return checkedTime(t)
}

// checkedTime returns t in the normalized DateTime form, or an error when
// it is outside years 1 to 9999 in UTC.
func checkedTime(t time.Time) (string, error) {
	t = t.UTC()
	if t.Year() < 1 || t.Year() > 9999 {
		return "", fmt.Errorf("a time outside years 1 to 9999")
	}
	return t.Format(time.RFC3339Nano), nil
}

// isInteger reports whether s is an optional minus and decimal digits.
func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// normalizeJSON turns a list or subdocument value read back from jsonb into
// the normalized form: json.Number becomes int64 or float64 by the element
// type, nested JSON scalars become json.RawMessage.
func normalizeJSON(f *sluice.Field, v any) (any, error) {
	if f.List {
		items, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("not a list")
		}
		elem := *f
		elem.List = false
		out := make([]any, len(items))
		for i, it := range items {
			nv, err := normalizeElem(&elem, it)
			if err != nil {
				return nil, err
			}
			out[i] = nv
		}
		return out, nil
	}
	return normalizeElem(f, v)
}

func normalizeElem(f *sluice.Field, v any) (any, error) {
	if v == nil {
		return nil, fmt.Errorf("a null element")
	}
	switch f.Type.Kind {
	case sluice.TypeSubdocument:
		// Subdocument fields are re-normalized by type when read through a
		// schema (see DocumentJSON); numbers stay json.Number here, which
		// marshals to the same text.
		if _, ok := v.(map[string]any); !ok {
			return nil, fmt.Errorf("not an object")
		}
		return v, nil
	case sluice.TypeEnum, sluice.TypeReference:
		if _, ok := v.(string); !ok {
			return nil, fmt.Errorf("not a string")
		}
		return v, nil
	case sluice.TypeScalar:
		switch f.Type.Name {
		case sluice.ScalarJSON:
			b, err := json.Marshal(v)
			return json.RawMessage(b), err
		case sluice.ScalarInt:
			if n, ok := v.(json.Number); ok {
				return strconv.ParseInt(string(n), 10, 32)
			}
			return nil, fmt.Errorf("not an Int")
		case sluice.ScalarFloat:
			if n, ok := v.(json.Number); ok {
				return floatValue(n)
			}
			return nil, fmt.Errorf("not a number")
		case sluice.ScalarBoolean:
			if _, ok := v.(bool); !ok {
				return nil, fmt.Errorf("not a boolean")
			}
		case sluice.ScalarDateTime:
			if s, ok := v.(string); ok {
				return dateTimeValue(s)
			}
			return nil, fmt.Errorf("not a DateTime")
		case sluice.ScalarBigInt:
			// Written as a string of digits; a whole JSON number reads too.
			if s, ok := v.(string); ok && isInteger(s) {
				return s, nil
			}
			if n, ok := v.(json.Number); ok && isInteger(string(n)) {
				return n.String(), nil
			}
			return nil, fmt.Errorf("not a whole number")
		case sluice.ScalarString, sluice.ScalarID:
			if _, ok := v.(string); !ok {
				return nil, fmt.Errorf("not a string")
			}
		}
	}
	return v, nil
}

// DocumentJSON returns doc in its API form: "@id", "@type", "@version"
// (when doc.Version is set: a document read from its table, never a change
// image), then the fields in the class's field order. The output is
// deterministic, so the same document always has the same bytes.
func DocumentJSON(c *sluice.Class, doc *sluice.Document) ([]byte, error) {
	present := len(doc.Fields)
	for _, v := range doc.Values {
		if v != nil {
			present++
		}
	}
	buf := make([]byte, 0, 64+16*present)
	buf = append(buf, `{"@id":`...)
	buf = appendJSONString(buf, doc.ID)
	buf = append(buf, `,"@type":`...)
	buf = appendJSONString(buf, doc.Type)
	if doc.Version != "" {
		buf = append(buf, `,"@version":`...)
		buf = appendJSONString(buf, doc.Version)
	}
	for i, f := range c.Fields {
		v, ok := doc.Value(i, f.Name)
		if !ok {
			continue
		}
		buf = append(buf, ',')
		buf = appendJSONString(buf, f.Name)
		buf = append(buf, ':')
		var err error
		if buf, err = appendJSONValue(buf, v); err != nil {
			return nil, fmt.Errorf("encode %s.%s: %w", doc.ID, f.Name, err)
		}
	}
	buf = append(buf, '}')
	return buf, nil
}

// appendJSONValue appends v as encoding/json would encode it, writing the
// common scalars directly: this runs for every field of every document
// written.
func appendJSONValue(buf []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendJSONString(buf, v), nil
	case json.Number:
		if v != "" {
			return append(buf, v...), nil
		}
	case bool:
		return strconv.AppendBool(buf, v), nil
	case int64:
		return strconv.AppendInt(buf, v, 10), nil
	case float64:
		// encoding/json writes this range in 'f' format, shortest
		// representation; outside it, it uses exponents of its own style.
		if a := math.Abs(v); a == 0 || 1e-6 <= a && a < 1e21 {
			return strconv.AppendFloat(buf, v, 'f', -1, 64), nil
		}
	}
	b, err := json.Marshal(v)
	return append(buf, b...), err
}

// appendJSONString appends s quoted, byte for byte as encoding/json does:
// strings with nothing to escape (the usual case) are copied, others go
// through encoding/json (which also escapes <, > and & for HTML).
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// unreadable logs, when fields is not empty, that document id of database
// d holds values of those fields that their types cannot hold, which were
// left out of what was read (see rowToDocument).
func (db *DB) unreadable(d *sluice.Database, id string, fields []string) {
	if len(fields) > 0 {
		db.logger.Warn("a document holds values its fields' types cannot hold; they are left out of what is read",
			"database", d.Path(), "document", id, "fields", fields)
	}
}

// decodeRow decodes to_jsonb(row) text keeping numbers exact. A column
// holding more than schema.MaxValues values is not decoded: it is
// tooManyValues, which no field reads (a row written in SQL before
// migration 28 can hold millions, and decoding builds a value for each).
func decodeRow(b []byte) (map[string]any, error) {
	// Each value takes a byte at least: a smaller row has no such column.
	if len(b) <= schema.MaxValues {
		var m map[string]any
		return m, decodeExact(b, &m)
	}
	var cols map[string]json.RawMessage
	if err := json.Unmarshal(b, &cols); err != nil {
		return nil, err
	}
	m := make(map[string]any, len(cols))
	for name, raw := range cols {
		if schema.CountJSONValues(raw) > schema.MaxValues {
			m[name] = tooManyValues{}
			continue
		}
		var v any
		if err := decodeExact(raw, &v); err != nil {
			return nil, err
		}
		m[name] = v
	}
	return m, nil
}

// tooManyValues stands for a column of more than schema.MaxValues values,
// left undecoded.
type tooManyValues struct{}

var errTooManyValues = fmt.Errorf("more than %d values", schema.MaxValues)

// floatValue returns the Float n, 0 for -0 (see unsigned).
func floatValue(n json.Number) (any, error) {
	x, err := n.Float64()
	if err != nil {
		return nil, err
	}
	return unsigned(x), nil
}

// unsigned returns x, or 0 for -0: the API writes -0.0 as 0.0, and
// to_jsonb (which reads rows) gives 0 of a float8 -0 written in SQL, but
// row_to_json (which the capture triggers record rows with) and the
// float8 itself give -0, which the log and GraphQL then showed of a
// document every REST read said 0 of.
func unsigned(x float64) float64 {
	if x == 0 {
		return 0
	}
	return x
}

// decodeExact decodes b into v keeping numbers exact.
func decodeExact(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// rowImage returns the document image (DocumentJSON) of a table row of
// class c read as row_to_json, as the capture triggers record rows written
// through SQL. A field whose value the class's type cannot hold (see
// rowToDocument) is left out and named in dropped, rather than failing the
// commit's delivery.
func rowImage(c *sluice.Class, raw []byte) (img []byte, dropped []string, err error) {
	d, err := transcodeRow(c, raw, false)
	if err != nil {
		return nil, nil, err
	}
	return d.JSON, d.Unreadable, nil
}

package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluice-dev/sluice"
)

// A large insert's rows are encoded in COPY's binary format by the goroutine
// that validates them (InsertEncoder), so that the Writer's goroutine only
// sends bytes. The common column types (text, integer, double precision,
// boolean) are written here directly; the others go through pgx's encoders, as
// pgx's CopyFrom would (FuzzAppendCopyRow checks both give its bytes). On two
// cores shared with Postgres, all the CPU a write spends counts against its
// throughput: this takes half the time of going from documents to []any rows
// and through pgx's per-value encode plans (BenchmarkCopyRows;
// docs/benchmarks.md, "Measured choices in the code"), and pgx's COPY goroutine
// and pipe no longer run.

// copyHeader starts a binary COPY stream: its signature, flags and header
// extension length (both zero).
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// copyTrailer ends a binary COPY stream.
var copyTrailer = []byte{0xff, 0xff}

// typeMaps holds pgtype Maps for encoding the less common column types. A
// Map caches encode plans and must not be used concurrently; building one
// costs more than encoding a chunk of rows.
type typeMaps struct{ pool sync.Pool }

func (t *typeMaps) get() *pgtype.Map {
	if m, ok := t.pool.Get().(*pgtype.Map); ok {
		return m
	}
	return pgtype.NewMap()
}

func (t *typeMaps) put(m *pgtype.Map) { t.pool.Put(m) }

// columnOID returns the type OID of a field's column (see columnType).
func columnOID(f *sluice.Field) uint32 {
	switch columnType(f) {
	case "jsonb":
		return pgtype.JSONBOID
	case "integer":
		return pgtype.Int4OID
	case "double precision":
		return pgtype.Float8OID
	case "boolean":
		return pgtype.BoolOID
	case "timestamptz":
		return pgtype.TimestamptzOID
	case "numeric":
		return pgtype.NumericOID
	default:
		return pgtype.TextOID
	}
}

// InsertEncoder returns a function that encodes validated documents for
// this Writer's InsertRows, as EncodeRows does, and, when they are at
// least copyThreshold documents of one class, their table rows in COPY's
// binary format (with the Writer's commit uid). It may run on another
// goroutine than the Writer's.
func (w *Writer) InsertEncoder() func([]*sluice.Document) (*Rows, error) {
	s, uid, maps := w.schema, w.uid, &w.t.db.maps
	return func(docs []*sluice.Document) (*Rows, error) {
		if len(docs) < copyThreshold || !oneClass(docs) {
			return EncodeRows(s, docs)
		}
		c := s.Classes[docs[0].Type]
		r := &Rows{docs: docs, after: make([][]byte, len(docs)), class: c.Name}
		m := maps.get()
		defer maps.put(m)
		buf := append(make([]byte, 0, 128*len(docs)), copyHeader...)
		for i, doc := range docs {
			var err error
			if r.after[i], err = DocumentJSON(c, doc); err != nil {
				return nil, err
			}
			if buf, err = appendCopyRow(buf, c, doc, uid, m); err != nil {
				return nil, err
			}
		}
		r.copy = append(buf, copyTrailer...)
		return r, nil
	}
}

func oneClass(docs []*sluice.Document) bool {
	for _, d := range docs[1:] {
		if d.Type != docs[0].Type {
			return false
		}
	}
	return true
}

// appendCopyRow appends doc's table row (see rowValues) in COPY's binary
// format.
func appendCopyRow(buf []byte, c *sluice.Class, doc *sluice.Document, uid int64, m *pgtype.Map) ([]byte, error) {
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(c.Fields)+2))
	buf = appendCopyText(buf, doc.ID)
	buf = binary.BigEndian.AppendUint32(buf, 8)
	buf = binary.BigEndian.AppendUint64(buf, uint64(uid))
	for i, f := range c.Fields {
		v, ok := doc.Value(i, f.Name)
		if !ok {
			buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // NULL
			continue
		}
		var err error
		if buf, err = appendCopyValue(buf, f, v, m); err != nil {
			return nil, fmt.Errorf("%s: field %s: %w", doc.ID, f.Name, err)
		}
	}
	return buf, nil
}

// appendCopyValue appends one field's value, in the binary format of its
// column, preceded by its length.
func appendCopyValue(buf []byte, f *sluice.Field, v any, m *pgtype.Map) ([]byte, error) {
	switch columnType(f) {
	case "text":
		if s, ok := v.(string); ok {
			return appendCopyText(buf, s), nil
		}
	case "integer":
		if n, ok := v.(int64); ok && n >= math.MinInt32 && n <= math.MaxInt32 {
			buf = binary.BigEndian.AppendUint32(buf, 4)
			return binary.BigEndian.AppendUint32(buf, uint32(int32(n))), nil
		}
	case "double precision":
		if x, ok := v.(float64); ok {
			buf = binary.BigEndian.AppendUint32(buf, 8)
			return binary.BigEndian.AppendUint64(buf, math.Float64bits(x)), nil
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			buf = binary.BigEndian.AppendUint32(buf, 1)
			if b {
				return append(buf, 1), nil
			}
			return append(buf, 0), nil
		}
	}
	// Anything else is encoded by pgx, as CopyFrom would.
	cv, err := columnValue(f, v)
	if err != nil {
		return nil, err
	}
	return appendPgxValue(buf, m, columnOID(f), cv)
}

// appendPgxValue appends v, encoded by pgx for the type oid, preceded by
// its length (-1 for a NULL), as pgx's CopyFrom does.
func appendPgxValue(buf []byte, m *pgtype.Map, oid uint32, v any) ([]byte, error) {
	at := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32)
	out, err := m.Encode(oid, pgtype.BinaryFormatCode, v, buf)
	if err != nil || out == nil { // out nil: pgx encoded a NULL
		return buf, err
	}
	binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	return out, nil
}

func appendCopyText(buf []byte, s string) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
	return append(buf, s...)
}

// copyRows writes r's rows, encoded by InsertEncoder (a whole COPY
// stream: header, rows, trailer), with one COPY.
func (w *Writer) copyRows(ctx context.Context, r *Rows) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	return insertError(w.copyStream(ctx, classTable(w.d, r.class), w.schema.Classes[r.class], r.copy))
}

// copyDocs writes the table rows of docs, all of class c, into table (a
// class table, or a temporary one like it) with one COPY, encoded here
// from the schema's column types. pgx's CopyFrom would ask Postgres for
// the table's column types once per connection and keep them, past a
// schema change that gives a column another type (see classTable).
func (w *Writer) copyDocs(ctx context.Context, table string, c *sluice.Class, docs []*sluice.Document) error {
	m := w.t.db.maps.get()
	defer w.t.db.maps.put(m)
	buf := append(make([]byte, 0, 128*len(docs)), copyHeader...)
	for _, doc := range docs {
		var err error
		if buf, err = appendCopyRow(buf, c, doc, w.uid, m); err != nil {
			return err
		}
	}
	return w.copyStream(ctx, table, c, append(buf, copyTrailer...))
}

// copyStream sends stream, the rows of class c in COPY's binary format,
// to table.
func (w *Writer) copyStream(ctx context.Context, table string, c *sluice.Class, stream []byte) error {
	cols := columns(c)
	for i, col := range cols {
		cols[i] = pgx.Identifier{col}.Sanitize()
	}
	sql := fmt.Sprintf("COPY %s (%s) FROM STDIN BINARY", table, strings.Join(cols, ", "))
	return w.t.tx.copyStream(ctx, bytes.NewReader(stream), sql)
}

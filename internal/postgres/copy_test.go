package postgres

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// copySDL has a field of every column type appendCopyValue handles.
const copySDL = `
enum Color { RED GREEN }
type Address @subdocument { city: String! }
type Thing {
	s: String
	i: Int
	f: Float
	b: Boolean
	id: ID
	at: DateTime
	big: BigInt
	js: JSON
	color: Color
	other: Thing
	tags: [String!]
	addr: Address
}`

// pgxCopyValue encodes v through pgx's encoders, as pgx's CopyFrom does
// (its encodeCopyValue): appendCopyValue's direct encodings must match
// byte for byte.
func pgxCopyValue(t *testing.T, m *pgtype.Map, f *sluice.Field, v any) []byte {
	t.Helper()
	cv, err := columnValue(f, v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := appendPgxValue(nil, m, columnOID(f), cv)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzAppendCopyRow validates a document built from the fuzzed values and
// checks that every field's COPY encoding, direct or through pgx's
// encoders, is what pgx's CopyFrom sends for the same row.
func FuzzAppendCopyRow(f *testing.F) {
	s, err := schema.Parse(copySDL)
	if err != nil {
		f.Fatal(err)
	}
	c := s.Classes["Thing"]
	f.Add("plain", int64(7), 1.5, true, "2024-02-29T12:00:00.123456+02:00", "123456789012345678901234567890")
	f.Add("é\u2028", int64(math.MinInt32), math.Copysign(0, -1), false, "1970-01-01T00:00:00Z", "-1")
	f.Add("", int64(math.MaxInt32), 1e300, true, "9999-12-31T23:59:59.999999Z", "0")
	f.Add("x", int64(0), 5e-324, false, "2000-01-01T00:00:00Z", "99")
	f.Fuzz(func(t *testing.T, str string, i int64, x float64, b bool, at, big string) {
		doc := map[string]any{
			"@type": "Thing", "@id": "Thing/k",
			"s": str, "i": json.Number(jsonNumber(i)), "f": json.Number(jsonFloat(x)), "b": b,
			"id": "Thing/" + str, "at": at, "big": big, "js": map[string]any{"k": str},
			"color": "GREEN", "other": "Thing/o", "tags": []any{str, "t"}, "addr": map[string]any{"city": str},
		}
		d, err := schema.ValidateDocument(s, doc)
		if err != nil {
			t.Skip() // not a valid document: never encoded
		}
		m := pgtype.NewMap()
		for _, field := range c.Fields {
			v, ok := d.Fields[field.Name]
			if !ok {
				continue
			}
			got, err := appendCopyValue(nil, field, v, m)
			if err != nil {
				t.Fatalf("%s: %v", field.Name, err)
			}
			if want := pgxCopyValue(t, m, field, v); !bytes.Equal(got, want) {
				t.Fatalf("%s = %#v: got %x, want %x", field.Name, v, got, want)
			}
		}
		row, err := appendCopyRow(nil, c, d, 42, m)
		if err != nil {
			t.Fatal(err)
		}
		if n := binary.BigEndian.Uint16(row); int(n) != len(c.Fields)+2 {
			t.Fatalf("row has %d columns, want %d", n, len(c.Fields)+2)
		}
	})
}

func jsonNumber(i int64) string { b, _ := json.Marshal(i); return string(b) }

func jsonFloat(x float64) string {
	b, err := json.Marshal(x)
	if err != nil {
		return "0"
	}
	return string(b)
}

// BenchmarkCopyRows compares encoding 1,000 flat documents for COPY the way
// pgx's CopyFrom does (rowValues, then pgx's encoder for every value) with
// appendCopyRow.
func BenchmarkCopyRows(b *testing.B) {
	s, err := schema.Parse(`type Person { name: String! email: String! age: Int score: Float active: Boolean }`)
	if err != nil {
		b.Fatal(err)
	}
	c := s.Classes["Person"]
	docs := make([]*sluice.Document, 1000)
	for i := range docs {
		docs[i] = &sluice.Document{ID: "Person/p" + jsonNumber(int64(i)), Type: "Person", Fields: map[string]any{
			"name": "Person " + jsonNumber(int64(i)), "email": "p@example.com", "age": int64(i % 90), "score": float64(i) + 0.5, "active": true,
		}}
	}
	oids := []uint32{pgtype.TextOID, pgtype.Int8OID}
	for _, f := range c.Fields {
		oids = append(oids, columnOID(f))
	}
	m := pgtype.NewMap()
	b.Run("pgx", func(b *testing.B) {
		for b.Loop() {
			var buf []byte
			for _, doc := range docs {
				vals, err := rowValues(c, doc, 42)
				if err != nil {
					b.Fatal(err)
				}
				buf = binary.BigEndian.AppendUint16(buf, uint16(len(vals)))
				for i, v := range vals {
					if buf, err = appendPgxValue(buf, m, oids[i], v); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			var buf []byte
			for _, doc := range docs {
				if buf, err = appendCopyRow(buf, c, doc, 42, m); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

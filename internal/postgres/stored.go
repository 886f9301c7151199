package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// StoredValues names what of one class table a schema change reads to
// check or rewrite the values it keeps (RewriteStored): the columns, and
// which rows.
type StoredValues struct {
	Class string
	// Fields are the fields whose columns are read.
	Fields []*sluice.Field
	// Every reads every row. Otherwise only the rows whose column of one
	// of Held holds a value, or whose column of one of Lacking holds none,
	// are read: the others cannot be affected.
	Every         bool
	Held, Lacking []string
}

// RewriteStored reads at most storedPage rows at a time, and of those at
// most storedBytes of text (of the columns it reads) at a time, a single
// larger row alone: so what it holds is bounded whatever the class holds.
// A bound on rows alone held a thousand rows of any size at once, and a
// row is as large as whoever wrote it made it (another Postgres role may
// write the tables; a column holds up to a gigabyte).
const (
	storedPage  = 1000
	storedBytes = 4 << 20
)

// RewriteStored calls fn with each row of s.Class's table that s names,
// in id order: its id and the values of s.Fields' columns that are not
// null, as JSON decoded with numbers kept as json.Number. fn returns the
// new values of the columns it changes (nil writes NULL), which are
// written in place: the row keeps its version, and the change is no
// change of the log (a schema change's consequence, as a column it drops
// is). Call it in a read-only Tx (Inspect) with an fn that changes
// nothing to read alone.
//
// A row whose columns read hold more than schema.MaxValues values in all
// (written in SQL before migration 28 refused such rows, or by a role
// that bypasses its check) is not decoded: decoding builds a value for
// each, hundreds of MB from a row of a few MB. RewriteStored then fails
// with a Conflict naming the class, the document and its fields, so that
// the schema change, one transaction, changes nothing: skipping the row
// would leave it unchecked by the new schema, and dropping its values
// would lose data no one asked to drop.
//
// Its caller holds the tables (a schema change locks them) or reads them
// in one snapshot (Inspect): the rows it measures (storedSizes) are the
// rows it then reads.
func (t *Tx) RewriteStored(ctx context.Context, d *sluice.Database, s StoredValues, fn func(id string, row map[string]any) (map[string]any, error)) error {
	cols := make([]string, 0, len(s.Fields)+1)
	cols = append(cols, colID)
	// Summed as bigint: columns of a gigabyte each overflow an integer.
	lens := []string{"0::bigint"}
	for _, f := range s.Fields {
		text := "to_jsonb(" + ident(f.Name) + ")::text"
		cols = append(cols, text)
		lens = append(lens, "coalesce(octet_length("+text+"), 0)::bigint")
	}
	cond := "true"
	if !s.Every {
		var or []string
		for _, name := range s.Held {
			or = append(or, ident(name)+" IS NOT NULL")
		}
		for _, name := range s.Lacking {
			or = append(or, ident(name)+" IS NULL")
		}
		cond = "(" + strings.Join(append(or, "false"), " OR ") + ")"
	}
	tbl := classTable(d, s.Class)
	measure := fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s > $1 AND %s ORDER BY %s LIMIT %d",
		colID, strings.Join(lens, " + "), tbl, colID, cond, colID, storedPage)
	read := fmt.Sprintf("SELECT %s FROM %s WHERE %s > $1 AND %s <= $2 AND %s ORDER BY %s",
		strings.Join(cols, ", "), tbl, colID, colID, cond, colID)
	after := ""
	for {
		// Postgres sends every row a statement selects, and pgx reads
		// them all even to discard them: a read cannot stop once it has
		// enough. So Postgres measures a page's rows first (their text
		// made twice, the price of the bound), and each read asks for
		// the rows that fit.
		page, err := t.storedSizes(ctx, measure, after)
		if err != nil {
			return err
		}
		for rest := page; len(rest) > 0; {
			n, total := 1, rest[0].bytes
			for n < len(rest) && total+rest[n].bytes <= storedBytes {
				total += rest[n].bytes
				n++
			}
			last := rest[n-1].id
			if err := t.rewriteStoredRows(ctx, d, s, read, after, last, fn); err != nil {
				return err
			}
			after, rest = last, rest[n:]
		}
		if len(page) < storedPage {
			return nil
		}
	}
}

// storedSize is a row's id and the bytes of the text of the columns
// RewriteStored reads.
type storedSize struct {
	id    string
	bytes int64
}

// storedSizes runs measure, RewriteStored's, for the rows after id after.
func (t *Tx) storedSizes(ctx context.Context, measure, after string) ([]storedSize, error) {
	rows, err := t.tx.Query(ctx, measure, after)
	if err != nil {
		return nil, mapError(err)
	}
	page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (storedSize, error) {
		var x storedSize
		return x, r.Scan(&x.id, &x.bytes)
	})
	return page, mapError(err)
}

// rewriteStoredRows is RewriteStored for its rows with ids after after,
// up to last, read by read.
func (t *Tx) rewriteStoredRows(ctx context.Context, d *sluice.Database, s StoredValues, read, after, last string, fn func(id string, row map[string]any) (map[string]any, error)) error {
	type row struct {
		id   string
		vals [][]byte // nil: NULL
	}
	rows, err := t.tx.Query(ctx, read, after, last)
	if err != nil {
		return mapError(err)
	}
	page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		x := row{vals: make([][]byte, len(s.Fields))}
		dest := []any{&x.id}
		for i := range x.vals {
			dest = append(dest, &x.vals[i])
		}
		return x, r.Scan(dest...)
	})
	if err != nil {
		return mapError(err)
	}
	if hook := t.db.opts.storedRead; hook != nil {
		held := 0
		for _, r := range page {
			for _, v := range r.vals {
				held += len(v)
			}
		}
		hook(len(page), held)
	}
	// The new values of each column, by row.
	ids := make([][]string, len(s.Fields))
	vals := make([][]*string, len(s.Fields))
	for _, r := range page {
		if err := checkStoredValues(s, r.id, r.vals); err != nil {
			return err
		}
		doc := make(map[string]any, len(s.Fields))
		for i, v := range r.vals {
			if v == nil {
				continue
			}
			var x any
			if err := decodeExact(v, &x); err != nil {
				return fmt.Errorf("read %s.%s of %s: %w", s.Class, s.Fields[i].Name, r.id, err)
			}
			doc[s.Fields[i].Name] = x
		}
		set, err := fn(r.id, doc)
		if err != nil {
			return err
		}
		for i, f := range s.Fields {
			v, ok := set[f.Name]
			if !ok {
				continue
			}
			var text *string
			if v != nil {
				b, err := json.Marshal(v)
				if err != nil {
					return fmt.Errorf("encode %s.%s of %s: %w", s.Class, f.Name, r.id, err)
				}
				js := string(b)
				text = &js
			}
			ids[i] = append(ids[i], r.id)
			vals[i] = append(vals[i], text)
		}
	}
	for i, f := range s.Fields {
		if len(ids[i]) == 0 {
			continue
		}
		// A text column (a reference) takes the JSON string's text.
		val := "v.val::jsonb"
		if columnType(f) != "jsonb" {
			val = "v.val::jsonb #>> '{}'"
		}
		if _, err := t.tx.Exec(ctx, fmt.Sprintf("UPDATE %s AS t SET %s = %s FROM unnest($1::text[], $2::text[]) AS v(id, val) WHERE t.%s = v.id",
			classTable(d, s.Class), ident(f.Name), val, colID), ids[i], vals[i]); err != nil {
			return mapError(err)
		}
	}
	return nil
}

// checkStoredValues returns the Conflict of RewriteStored when vals, the
// columns it read of document id, hold more than schema.MaxValues values
// in all (as the API counts a document's fields): the most a document
// may hold, so that a document the API or a checked SQL write made is
// never refused.
func checkStoredValues(s StoredValues, id string, vals [][]byte) error {
	size := 0
	for _, v := range vals {
		size += len(v)
	}
	// Each value takes a byte at least: fewer bytes hold fewer values,
	// and need no count.
	if size <= schema.MaxValues {
		return nil
	}
	n := 0
	var fields []string
	for i, v := range vals {
		if v != nil {
			n += schema.CountJSONValues(v)
			fields = append(fields, s.Fields[i].Name)
		}
	}
	if n <= schema.MaxValues {
		return nil
	}
	what := "field " + fields[0]
	if len(fields) > 1 {
		what = "fields " + strings.Join(fields, ", ")
	}
	return sluice.Errorf(sluice.CodeConflict, "cannot change the schema: document %s of class %s holds %d values in %s, more than %d, the most a document may (written in SQL past that bound), which a schema change does not read: change or delete the document first",
		id, s.Class, n, what, schema.MaxValues)
}

package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
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

// storedPage is how many rows RewriteStored reads at a time, so that what
// it holds is bounded whatever the class holds.
const storedPage = 1000

// RewriteStored calls fn with each row of s.Class's table that s names,
// in id order: its id and the values of s.Fields' columns that are not
// null, as JSON decoded with numbers kept as json.Number. fn returns the
// new values of the columns it changes (nil writes NULL), which are
// written in place: the row keeps its version, and the change is no
// change of the log (a schema change's consequence, as a column it drops
// is). Call it in a read-only Tx (Inspect) with an fn that changes
// nothing to read alone.
func (t *Tx) RewriteStored(ctx context.Context, d *sluice.Database, s StoredValues, fn func(id string, row map[string]any) (map[string]any, error)) error {
	cols := make([]string, 0, len(s.Fields)+1)
	cols = append(cols, colID)
	for _, f := range s.Fields {
		cols = append(cols, "to_jsonb("+ident(f.Name)+")::text")
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
	query := fmt.Sprintf("SELECT %s FROM %s WHERE %s > $1 AND %s ORDER BY %s LIMIT %d", strings.Join(cols, ", "), tbl, colID, cond, colID, storedPage)
	type row struct {
		id   string
		vals []*string
	}
	after := ""
	for {
		rows, err := t.tx.Query(ctx, query, after)
		if err != nil {
			return mapError(err)
		}
		page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			x := row{vals: make([]*string, len(s.Fields))}
			dest := []any{&x.id}
			for i := range x.vals {
				dest = append(dest, &x.vals[i])
			}
			return x, r.Scan(dest...)
		})
		if err != nil {
			return mapError(err)
		}
		// The new values of each column, by row.
		ids := make([][]string, len(s.Fields))
		vals := make([][]*string, len(s.Fields))
		for _, r := range page {
			doc := make(map[string]any, len(s.Fields))
			for i, v := range r.vals {
				if v == nil {
					continue
				}
				if doc[s.Fields[i].Name], err = decodeJSON(*v); err != nil {
					return fmt.Errorf("read %s.%s of %s: %w", s.Class, s.Fields[i].Name, r.id, err)
				}
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
				tbl, ident(f.Name), val, colID), ids[i], vals[i]); err != nil {
				return mapError(err)
			}
		}
		if len(page) < storedPage {
			return nil
		}
		after = page[len(page)-1].id
	}
}

// decodeJSON decodes s keeping numbers exact (json.Number), so that a
// value written back is the value read.
func decodeJSON(s string) (any, error) {
	var v any
	err := decodeExact([]byte(s), &v)
	return v, err
}

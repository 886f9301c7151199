package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// StoredValues names what of one class table a schema change reads to
// check the values it keeps (ReadStored): the columns, and which rows.
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

// storedPage is how many rows ReadStored reads at a time, so that what
// it holds is bounded whatever the class holds.
const storedPage = 1000

// ReadStored calls fn with each row of s.Class's table that s names, in
// id order: its id and the values of s.Fields' columns that are not null,
// as JSON decoded with numbers kept as json.Number.
func (t *Tx) ReadStored(ctx context.Context, d *sluice.Database, s StoredValues, fn func(id string, row map[string]any) error) error {
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
			if err := fn(r.id, doc); err != nil {
				return err
			}
		}
		if len(page) < storedPage {
			return nil
		}
		after = page[len(page)-1].id
	}
}

// decodeJSON decodes s keeping numbers exact (json.Number).
func decodeJSON(s string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// syncTables makes database dbID's tables match schema next, given that they
// match prev (nil for a new database). Document classes get a table each;
// fields a typed column each. A field whose column type, list-ness or element
// type changed is dropped and re-added (its values are lost: the engine only
// gets here for such a change with force). Removed classes and fields are
// dropped. Every table then gets the capture triggers of next (capture.go);
// role is Sluice's own.
func syncTables(ctx context.Context, q querier, dbID int64, role string, prev, next *sluice.Schema) error {
	var stmts []string
	for _, name := range next.Order {
		c := next.Classes[name]
		if c.Kind != sluice.KindDocument {
			continue
		}
		old := prev.Class(name)
		if old == nil || old.Kind != sluice.KindDocument {
			stmts = append(stmts, createTableSQL(dbID, c))
			continue
		}
		tbl := tableName(dbID, name)
		for _, f := range c.Fields {
			of := old.Field(f.Name)
			col := pgx.Identifier{f.Name}.Sanitize()
			switch {
			case of == nil:
				stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", tbl, col, columnType(f)))
			case of.Type != f.Type || of.List != f.List:
				stmts = append(stmts,
					fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", tbl, col),
					fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", tbl, col, columnType(f)))
			}
		}
		for _, of := range old.Fields {
			if c.Field(of.Name) == nil {
				stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", tbl, pgx.Identifier{of.Name}.Sanitize()))
			}
		}
	}
	if prev != nil {
		for _, name := range prev.Order {
			if prev.Classes[name].Kind != sluice.KindDocument {
				continue
			}
			if c := next.Class(name); c == nil || c.Kind != sluice.KindDocument {
				stmts = append(stmts, "DROP TABLE "+tableName(dbID, name))
			}
		}
	}
	for _, s := range stmts {
		if _, err := q.Exec(ctx, s); err != nil {
			return fmt.Errorf("schema change %q: %w", s, err)
		}
	}
	return syncCapture(ctx, q, dbID, role, next)
}

func createTableSQL(dbID int64, c *sluice.Class) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (%s text PRIMARY KEY, %s bigint NOT NULL", tableName(dbID, c.Name), colID, colCommitUID)
	for _, f := range c.Fields {
		fmt.Fprintf(&b, ", %s %s", pgx.Identifier{f.Name}.Sanitize(), columnType(f))
	}
	b.WriteString(")")
	return b.String()
}

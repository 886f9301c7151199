package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// syncTables makes database dbID's tables match schema next, given that they
// match prev (nil for a new database). Document classes get a table each;
// fields a typed column each. A field whose column type, list-ness or element
// type changed is dropped and re-added (its values are lost: the engine only
// gets here for such a change with force). Removed classes and fields are
// dropped. Each document class's table has one index per entry of its
// Indexes (see indexSQL); indexes no longer declared are dropped. Each
// reference field's column has an index that serves backlinks
// (refIndexSQL), which goes with the column. Every
// table then gets the capture triggers of next (capture.go); role is
// Sluice's own.
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
			for _, ix := range c.Indexes {
				stmts = append(stmts, indexSQL(dbID, c, ix))
			}
			for _, f := range refIndexed(c) {
				stmts = append(stmts, refIndexSQL(dbID, c, f, false))
			}
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
		for _, ix := range old.Indexes {
			if !hasIndex(c.Indexes, ix) {
				stmts = append(stmts, "DROP INDEX IF EXISTS "+pgx.Identifier{schemaName(dbID), indexName(name, ix)}.Sanitize())
			}
		}
		// IF NOT EXISTS: an index already there is kept; one whose column
		// was just dropped and re-added (a changed type) went with the
		// column and is built again.
		for _, ix := range c.Indexes {
			stmts = append(stmts, indexSQL(dbID, c, ix))
		}
		// Likewise the backlink indexes: a reference field added, or
		// whose column was re-added, gets its index; so does a table
		// made before Sluice made them (and not yet reached by
		// BuildReferenceIndexes).
		for _, f := range refIndexed(c) {
			stmts = append(stmts, refIndexSQL(dbID, c, f, false))
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

// createTableSQL returns the CREATE TABLE statement of document class c.
// The id is declared with the "C" collation, the byte order every listing
// and query sorts ids by (whatever the server's locale), so that the
// primary key's index serves that order; see migration 8 for tables
// created before.
func createTableSQL(dbID int64, c *sluice.Class) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (%s text COLLATE \"C\" PRIMARY KEY, %s bigint NOT NULL", tableName(dbID, c.Name), colID, colCommitUID)
	for _, f := range c.Fields {
		fmt.Fprintf(&b, ", %s %s", pgx.Identifier{f.Name}.Sanitize(), columnType(f))
	}
	b.WriteString(")")
	return b.String()
}

// indexSQL returns the statement creating index ix of document class c's
// table, unless it exists: a btree on the index's fields, then the id.
// Text columns (String, ID, enums, references) are indexed in the "C"
// collation, the byte order that queries compare and sort them by (see
// sortKey and compare in query_filter.go), which also serves startsWith as
// a range. The id last makes every index a total order, so an orderBy on
// its fields (the id is always the last key) reads just the page.
func indexSQL(dbID int64, c *sluice.Class, ix sluice.Index) string {
	keys := make([]string, 0, len(ix.Fields)+1)
	for _, name := range ix.Fields {
		keys = append(keys, collated(c.Field(name), ident(name)))
	}
	keys = append(keys, colID+` COLLATE "C"`)
	return fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)",
		ident(indexName(c.Name, ix)), tableName(dbID, c.Name), strings.Join(keys, ", "))
}

// collated returns expr, the SQL of field f's column, in the "C" collation
// when the column is text: the order and equality Sluice compares text by.
func collated(f *sluice.Field, expr string) string {
	if columnType(f) == "text" {
		return expr + ` COLLATE "C"`
	}
	return expr
}

// indexName returns the name of index ix of class's table: the class and
// field names (truncated to fit Postgres' 63 bytes) and a hash of the
// field list, so that two indexes never share a name, and an index never
// takes a table's name (class names have no underscore).
func indexName(class string, ix sluice.Index) string {
	h := fnv.New32a()
	h.Write([]byte(class))
	for _, f := range ix.Fields {
		h.Write([]byte{0})
		h.Write([]byte(f))
	}
	readable := class + "_" + strings.Join(ix.Fields, "_")
	const maxIdent = 63
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	if len(readable) > maxIdent-len(suffix) {
		readable = readable[:maxIdent-len(suffix)]
	}
	return readable + suffix
}

// hasIndex reports whether list holds an index on the same fields as ix.
func hasIndex(list []sluice.Index, ix sluice.Index) bool {
	for _, x := range list {
		if slices.Equal(x.Fields, ix.Fields) {
			return true
		}
	}
	return false
}

// refIndexed returns the reference fields of document class c whose
// columns have a backlink index (refIndexSQL): every one, except a single
// reference that an @index on just that field already serves.
func refIndexed(c *sluice.Class) []*sluice.Field {
	var out []*sluice.Field
	for _, f := range c.Fields {
		if f.Type.Kind != sluice.TypeReference {
			continue
		}
		if !f.List && hasIndex(c.Indexes, sluice.Index{Fields: []string{f.Name}}) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// refIndexSQL returns the statement creating the backlink index of
// reference field f of document class c's table, unless it exists, so
// that the documents pointing at one document cost what they are, not
// what their class holds (Backlinks). A single reference's is a btree on
// the column then the id, both in the "C" collation: a backlink's page
// in the default order (by id) reads just the page. A list of references
// is a jsonb array, whose GIN index (jsonb_path_ops) finds the arrays
// holding an id; their documents are then sorted. concurrently builds it
// without blocking writes (outside a transaction only).
func refIndexSQL(dbID int64, c *sluice.Class, f *sluice.Field, concurrently bool) string {
	how := "INDEX"
	if concurrently {
		how = "INDEX CONCURRENTLY"
	}
	def := fmt.Sprintf(`(%s COLLATE "C", %s COLLATE "C")`, ident(f.Name), colID)
	if f.List {
		def = fmt.Sprintf("USING gin (%s jsonb_path_ops)", ident(f.Name))
	}
	return fmt.Sprintf("CREATE %s IF NOT EXISTS %s ON %s %s", how, ident(refIndexName(c.Name, f.Name)), tableName(dbID, c.Name), def)
}

// refIndexName returns the name of the backlink index of field of class's
// table: the class and field names, "ref", and a hash that differs from
// any @index's (indexName hashes the class and fields alone).
func refIndexName(class, field string) string {
	h := fnv.New32a()
	h.Write([]byte("ref\x00" + class + "\x00" + field))
	readable := class + "_" + field + "_ref"
	const maxIdent = 63
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	if len(readable) > maxIdent-len(suffix) {
		readable = readable[:maxIdent-len(suffix)]
	}
	return readable + suffix
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/schema"
)

// syncTables makes database dbID's tables match schema next, given that they
// match prev (nil for a new database). Document classes get a table each;
// fields a typed column each. A field whose column type, list-ness or element
// type changed is dropped and re-added (its values are lost: the engine only
// gets here for such a change with force), unless it is a reference widened
// to a type its references all fit (retyped). Removed classes and fields are
// dropped. Each document class's table has one index per entry of its
// Indexes (see indexSQL); indexes no longer declared are dropped. Each
// reference field's column has an index that serves backlinks
// (refIndexSQL), which goes with the column. Every
// table then gets the capture triggers of next (capture.go); role is
// Sluice's own.
//
// Nothing is dropped with CASCADE. Other roles of the cluster may make
// objects that depend on a class's table (a view over its columns, a
// table or a temporary table with a column of its row type, a function
// taking it), and CASCADE would destroy them, objects Sluice does not own
// and whose owners consented to nothing. Without it, Postgres refuses the
// DROP (2BP01), which was answered 500. So the dependents outside the
// database's schema are looked up first (otherDependents), and the change
// is refused with a Conflict naming them, for their owners to drop (or,
// a temporary table, for its session to end); one made between that look
// up and the DROP gets the same Conflict from Postgres' refusal.
func syncTables(ctx context.Context, q querier, dbID int64, role string, prev, next *sluice.Schema) error {
	if err := CheckIndexNames(next); err != nil {
		return err
	}
	// drops run before stmts: an index dropped (with its column or table
	// too) may have the name of one this change builds, of another class
	// or fields (indexName), which CREATE INDEX IF NOT EXISTS would
	// otherwise take for built, before the DROP removed it.
	var drops, stmts []string
	// builds names the index each CREATE INDEX statement builds, for the
	// error of one that stored values are too large for.
	builds := map[string]string{}
	addIndex := func(c *sluice.Class, ix sluice.Index) {
		s := indexSQL(dbID, c, ix)
		stmts = append(stmts, s)
		builds[s] = fmt.Sprintf("the index on %s(%s)", c.Name, strings.Join(ix.Fields, ", "))
	}
	addRefIndex := func(c *sluice.Class, f *sluice.Field) {
		s := refIndexSQL(dbID, c, f, false)
		stmts = append(stmts, s)
		builds[s] = fmt.Sprintf("the backlink index of %s.%s", c.Name, f.Name)
	}
	for _, name := range next.Order {
		c := next.Classes[name]
		if c.Kind != sluice.KindDocument {
			continue
		}
		old := prev.Class(name)
		if old == nil || old.Kind != sluice.KindDocument {
			stmts = append(stmts, createTableSQL(dbID, c))
			for _, ix := range c.Indexes {
				addIndex(c, ix)
			}
			for _, f := range refIndexed(c) {
				addRefIndex(c, f)
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
			case retyped(prev, next, of, f):
				drops = append(drops, fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", tbl, col))
				stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", tbl, col, columnType(f)))
			}
		}
		for _, of := range old.Fields {
			if c.Field(of.Name) == nil {
				drops = append(drops, fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", tbl, pgx.Identifier{of.Name}.Sanitize()))
			}
		}
		for _, ix := range old.Indexes {
			if !hasIndex(c.Indexes, ix) {
				drops = append(drops, "DROP INDEX IF EXISTS "+pgx.Identifier{schemaName(dbID), indexName(name, ix)}.Sanitize())
			}
		}
		// A backlink index that an @index on its field now serves
		// (refIndexed) goes: kept, its name would stand for nothing
		// Sluice knows of.
		for _, of := range refIndexed(old) {
			if f := c.Field(of.Name); f != nil && !retyped(prev, next, of, f) && !slices.Contains(refIndexed(c), f) {
				drops = append(drops, "DROP INDEX IF EXISTS "+pgx.Identifier{schemaName(dbID), refIndexName(name, of.Name)}.Sanitize())
			}
		}
		// IF NOT EXISTS: an index already there is kept; one whose column
		// was just dropped and re-added (a changed type) went with the
		// column and is built again.
		for _, ix := range c.Indexes {
			addIndex(c, ix)
		}
		// Likewise the backlink indexes: a reference field added, or
		// whose column was re-added, gets its index; so does a table
		// made before Sluice made them (and not yet reached by
		// BuildReferenceIndexes).
		for _, f := range refIndexed(c) {
			addRefIndex(c, f)
		}
	}
	if prev != nil {
		for _, name := range prev.Order {
			if prev.Classes[name].Kind != sluice.KindDocument {
				continue
			}
			if c := next.Class(name); c == nil || c.Kind != sluice.KindDocument {
				drops = append(drops, "DROP TABLE "+tableName(dbID, name))
			}
		}
	}
	stmts = append(drops, stmts...)
	others, err := droppedDependents(ctx, q, dbID, prev, next)
	if err != nil {
		return err
	}
	if len(others) > 0 {
		return dependentsError(strings.Join(others, ", "))
	}
	// Before, so that an object of another role's fails the change
	// naming it, not as Postgres' "already exists"; after, for one made
	// meanwhile by a role still granted CREATE on the schema, which an
	// IF NOT EXISTS would have taken for Sluice's index.
	if err := checkDatabaseSchema(ctx, q, dbID); err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := q.Exec(ctx, s); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "2BP01" { // dependent_objects_still_exist
				// Made since droppedDependents looked: Postgres' detail
				// names them ("view app.v depends on column …").
				return dependentsError(pe.Detail)
			}
			if errors.As(err, &pe) && isIndexRowTooLarge(pe) && builds[s] != "" {
				// Stored values, not the request, stand in the way, as
				// for the other changes refused whatever force says; the
				// wrapped error below was answered 500 "internal error".
				return sluice.Errorf(sluice.CodeConflict, "cannot add %s: a stored document holds a value too large for it (%s); an indexed value may take at most about 2,700 bytes after compression: shorten those values, or leave the field unindexed", builds[s], pe.Message)
			}
			return fmt.Errorf("schema change %q: %w", s, err)
		}
	}
	if err := checkDatabaseSchema(ctx, q, dbID); err != nil {
		return err
	}
	return syncCapture(ctx, q, dbID, role, next)
}

// retyped reports whether field of of prev, changed to f in next, needs
// another column (its type or list-ness changed): the column is dropped
// and added again. A reference widened to a type that every class its
// references may point to fits (schema.Widens) keeps its column and its
// values.
func retyped(prev, next *sluice.Schema, of, f *sluice.Field) bool {
	return (of.Type != f.Type || of.List != f.List) && !schema.Widens(prev, next, of, f)
}

// droppedDependents returns the objects outside database dbID's schema
// (otherDependents) that depend on what syncTables drops to make its
// tables match next instead of prev: the tables of document classes that
// next has no more (or not as document classes), and the columns of
// fields dropped or retyped.
func droppedDependents(ctx context.Context, q querier, dbID int64, prev, next *sluice.Schema) ([]string, error) {
	if prev == nil {
		return nil, nil
	}
	// Tables, and their columns ("" for a whole table).
	var tables, columns []string
	for _, name := range prev.Order {
		old := prev.Classes[name]
		if old.Kind != sluice.KindDocument {
			continue
		}
		tbl := tableName(dbID, name)
		c := next.Class(name)
		if c == nil || c.Kind != sluice.KindDocument {
			tables, columns = append(tables, tbl), append(columns, "")
			continue
		}
		for _, of := range old.Fields {
			if f := c.Field(of.Name); f == nil || retyped(prev, next, of, f) {
				tables, columns = append(tables, tbl), append(columns, of.Name)
			}
		}
	}
	if len(tables) == 0 {
		return nil, nil
	}
	return otherDependents(ctx, q, dbID, tables, columns)
}

// dependentsError is the Conflict of a schema change that would drop
// what the objects of other Postgres roles named by which depend on.
func dependentsError(which string) error {
	return sluice.Errorf(sluice.CodeConflict, "the schema change would drop tables or columns that objects of other Postgres roles depend on: %s; they must be dropped first (a temporary table goes when its session ends)", which)
}

// otherDependents returns the objects outside database dbID's schema (as
// "<kind> <schema>.<name>", at most 20) that depend on what the schema
// change drops: tables[i], or its column columns[i] ("": the table).
func otherDependents(ctx context.Context, q querier, dbID int64, tables, columns []string) ([]string, error) {
	return dependents(ctx, q, dbID, `
    SELECT 'pg_class'::regclass::oid, c.oid, coalesce(a.attnum::int, 0)
    FROM unnest($2::text[], $3::text[]) s(tbl, col)
    JOIN pg_class c ON c.oid = to_regclass(s.tbl)
    LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = s.col AND NOT a.attisdropped
    WHERE s.col = '' OR a.attnum IS NOT NULL`, tables, columns)
}

// schemaDependents returns, as otherDependents does, the objects outside
// database dbID's schema that depend on anything in it: its tables,
// their columns and row types, and whatever relation, type or function
// sits there (a sequence, a type), which deleting the database drops.
func schemaDependents(ctx context.Context, q querier, dbID int64) ([]string, error) {
	return dependents(ctx, q, dbID, `
    SELECT 'pg_class'::regclass::oid, c.oid, 0 FROM pg_class c WHERE c.relnamespace = to_regnamespace($1)
  UNION
    SELECT 'pg_type'::regclass::oid, t.oid, 0 FROM pg_type t WHERE t.typnamespace = to_regnamespace($1)
  UNION
    SELECT 'pg_proc'::regclass::oid, p.oid, 0 FROM pg_proc p WHERE p.pronamespace = to_regnamespace($1)`)
}

// dependents returns the objects outside database dbID's schema (at most
// 20) that depend on the objects seed selects (classid, objid, objsubid;
// objsubid a column, or 0 for the whole object; $1 is the schema's name,
// args the parameters from $2). It follows pg_depend from them through
// what goes with them (deptype a and i: their indexes, constraints, row
// type and its array type, TOAST table) to what depends on any of that as
// an ordinary dependent (deptype n), which is what makes a DROP without
// CASCADE fail. A view is named rather than its rule ("view app.v"); a
// column of another table by its table and column ("table app.keep
// (column p)"), which is what its owner has to drop or change.
func dependents(ctx context.Context, q querier, dbID int64, seed string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, `
WITH RECURSIVE gone(classid, objid, objsubid) AS (
    SELECT * FROM (`+seed+`) seed
  UNION
    SELECT d.classid, d.objid, d.objsubid
    FROM pg_depend d JOIN gone g ON d.refclassid = g.classid AND d.refobjid = g.objid AND (g.objsubid = 0 OR d.refobjsubid = g.objsubid)
    WHERE d.deptype IN ('a', 'i')
), blockers AS (
    SELECT DISTINCT
        CASE WHEN d.classid = 'pg_rewrite'::regclass THEN 'pg_class'::regclass::oid ELSE d.classid END AS classid,
        coalesce(r.ev_class, d.objid) AS objid,
        CASE WHEN d.classid = 'pg_class'::regclass THEN d.objsubid ELSE 0 END AS objsubid
    FROM pg_depend d JOIN gone g ON d.refclassid = g.classid AND d.refobjid = g.objid AND (g.objsubid = 0 OR d.refobjsubid = g.objsubid)
    LEFT JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
    WHERE d.deptype = 'n'
)
SELECT o.type || ' ' || o.identity || coalesce(' (column ' || quote_ident(a.attname) || ')', '')
FROM blockers b
CROSS JOIN LATERAL pg_identify_object(b.classid, b.objid, 0) o
LEFT JOIN pg_attribute a ON b.objsubid > 0 AND a.attrelid = b.objid AND a.attnum = b.objsubid
WHERE o.schema IS DISTINCT FROM $1
ORDER BY 1 LIMIT 20`, append([]any{schemaName(dbID)}, args...)...)
	if err != nil {
		return nil, mapError(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return names, mapError(err)
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

// CheckIndexNames returns the Invalid error naming two indexes of s
// (@index ones and backlink ones) that would have the same name, nil
// when none do. A name is cut from the class and field names and a
// 32-bit hash (indexName, refIndexName), which a schema's author can
// make two indexes share: the second's CREATE INDEX IF NOT EXISTS would
// be skipped, the first standing for it. Names are per database (each
// has its Postgres schema), so no other database's can clash.
func CheckIndexNames(s *sluice.Schema) error {
	if s == nil {
		return nil
	}
	seen := map[string]string{}
	add := func(name, what string) error {
		if other, ok := seen[name]; ok {
			return sluice.Errorf(sluice.CodeInvalid, "%s and %s would both be named %s in Postgres, where an index's name is cut from its class and field names, with a hash of them; rename a field or a class, or leave one of the indexes out", other, what, name)
		}
		seen[name] = what
		return nil
	}
	for _, n := range s.Order {
		c := s.Classes[n]
		if c.Kind != sluice.KindDocument {
			continue
		}
		for _, ix := range c.Indexes {
			if err := add(indexName(c.Name, ix), fmt.Sprintf("the index on %s(%s)", c.Name, strings.Join(ix.Fields, ", "))); err != nil {
				return err
			}
		}
		for _, f := range refIndexed(c) {
			if err := add(refIndexName(c.Name, f.Name), fmt.Sprintf("the backlink index of %s.%s", c.Name, f.Name)); err != nil {
				return err
			}
		}
	}
	return nil
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

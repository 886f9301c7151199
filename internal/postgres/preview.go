package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
)

// Inspect runs fn in a read-only transaction that is always rolled back:
// reads that judge a change before it is made (which documents a schema
// change would affect), with the Tx methods a write's Before uses. Its
// reads are of one snapshot (REPEATABLE READ): a preview's answer is of
// one state of the tables, and RewriteStored reads the rows it measured.
func (db *DB) Inspect(ctx context.Context, fn func(*Tx) error) error {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return mapError(err)
	}
	defer conn.Release()
	t := &Tx{tx: &txConn{conn: conn, begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}, db: db}
	defer func() {
		if t.tx.started() {
			conn.Exec(context.WithoutCancel(ctx), "ROLLBACK") //nolint:errcheck // a broken connection is closed by Release
		}
	}()
	return fn(t)
}

// Affected is how many documents a change would affect, and the ids of
// the first of them in id order.
type Affected struct {
	Count int64
	IDs   []string
}

// DocumentsHolding returns the documents of class whose field holds a
// value (all its documents when field is ""), with at most max ids: what
// dropping the field (or the class) loses. A class without a table, or
// without the field's column, has none.
func (t *Tx) DocumentsHolding(ctx context.Context, d *sluice.Database, class, field string, max int) (Affected, error) {
	hasTable, hasColumn, err := t.tableHas(ctx, d, class, field)
	if err != nil || !hasTable || field != "" && !hasColumn {
		return Affected{}, err
	}
	cond := "true"
	if field != "" {
		cond = pgx.Identifier{field}.Sanitize() + " IS NOT NULL"
	}
	return t.affected(ctx, d, class, cond, max)
}

// tableHas reports whether class has a table and that table a column
// named field.
func (t *Tx) tableHas(ctx context.Context, d *sluice.Database, class, field string) (hasTable, hasColumn bool, err error) {
	err = t.tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped)`, tableName(d.ID, class), field).Scan(&hasTable, &hasColumn)
	return hasTable, hasColumn, mapError(err)
}

// affected counts the documents of class that meet cond (SQL built by the
// callers above from sanitized identifiers; values are args) and returns
// the first max ids in id order.
func (t *Tx) affected(ctx context.Context, d *sluice.Database, class, cond string, max int, args ...any) (Affected, error) {
	var a Affected
	from := fmt.Sprintf("FROM %s WHERE %s", tableName(d.ID, class), cond)
	if err := t.tx.QueryRow(ctx, "SELECT count(*) "+from, args...).Scan(&a.Count); err != nil {
		return Affected{}, mapError(err)
	}
	if a.Count == 0 || max <= 0 {
		return a, nil
	}
	rows, err := t.tx.Query(ctx, fmt.Sprintf("SELECT %s %s ORDER BY 1 LIMIT %d", colID, from, max), args...)
	if err != nil {
		return Affected{}, mapError(err)
	}
	a.IDs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return a, mapError(err)
}

// btreeMaxItem is the largest entry a btree index takes with 8 KiB pages
// ("index row size … exceeds btree version 4 maximum 2704").
const btreeMaxItem = 2704

// TooLargeForIndex returns the documents of class holding values too
// large for an index on fields, with at most max ids: what adding the
// index would be refused for. An entry's size is judged from its keys'
// sizes as stored (pg_column_size: after compression, as the index
// stores them too), the id's and the entry's header, each key taken as 4
// bytes more for its alignment; so a value within a few bytes of the
// bound may be judged otherwise than Postgres does. Fields without a
// column yet hold nothing. A class without a table has none.
func (t *Tx) TooLargeForIndex(ctx context.Context, d *sluice.Database, class string, fields []string, max int) (Affected, error) {
	hasTable, _, err := t.tableHas(ctx, d, class, "")
	if err != nil || !hasTable {
		return Affected{}, err
	}
	size := fmt.Sprintf("16 + pg_column_size(%s) + 4", colID)
	for _, f := range fields {
		_, hasColumn, err := t.tableHas(ctx, d, class, f)
		if err != nil {
			return Affected{}, err
		}
		if hasColumn {
			size += fmt.Sprintf(" + coalesce(pg_column_size(%s), 0) + 4", pgx.Identifier{f}.Sanitize())
		}
	}
	return t.affected(ctx, d, class, fmt.Sprintf("%s > %d", size, btreeMaxItem), max)
}

// DependentsRefusal returns why a schema change of database d from prev
// to next would be refused, whatever force says, for the objects of other
// Postgres roles that depend on the tables or columns it drops (the
// message ChangeSchema answers, naming them), or "" when none do. One
// made after it looks is found by the change itself.
func (t *Tx) DependentsRefusal(ctx context.Context, d *sluice.Database, prev, next *sluice.Schema) (string, error) {
	others, err := droppedDependents(ctx, t.tx, d.ID, prev, next)
	if err != nil || len(others) == 0 {
		return "", err
	}
	return sluice.ErrorMessage(dependentsError(strings.Join(others, ", "))), nil
}

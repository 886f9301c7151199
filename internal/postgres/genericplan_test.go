package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/internal/filter"
)

// TestReadsKeepGenericPlans: the statements of a lookup of one id and of
// a filtered, limited page on a skewed class (most rows of one value, the
// filter on a rare one) keep Postgres' generic plan once prepared, instead
// of being planned again at every execution: with LIMIT $n or = ANY($n)
// Postgres costs the generic plan for a tenth of the rows or an array of
// ten and prefers a plan of the known values every time, and planning the
// one-statement read costs several times its execution.
func TestReadsKeepGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, d, s, _ := openNotes(t)
	// A commit for the rows' commit column, then 200,000 rows written in
	// SQL (by Sluice's own connection, which the capture skips): one in a
	// thousand "rare", the others "common".
	if _, err := db.Write(ctx, WriteSpec{Database: d, Schema: s, Meta: CommitMeta{User: "admin"},
		Documents: func(ctx context.Context, w *Writer) error { return w.Insert(ctx, note("first")) }}); err != nil {
		t.Fatal(err)
	}
	if err := db.ExecDBForTest(ctx, fmt.Sprintf(`INSERT INTO %s (_id, _commit_uid, text)
		SELECT 'Note/' || i, (SELECT _commit_uid FROM %[1]s LIMIT 1), CASE WHEN i %% 1000 = 0 THEN 'rare' ELSE 'common' END
		FROM generate_series(1, 200000) i`, tableName(d.ID, "Note"))); err != nil {
		t.Fatal(err)
	}
	if err := db.ExecDBForTest(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	rare, err := filter.Parse(s, "Note", map[string]any{"text": map[string]any{"eq": "rare"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		q    DocQuery
		rows int
	}{
		{"lookup of one id", DocQuery{Class: "Note", Classes: []string{"Note"}, IDs: []string{"Note/7"}, Limit: 10001, Fields: []string{"text"}}, 1},
		{"filtered page", DocQuery{Class: "Note", Classes: []string{"Note"}, Filter: rare, Order: []OrderKey{{Field: "text"}}, Limit: 5, Fields: []string{"text"}}, 5},
	} {
		st, err := compileQuery(d, s, c.q, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		sql := oneStatementSQL(st.sql, len(st.args)+1)
		args := append(st.args, d.ID)
		conn, err := db.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The first five executions of a prepared statement are planned
		// for their values; the sixth on is where Postgres chooses.
		for range 8 {
			rows, err := conn.Query(ctx, sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if n != c.rows+1 { // the counter's row first
				t.Fatalf("%s: %d rows, want %d and the counter's", c.name, n-1, c.rows)
			}
		}
		var generic, custom int64
		err = conn.QueryRow(ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1", sql).Scan(&generic, &custom)
		conn.Release()
		if err != nil {
			t.Fatal(err)
		}
		if generic == 0 {
			t.Errorf("%s: %d custom plans and no generic plan in 8 executions of\n%s", c.name, custom, sql)
		}
	}
}

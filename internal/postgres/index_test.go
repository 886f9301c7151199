package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// indexSDL has an index of each kind: on a text, integer, DateTime and
// reference field, a compound one, and one inherited by a subclass.
const indexSDL = `
type Person @index(fields: ["age", "name"]) {
  name: String @index
  email: String
  age: Int @index
  born: DateTime @index
  friend: Person @index
}
interface Animal @concrete { name: String @index }
type Dog implements Animal { breed: String }
`

// indexedDatabase creates database o/<name> with indexSDL and n Person,
// n/2 Animal and n/2 Dog documents, then has Postgres gather statistics,
// as autovacuum would on a real table.
func indexedDatabase(t *testing.T, db *postgres.DB, name string, n int) (*sluice.Database, *sluice.Schema) {
	t.Helper()
	ctx := context.Background()
	s, err := schema.Parse(indexSDL)
	if err != nil {
		t.Fatal(err)
	}
	d := &sluice.Database{Org: "o", Name: name}
	_, err = db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		if err := tx.CreateOrganization(ctx, "o"); err != nil {
			return err
		}
		return tx.CreateDatabase(ctx, d, s, postgres.Creator{})
	}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []*sluice.Document
	born := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		docs = append(docs, &sluice.Document{ID: fmt.Sprintf("Person/p%05d", i), Type: "Person", Fields: map[string]any{
			"name":   fmt.Sprintf("name %05d", (i*7919)%n),
			"email":  fmt.Sprintf("p%d@example.com", i),
			"age":    int64(i % 4),
			"born":   born.Add(time.Duration(i) * time.Hour).Format(time.RFC3339Nano),
			"friend": fmt.Sprintf("Person/p%05d", (i+1)%n),
		}})
	}
	for i := range n / 2 {
		docs = append(docs,
			&sluice.Document{ID: fmt.Sprintf("Animal/a%05d", i), Type: "Animal", Fields: map[string]any{"name": fmt.Sprintf("animal %05d", i)}},
			&sluice.Document{ID: fmt.Sprintf("Dog/d%05d", i), Type: "Dog", Fields: map[string]any{"name": fmt.Sprintf("dog %05d", i), "breed": "x"}})
	}
	_, err = db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
		Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Insert(ctx, docs) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.ExecDBForTest(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	return d, s
}

func mustFilter(t *testing.T, s *sluice.Schema, class string, f map[string]any) filter.Expr {
	t.Helper()
	e, err := filter.Parse(s, class, f)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// planCase is a query and what its plan must and must not show.
type planCase struct {
	name   string
	q      postgres.DocQuery
	want   []string
	forbid []string
}

// TestQueriesUseIndexes checks the plans of the query shapes Sluice
// promises are served by an index: a page in the default order (by id),
// paged by limit and offset or by id, orderBy on indexed fields, and
// filters on them. A plan that reads a whole class (a Seq Scan) or sorts
// it would make a page cost what the class holds.
func TestQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := indexedDatabase(t, db, "plans", 5000)
	person := func(q postgres.DocQuery) postgres.DocQuery {
		q.Class, q.Classes = "Person", []string{"Person"}
		if q.Limit == 0 {
			q.Limit = 100
		}
		return q
	}
	f := func(js map[string]any) filter.Expr { return mustFilter(t, s, "Person", js) }
	op := func(field, op string, v any) map[string]any { return map[string]any{field: map[string]any{op: v}} }
	noScan := []string{`Seq Scan on "Person"`}
	cases := []planCase{
		{"default order, whole documents", person(postgres.DocQuery{}),
			[]string{`Index Scan using "Person_pkey"`}, append(noScan, "Sort")},
		{"default order, a page of 1000 after 1000", person(postgres.DocQuery{Limit: 1000, Offset: 1000, Fields: []string{"_id", "name"}}),
			[]string{`Index Scan using "Person_pkey"`}, append(noScan, "Sort")},
		{"descending ids", person(postgres.DocQuery{Order: []postgres.OrderKey{{Field: "_id", Desc: true}}, Fields: []string{"_id"}}),
			[]string{`Scan Backward using "Person_pkey"`}, append(noScan, "Sort")},
		{"ids", person(postgres.DocQuery{IDs: []string{"Person/p00042", "Person/p00043"}, Fields: []string{"_id", "name", "_CommitMetadata"}}),
			[]string{`Index Cond: (_id = ANY`}, noScan},
		// One id reads at most one row: nothing to sort (orderBy).
		{"one id, some fields", person(postgres.DocQuery{IDs: []string{"Person/p00042"}, Fields: []string{"_id", "name"}}),
			[]string{`Index Cond: (_id = `}, append(noScan, "Sort")},
		{"one id, whole documents", person(postgres.DocQuery{IDs: []string{"Person/p00042"}}),
			[]string{`Index Cond: (_id = `}, append(noScan, "Sort")},
		{"_ids filter, paged", person(postgres.DocQuery{Offset: 1, Filter: f(map[string]any{"_ids": []any{"Person/p00042", "Person/p00043"}})}),
			[]string{`Index Cond: (_id = ANY`}, noScan},
		{"orderBy an indexed String", person(postgres.DocQuery{Order: []postgres.OrderKey{{Field: "name"}}, Fields: []string{"_id", "name"}}),
			[]string{`using "Person_name_`}, append(noScan, "Sort")},
		{"orderBy an indexed String descending, then the id descending", person(postgres.DocQuery{Order: []postgres.OrderKey{{Field: "name", Desc: true}, {Field: "_id", Desc: true}}}),
			[]string{`Index Scan Backward using "Person_name_`}, append(noScan, "Sort")},
		{"orderBy an indexed DateTime", person(postgres.DocQuery{Order: []postgres.OrderKey{{Field: "born"}}, Fields: []string{"_id"}}),
			[]string{`using "Person_born_`}, append(noScan, "Sort")},
		{"eq on the first field of a compound index, orderBy the second", person(postgres.DocQuery{Order: []postgres.OrderKey{{Field: "name"}}, Filter: f(op("age", "eq", 2)), Fields: []string{"_id", "name"}}),
			[]string{`using "Person_age_name_`, `Index Cond: (age = `}, append(noScan, "Sort")},
		{"eq on an indexed String", person(postgres.DocQuery{Filter: f(op("name", "eq", "name 00042"))}),
			[]string{`"Person_name_`, `Index Cond: ((name)::text = 'name 00042'::text)`}, noScan},
		{"startsWith", person(postgres.DocQuery{Filter: f(op("name", "startsWith", "name 001")), Fields: []string{"_id", "name"}}),
			[]string{`"Person_name_`, `Index Cond: (((name)::text >= 'name 001'::text) AND ((name)::text < 'name 002'::text))`}, noScan},
		{"a String range", person(postgres.DocQuery{Filter: f(map[string]any{"name": map[string]any{"gt": "name 0010", "le": "name 0011"}}), Fields: []string{"_id"}}),
			[]string{`"Person_name_`}, noScan},
		{"a DateTime range", person(postgres.DocQuery{Filter: f(map[string]any{"born": map[string]any{"ge": "2000-01-02T00:00:00Z", "lt": "2000-01-03T00:00:00Z"}}), Fields: []string{"_id"}}),
			[]string{`"Person_born_`}, noScan},
		{"_or of indexed fields", person(postgres.DocQuery{Filter: f(map[string]any{"_or": []any{op("name", "eq", "name 00042"), op("born", "eq", "2000-01-01T05:00:00Z")}}), Fields: []string{"_id"}}),
			[]string{"BitmapOr", `"Person_name_`, `"Person_born_`}, noScan},
		{"a reference's filter", person(postgres.DocQuery{Filter: f(map[string]any{"friend": op("name", "eq", "name 00042")}), Fields: []string{"_id"}}),
			[]string{`"Person_friend_`, `"Person_name_`}, noScan},
		// The check can fail: a filter on a field without an index reads
		// the whole class.
		{"eq on a field without an index", person(postgres.DocQuery{Filter: f(op("email", "eq", "p42@example.com")), Fields: []string{"_id"}}),
			[]string{`Seq Scan on "Person"`}, nil},
		{"a parent in the default order", postgres.DocQuery{Class: "Animal", Classes: []string{"Animal", "Dog"}, Limit: 100},
			[]string{"Merge Append", `Index Scan using "Animal_pkey"`, `Index Scan using "Dog_pkey"`}, nil},
		{"a parent's inherited index", postgres.DocQuery{Class: "Animal", Classes: []string{"Animal", "Dog"}, Limit: 100,
			Filter: mustFilter(t, s, "Animal", op("name", "eq", "dog 00042"))},
			[]string{`Index Scan using "Animal_name_`, `Index Scan using "Dog_name_`}, []string{`Seq Scan on "Animal" t `, `Seq Scan on "Dog" t_1`}},
	}
	for _, c := range cases {
		plan, err := db.ExplainQuery(ctx, d, s, c.q, false)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkPlan(t, c.name, plan, c.want, c.forbid)
	}
	// The REST listing: every class, merged in id order from the primary
	// keys, a page after a skip.
	plan, err := db.ExplainDocumentsForTest(ctx, d, []string{"Person", "Animal", "Dog"}, 2000, 100)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, "REST listing", plan, []string{"Merge Append", `"Person_pkey"`, `"Animal_pkey"`, `"Dog_pkey"`}, []string{"Seq Scan", "Sort"})
}

func checkPlan(t *testing.T, name, plan string, want, forbid []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(plan, w) {
			t.Errorf("%s: the plan lacks %q:\n%s", name, w, plan)
		}
	}
	for _, f := range forbid {
		if f == "Sort" && hasSortNode(plan) || f != "Sort" && strings.Contains(plan, f) {
			t.Errorf("%s: the plan has %q:\n%s", name, f, plan)
		}
	}
}

// hasSortNode reports whether an EXPLAIN plan sorts rows (a Sort or an
// Incremental Sort node; a Merge Append's "Sort Key" merges sorted
// inputs and does not count).
func hasSortNode(plan string) bool {
	for line := range strings.Lines(plan) {
		node := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "->"))
		if node == "Sort" || strings.HasPrefix(node, "Incremental Sort") {
			return true
		}
	}
	return false
}

// Adding and removing @index is a schema change that applies in place; an
// index whose field changes type is built again for the new column.
func TestIndexSchemaChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := noteDatabase(t, db, "a")
	commitN(t, db, d, s, 3)
	change := func(sdl string) {
		t.Helper()
		next, err := schema.Parse(sdl)
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
			if err := tx.LockDatabase(ctx, d); err != nil {
				return err
			}
			return tx.ChangeSchema(ctx, d, s, next)
		}})
		if err != nil {
			t.Fatalf("%s: %v", sdl, err)
		}
		s = next
	}
	indexes := func(want ...string) {
		t.Helper()
		got, err := db.IndexesForTest(ctx, d, "Note")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("indexes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	tbl := fmt.Sprintf(`sluice_db_%d."Note"`, d.ID)
	change(`type Note @index(fields: ["n", "text"]) { text: String! @index n: Int }`)
	indexes(
		`CREATE INDEX "Note_n_text_95c34582" ON `+tbl+` USING btree (n, text COLLATE "C", _id)`,
		`CREATE INDEX "Note_text_67994b20" ON `+tbl+` USING btree (text COLLATE "C", _id)`)
	change(`type Note @index(fields: ["n", "text"]) { text: Int n: Int }`) // text changes type (forced)
	indexes(`CREATE INDEX "Note_n_text_95c34582" ON ` + tbl + ` USING btree (n, text, _id)`)
	change(`type Note { text: Int n: Int }`)
	indexes()
	if c, err := db.ColumnCollationForTest(ctx, d, "Note", "_id"); err != nil || c != "C" {
		t.Errorf("_id collation %q (%v), want C", c, err)
	}
}

// Migration 8 declares the ids of tables created before it in byte order,
// so that their primary keys serve the default order.
func TestMigrationServesDefaultOrderFromPrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	db, err := postgres.Open(ctx, dbURL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.MigrateToForTest(ctx, 7); err != nil {
		t.Fatal(err)
	}
	d, s := noteDatabase(t, db, "a")
	// A SQL write, which the capture trigger of migration 7 commits:
	// this binary's own commit statement needs the columns of migration
	// 34.
	if err := pgxExec(ctx, dbURL, fmt.Sprintf(`INSERT INTO sluice_db_%d."Note" (_id, text)
		SELECT 'Note/n' || lpad(i::text, 4, '0'), 'x' FROM generate_series(0, 1999) i`, d.ID)); err != nil {
		t.Fatal(err)
	}
	// A table as CreateDatabase made it before: _id in the default
	// collation.
	for _, sql := range []string{fmt.Sprintf(`ALTER TABLE sluice_db_%d."Note" ALTER COLUMN _id TYPE text COLLATE "default"`, d.ID), "ANALYZE"} {
		if err := db.ExecDBForTest(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	q := postgres.DocQuery{Class: "Note", Classes: []string{"Note"}, Limit: 10, Fields: []string{"_id", "text"}}
	plan, err := db.ExplainQuery(ctx, d, s, q, false)
	if err != nil {
		t.Fatal(err)
	}
	if !hasSortNode(plan) {
		t.Fatalf("before migration 8, the default order needs a sort:\n%s", plan)
	}
	if n, err := db.Migrate(ctx); err != nil || n != postgres.LatestVersion()-7 {
		t.Fatalf("Migrate applied %d: %v", n, err)
	}
	if c, err := db.ColumnCollationForTest(ctx, d, "Note", "_id"); err != nil || c != "C" {
		t.Errorf("_id collation %q (%v), want C", c, err)
	}
	plan, err = db.ExplainQuery(ctx, d, s, q, false)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, "after migration 8", plan, []string{`Index Scan using "Note_pkey"`}, []string{"Sort", "Seq Scan"})
	docs, err := db.QueryDocuments(ctx, d, s, q)
	if err != nil || len(docs) != 10 || docs[0].Doc.ID != "Note/n0000" || docs[9].Doc.ID != "Note/n0009" {
		t.Errorf("documents after migration 8: %v (%v)", docs, err)
	}
}

// An indexed String longer than Postgres can index is refused as the
// client's error, naming the index, and nothing is written.
func TestValueTooLargeForIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := indexedDatabase(t, db, "big", 10)
	// Random letters do not compress below the 2,704-byte limit. Past
	// 8 KB Postgres' message no longer names the index.
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{5000, 9000} {
		long := make([]byte, size)
		for i := range long {
			long[i] = byte('a' + r.IntN(26))
		}
		doc := &sluice.Document{ID: "Person/long", Type: "Person", Fields: map[string]any{"name": string(long)}}
		_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
			Documents: func(ctx context.Context, w *postgres.Writer) error { return w.Insert(ctx, []*sluice.Document{doc}) }})
		var se *sluice.Error
		if !errors.As(err, &se) || se.Code != sluice.CodeInvalid || !strings.Contains(se.Message, "too large for an index declared with @index") {
			t.Fatalf("write of %d bytes: %v, want an invalid-input error", size, err)
		}
		if size < 8000 && !strings.Contains(se.Message, `for index "Person_`) {
			t.Errorf("write of %d bytes: %v, want the index named", size, err)
		}
	}
	docs, err := db.QueryDocuments(ctx, d, s, postgres.DocQuery{Class: "Person", Classes: []string{"Person"}, IDs: []string{"Person/long"}, Limit: -1})
	if err != nil || len(docs) != 0 {
		t.Errorf("after the refused write: %v (%v)", docs, err)
	}
}

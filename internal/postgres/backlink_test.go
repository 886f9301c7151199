package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// linkSDL has a single reference (owner), a list of references (owners),
// one covered by an @index of its own (shelf), and a reference declared
// by a concrete parent, whose subclass's table has the column too.
const linkSDL = `
type Owner { name: String }
type Item @index(fields: ["grp"]) {
  name: String
  grp: Int
  price: Float
  big: BigInt
  at: DateTime
  owner: Owner
  owners: [Owner!]
  shelf: Owner @index
}
interface Animal @concrete { keeper: Owner name: String }
type Dog implements Animal { breed: String }
`

// linkedDatabase creates database o/<name> with linkSDL: owners big and
// small; n items, all but every tenth owned by big (every tenth by
// small), each listing both owners when even; n/2 animals and n/2 dogs
// kept by big.
func linkedDatabase(t *testing.T, db *postgres.DB, name string, n int) (*sluice.Database, *sluice.Schema) {
	t.Helper()
	ctx := context.Background()
	s, err := schema.Parse(linkSDL)
	if err != nil {
		t.Fatal(err)
	}
	d := &sluice.Database{Org: "o", Name: name}
	_, err = db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		// The second database of a test finds the organization made.
		if err := tx.CreateOrganization(ctx, "o"); err != nil && sluice.ErrorCode(err) != sluice.CodeConflict {
			return err
		}
		return tx.CreateDatabase(ctx, d, s, postgres.Creator{})
	}})
	if err != nil {
		t.Fatal(err)
	}
	docs := []*sluice.Document{
		{ID: "Owner/big", Type: "Owner", Fields: map[string]any{"name": "Big"}},
		{ID: "Owner/small", Type: "Owner", Fields: map[string]any{"name": "Small"}},
	}
	for i := range 500 {
		docs = append(docs, &sluice.Document{ID: fmt.Sprintf("Owner/o%03d", i), Type: "Owner", Fields: map[string]any{"name": fmt.Sprint(i)}})
	}
	for i := range n {
		owner := "Owner/big"
		if i%2 == 1 {
			owner = fmt.Sprintf("Owner/o%03d", i%500)
		}
		f := map[string]any{"name": fmt.Sprintf("item %05d", i), "grp": int64(i % 50), "price": float64(i) + 0.5,
			"big": fmt.Sprint(int64(i) * 1000000000000), "at": fmt.Sprintf("2026-01-%02dT00:00:00Z", 1+i%28),
			"owner": owner, "shelf": owner}
		if i%2 == 0 {
			f["owners"] = []any{owner, "Owner/small"}
		} else {
			f["owners"] = []any{owner}
		}
		docs = append(docs, &sluice.Document{ID: fmt.Sprintf("Item/i%05d", i), Type: "Item", Fields: f})
	}
	for i := range n / 2 {
		docs = append(docs,
			&sluice.Document{ID: fmt.Sprintf("Animal/a%05d", i), Type: "Animal", Fields: map[string]any{"keeper": "Owner/big", "name": fmt.Sprint(i)}},
			&sluice.Document{ID: fmt.Sprintf("Dog/d%05d", i), Type: "Dog", Fields: map[string]any{"keeper": "Owner/big", "name": fmt.Sprint(i)}})
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

// TestBacklinksUseIndexes checks the plans of backlink pages and counts
// on 20,000 documents, most of them linked to one owner: a page in the
// default order is read in order from the reference's index and stops at
// the page, for one class and for a parent's classes merged; another
// order, and a list of references, find the target's documents by an
// index (never by walking the class); a count over an @index filter is
// an index scan.
func TestBacklinksUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := linkedDatabase(t, db, "plans", 20000)
	page := func(field string, order ...postgres.OrderKey) postgres.BacklinkQuery {
		return postgres.BacklinkQuery{Query: postgres.DocQuery{Class: "Item", Classes: []string{"Item"}, Limit: 20, Order: order},
			Field: field, Targets: []string{"Owner/big", "Owner/o001"}, Total: 10001}
	}
	noScan := []string{`Seq Scan on "Item"`, `Index Scan using "Item_pkey"`}
	for _, c := range []struct {
		name   string
		q      postgres.BacklinkQuery
		want   []string
		forbid []string
	}{
		{"a single reference, by id", page("owner"),
			[]string{`Index Scan using "Item_owner_ref_`, "Limit"}, append(noScan, "Bitmap Heap Scan")},
		{"a single reference, by id descending", page("owner", postgres.OrderKey{Field: "_id", Desc: true}),
			[]string{`Index Scan Backward using "Item_owner_ref_`}, append(noScan, "Bitmap Heap Scan")},
		{"a single reference an @index serves", page("shelf"),
			[]string{`Index Scan using "Item_shelf_`}, append(noScan, "Bitmap Heap Scan")},
		{"a single reference, by another field", page("owner", postgres.OrderKey{Field: "name"}),
			[]string{`"Item_owner_ref_`}, noScan},
		{"a list of references", page("owners"),
			[]string{`Bitmap Index Scan on "Item_owners_ref_`}, noScan},
		{"a parent's classes, by id", postgres.BacklinkQuery{Query: postgres.DocQuery{Class: "Animal", Classes: []string{"Animal", "Dog"}, Limit: 20},
			Field: "keeper", Targets: []string{"Owner/big"}, Total: 10001},
			[]string{"Merge Append", `Index Scan using "Animal_keeper_ref_`, `Index Scan using "Dog_keeper_ref_`},
			[]string{`Seq Scan on "Animal" t`, `Seq Scan on "Dog" t`, "Bitmap Heap Scan"}},
	} {
		plan, err := db.ExplainBacklinks(ctx, d, s, c.q, false)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkPlan(t, c.name, plan, c.want, c.forbid)
	}
	count := func(f map[string]any) postgres.AggregateQuery {
		return postgres.AggregateQuery{Class: "Item", Classes: []string{"Item"}, Filter: mustFilter(t, s, "Item", f)}
	}
	for _, c := range []struct {
		name         string
		q            postgres.AggregateQuery
		want, forbid []string
	}{
		{"count over an @index filter", count(map[string]any{"grp": map[string]any{"eq": 7}}), []string{`"Item_grp_`}, []string{`Seq Scan on "Item"`}},
		// The check can fail: a filter on a field without an index reads
		// the whole class.
		{"count over another filter", count(map[string]any{"price": map[string]any{"eq": 7.5}}), []string{`Seq Scan on "Item"`}, nil},
	} {
		plan, err := db.ExplainAggregate(ctx, d, s, c.q, false)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkPlan(t, c.name, plan, c.want, c.forbid)
	}
}

// Each reference column has a backlink index made with its class: a
// btree on the column and the id for a single reference (unless an
// @index on just that field serves), a GIN index for a list; a subclass's
// table has its own. BuildReferenceIndexes makes those that an older
// table lacks, and builds again one whose concurrent build failed.
func TestReferenceIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, _ := linkedDatabase(t, db, "refs", 40)
	schemaTable := func(class string) string { return fmt.Sprintf(`sluice_db_%d."%s"`, d.ID, class) }
	owner, owners := postgres.RefIndexNameForTest("Item", "owner"), postgres.RefIndexNameForTest("Item", "owners")
	want := []string{
		`CREATE INDEX "` + owner + `" ON ` + schemaTable("Item") + ` USING btree (owner COLLATE "C", _id)`,
		`CREATE INDEX "` + owners + `" ON ` + schemaTable("Item") + ` USING gin (owners jsonb_path_ops)`,
	}
	got, err := db.IndexesForTest(ctx, d, "Item")
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, ix := range got {
		if strings.Contains(ix, "_ref_") {
			refs = append(refs, ix)
		}
	}
	if strings.Join(refs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("backlink indexes of Item:\n%s\nwant:\n%s", strings.Join(refs, "\n"), strings.Join(want, "\n"))
	}
	for _, class := range []string{"Animal", "Dog"} {
		if ok, valid, err := db.IndexValidForTest(ctx, d, postgres.RefIndexNameForTest(class, "keeper")); err != nil || !ok || !valid {
			t.Fatalf("%s.keeper's backlink index: exists %v, valid %v, %v", class, ok, valid, err)
		}
	}
	if n, err := db.BuildReferenceIndexes(ctx); err != nil || n != 0 {
		t.Fatalf("BuildReferenceIndexes with every index made: built %d, %v", n, err)
	}

	// A table made before backlinks lacks one; another's concurrent
	// build failed (here: a unique index over duplicate owners, under
	// the backlink index's name).
	if err := db.ExecDBForTest(ctx, `DROP INDEX sluice_db_`+fmt.Sprint(d.ID)+`."`+owners+`"`); err != nil {
		t.Fatal(err)
	}
	if err := db.ExecDBForTest(ctx, `DROP INDEX sluice_db_`+fmt.Sprint(d.ID)+`."`+owner+`"`); err != nil {
		t.Fatal(err)
	}
	if err := db.ExecDBForTest(ctx, `CREATE UNIQUE INDEX CONCURRENTLY "`+owner+`" ON `+schemaTable("Item")+` (owner)`); err == nil {
		t.Fatal("a unique index over duplicates was built")
	}
	if ok, valid, err := db.IndexValidForTest(ctx, d, owner); err != nil || !ok || valid {
		t.Fatalf("the failed build left: exists %v, valid %v, %v", ok, valid, err)
	}
	if n, err := db.BuildReferenceIndexes(ctx); err != nil || n != 2 {
		t.Fatalf("BuildReferenceIndexes: built %d, %v; want 2", n, err)
	}
	got, err = db.IndexesForTest(ctx, d, "Item")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("after BuildReferenceIndexes, Item lacks %s; it has:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if ok, valid, err := db.IndexValidForTest(ctx, d, owner); err != nil || !ok || !valid {
		t.Fatalf("rebuilt index: exists %v, valid %v, %v", ok, valid, err)
	}
}

// A relation of another role's named as a backlink index that a table
// lacks is not taken for it: BuildReferenceIndexes counted the index
// built (CREATE INDEX IF NOT EXISTS kept the relation) and said nothing.
// It now returns an error naming it, and builds it once a superuser
// dropped it.
func TestReferenceIndexNotStoodInFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, _ := linkedDatabase(t, db, "standin", 4)
	owners := postgres.RefIndexNameForTest("Item", "owners")
	standIn := fmt.Sprintf(`sluice_db_%d."%s"`, d.ID, owners)
	role := fmt.Sprintf("standin_%d_%d", d.ID, time.Now().UnixNano())
	for _, stmt := range []string{"DROP INDEX " + standIn, "CREATE ROLE " + role, "CREATE TABLE " + standIn + " (x int)", "ALTER TABLE " + standIn + " OWNER TO " + role} {
		if err := db.ExecDBForTest(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		_ = db.ExecDBForTest(ctx, "DROP TABLE IF EXISTS "+standIn)
		_ = db.ExecDBForTest(ctx, "DROP ROLE "+role)
	})
	if n, err := db.BuildReferenceIndexes(ctx); err == nil || !strings.Contains(err.Error(), owners) || n != 0 {
		t.Fatalf("BuildReferenceIndexes over a table of another role named as the index: built %d, %v; want none and an error naming %s", n, err, owners)
	}
	if err := db.ExecDBForTest(ctx, "DROP TABLE "+standIn); err != nil {
		t.Fatal(err)
	}
	if n, err := db.BuildReferenceIndexes(ctx); err != nil || n != 1 {
		t.Fatalf("BuildReferenceIndexes: built %d, %v; want 1", n, err)
	}
	if ok, valid, err := db.IndexValidForTest(ctx, d, owners); err != nil || !ok || !valid {
		t.Fatalf("the index: exists %v, valid %v, %v", ok, valid, err)
	}
}

// An aggregate out of its type's range is the client's error, named.
func TestAggregateOutOfRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := linkedDatabase(t, db, "range", 4)
	_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			return w.Insert(ctx, []*sluice.Document{
				{ID: "Item/h1", Type: "Item", Fields: map[string]any{"price": 1.5e308}},
				{ID: "Item/h2", Type: "Item", Fields: map[string]any{"price": 1.5e308}},
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	q := postgres.AggregateQuery{Class: "Item", Classes: []string{"Item"}, Aggs: []postgres.Agg{{Op: "max", Field: "price"}}}
	if res, err := db.Aggregate(ctx, d, s, q); err != nil || res.Count != 6 || res.Values[0] != 1.5e308 {
		t.Fatalf("max: %+v, %v", res, err)
	}
	q.Aggs = []postgres.Agg{{Op: "sum", Field: "price"}}
	_, err = db.Aggregate(ctx, d, s, q)
	if sluice.ErrorCode(err) != sluice.CodeInvalid || sluice.ErrorMessage(err) != "an aggregate of Item is out of the range of its type (sum.price: a Float past ±1.8e308)" {
		t.Fatalf("sum past the largest float: %v", err)
	}
}

// TestAggregateTextIsBoundedByReads: under LimitReads, an aggregate's
// row is charged as a document's is, and its text values (a String's min
// and max are whole stored values) are sent only when together they fit
// in what is left: past it, ErrReadBytes, and Postgres sent none of them.
// They were read whole and never charged.
func TestAggregateTextIsBoundedByReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := linkedDatabase(t, db, "textbound", 4)
	const size = 1_000_000
	_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			return w.Insert(ctx, []*sluice.Document{
				{ID: "Item/h1", Type: "Item", Fields: map[string]any{"name": strings.Repeat("a", size)}},
				{ID: "Item/h2", Type: "Item", Fields: map[string]any{"name": strings.Repeat("z", size)}},
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	// The items' names are "item 00000" to "item 00003": in byte order,
	// the long ones are the min and the max.
	q := postgres.AggregateQuery{Class: "Item", Classes: []string{"Item"},
		Aggs: []postgres.Agg{{Op: "min", Field: "name"}, {Op: "max", Field: "name"}, {Op: "max", Field: "grp"}, {Op: "sum", Field: "big"}}}
	check := func(res postgres.AggregateResult) {
		t.Helper()
		if res.Count != 6 || res.Values[0] != strings.Repeat("a", size) || res.Values[1] != strings.Repeat("z", size) || res.Values[2] != int64(3) || res.Values[3] != "6000000000000" {
			t.Fatalf("count %d, values of %d and %d bytes, %v, %v", res.Count, len(fmt.Sprint(res.Values[0])), len(fmt.Sprint(res.Values[1])), res.Values[2], res.Values[3])
		}
	}
	res, err := db.Aggregate(ctx, d, s, q) // no bound
	if err != nil {
		t.Fatal(err)
	}
	check(res)
	// The row as Postgres sends it: the count and max(grp), 8 bytes
	// each (grp is an integer, read as 4), the two names, the sum's 13
	// digits, and whether the text fits, 1 byte.
	row := int64(8 + 2*size + 4 + 13 + 1)
	bctx := postgres.LimitReads(ctx, row)
	res, err = db.Aggregate(bctx, d, s, q)
	if err != nil {
		t.Fatalf("a row of %d bytes under a bound of as many: %v", row, err)
	}
	check(res)
	if left := postgres.ReadBytesLeftForTest(bctx); left != 0 {
		t.Errorf("the row was charged %d bytes, want %d", row-left, row)
	}
	// Past the bound, by one byte or by far, the text is not sent: what
	// is charged is the row without it.
	for _, bound := range []int64{2*size + 12, 2*size - 1, size, 100} {
		bctx := postgres.LimitReads(ctx, bound)
		_, err := db.Aggregate(bctx, d, s, q)
		if !errors.Is(err, postgres.ErrReadBytes) {
			t.Fatalf("bound %d: %v, want ErrReadBytes", bound, err)
		}
		if spent := bound - postgres.ReadBytesLeftForTest(bctx); spent > 8+4+1 {
			t.Errorf("bound %d: Postgres sent %d bytes, want the count, max(grp) and the flag alone", bound, spent)
		}
	}
	// The budget is shared with the request's other reads: what they
	// spent is not left for the aggregate.
	bctx = postgres.LimitReads(ctx, row+100)
	if _, err := db.QueryDocuments(bctx, d, s, postgres.DocQuery{Class: "Item", Classes: []string{"Item"}, Limit: -1, Filter: mustFilter(t, s, "Item", map[string]any{"_id": "Item/h1"})}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Aggregate(bctx, d, s, q); !errors.Is(err, postgres.ErrReadBytes) {
		t.Fatalf("after a read of a long document: %v, want ErrReadBytes", err)
	}
}

// TestBacklinksReadEachDocumentOnce: a document that links to several
// targets is in each of their lists, but is built, sent and decoded once
// with its commit (one document listing a thousand others was read a
// thousand times); the lists keep their order and contents.
func TestBacklinksReadEachDocumentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	d, s := linkedDatabase(t, db, "once", 40)
	// The items' commit, with a long message: read once per document too.
	msg := strings.Repeat("m", 10000)
	_, err := db.Write(ctx, postgres.WriteSpec{Database: d, Schema: s, Meta: postgres.CommitMeta{User: "admin", Message: msg},
		Documents: func(ctx context.Context, w *postgres.Writer) error {
			var docs []*sluice.Document
			for i := range 40 {
				docs = append(docs, &sluice.Document{ID: fmt.Sprintf("Item/i%05d", i), Type: "Item", Fields: map[string]any{
					"name": fmt.Sprintf("item %05d", i), "owners": []any{"Owner/big", "Owner/small"}}})
			}
			return w.Replace(ctx, docs, false)
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, fields := range [][]string{nil, {"name", "owners"}} {
		q := postgres.BacklinkQuery{Query: postgres.DocQuery{Class: "Item", Classes: []string{"Item"}, Limit: -1, Fields: fields},
			Field: "owners", Targets: []string{"Owner/big", "Owner/small"}, Total: 10001}
		// 40 documents in both lists: each with its commit's message
		// once is 400 KB; with them twice, 800 KB.
		lists, err := db.Backlinks(postgres.LimitReads(ctx, 600000), d, s, q)
		if err != nil {
			t.Fatal(err)
		}
		// Every item lists both owners.
		var big, small []string
		for _, x := range lists[0] {
			big = append(big, x.Doc.ID)
		}
		for _, x := range lists[1] {
			small = append(small, x.Doc.ID)
		}
		if len(big) != 40 || !slices.Equal(big, small) || !slices.IsSorted(big) {
			t.Fatalf("fields %v: lists %v and %v, want the 40 items in each, in order", fields, big, small)
		}
		for i := range lists[0] {
			a, b := lists[0][i], lists[1][i]
			if a.Doc != b.Doc || a.Doc.Fields["name"] == nil || a.Commit == nil || a.Commit.Message != msg || b.Commit != a.Commit {
				t.Errorf("fields %v: %s is read twice, or without its fields or commit: %+v and %+v", fields, big[i], a, b)
			}
		}
	}
}

// TestReferenceIndexBuildWaitsBoundedly: building a backlink index
// concurrently waits for every transaction of the database with an older
// snapshot, any role's, and holds meanwhile a lock on the table that the
// database's schema changes wait for: an idle REPEATABLE READ transaction
// held it for as long as it stayed open. The build now waits at most its
// lock timeout, fails naming it, and a later build makes the index.
func TestReferenceIndexBuildWaitsBoundedly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	db, err := postgres.Open(ctx, url, slog.New(slog.DiscardHandler), postgres.RefIndexLockWaitForTest(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	d, _ := linkedDatabase(t, db, "slowrefs", 5)
	owner := postgres.RefIndexNameForTest("Item", "owner")
	if err := db.ExecDBForTest(ctx, `DROP INDEX sluice_db_`+fmt.Sprint(d.ID)+`."`+owner+`"`); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1"); err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if n, err := db.BuildReferenceIndexes(bctx); err == nil || bctx.Err() != nil || !strings.Contains(err.Error(), "waited longer than 300ms") {
		t.Fatalf("BuildReferenceIndexes beside an idle REPEATABLE READ transaction: built %d, %v (context: %v), want a lock timeout", n, err, bctx.Err())
	}
	if _, err := other.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if n, err := db.BuildReferenceIndexes(ctx); err != nil || n != 1 {
		t.Fatalf("BuildReferenceIndexes once the transaction ended: built %d, %v; want 1", n, err)
	}
	if ok, valid, err := db.IndexValidForTest(ctx, d, owner); err != nil || !ok || !valid {
		t.Fatalf("Item.owner's backlink index: exists %v, valid %v, %v", ok, valid, err)
	}
}

// A schema change between BuildReferenceIndexes' read of a database's
// schema and its builds (here: Item.owner made an Int, whose column
// takes no btree in the "C" collation) failed the build, and the run
// stopped there: the databases after it got their indexes at the next
// start only. The database is now done again with its new schema, and
// the others are built.
func TestReferenceIndexesAcrossASchemaChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var db *postgres.DB
	var first *sluice.Database
	var firstSchema *sluice.Schema
	changed := false
	// Called by BuildReferenceIndexes on its own goroutine, before it
	// builds: the change commits right between the read and the build.
	hook := func(id int64) {
		if changed || first == nil || id != first.ID {
			return
		}
		changed = true
		next, err := schema.Parse(strings.Replace(linkSDL, "owner: Owner\n", "owner: Int\n", 1))
		if err != nil {
			t.Error(err)
			return
		}
		_, err = db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
			if err := tx.LockDatabase(ctx, first); err != nil {
				return err
			}
			return tx.ChangeSchema(ctx, first, firstSchema, next)
		}})
		if err != nil {
			t.Errorf("the schema change: %v", err)
		}
	}
	db, err := postgres.Open(ctx, pgtest.NewDatabase(t), slog.New(slog.DiscardHandler), postgres.RefIndexReadForTest(hook))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	d1, s1 := linkedDatabase(t, db, "first", 4)
	d2, _ := linkedDatabase(t, db, "second", 4)
	owner := postgres.RefIndexNameForTest("Item", "owner")
	// Both tables lack the index of owner, as tables made before
	// backlinks did.
	for _, d := range []*sluice.Database{d1, d2} {
		if err := db.ExecDBForTest(ctx, fmt.Sprintf(`DROP INDEX sluice_db_%d."%s"`, d.ID, owner)); err != nil {
			t.Fatal(err)
		}
	}
	first, firstSchema = d1, s1
	n, err := db.BuildReferenceIndexes(ctx)
	if !changed {
		t.Fatal("the schema change was not made")
	}
	if err != nil || n != 1 {
		t.Fatalf("BuildReferenceIndexes across a schema change of the first database: built %d, %v; want 1 (the second's), no error", n, err)
	}
	if ok, valid, err := db.IndexValidForTest(ctx, d2, owner); err != nil || !ok || !valid {
		t.Fatalf("the second database's index: exists %v, valid %v, %v", ok, valid, err)
	}
	if ok, _, err := db.IndexValidForTest(ctx, d1, owner); err != nil || ok {
		t.Fatalf("the first database's Item.owner, an Int now, has a backlink index: %v, %v", ok, err)
	}
}

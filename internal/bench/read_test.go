package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// readSDL is the class of the read benchmarks: the write benchmarks'
// Person with an indexed name and an indexed group (grp) of 100 documents.
const readSDL = `type Person { name: String! @index email: String! age: Int score: Float active: Boolean grp: Int @index }`

// readJSON returns document i of a class of n documents: grp holds each
// value 0..n/100-1 exactly 100 times, whatever n.
func readJSON(i, n int) string {
	return fmt.Sprintf(`{"@type":"Person","@id":"p%d","name":"Person %d","email":"p%d@example.com","age":%d,"score":%d.5,"active":true,"grp":%d}`,
		i, i, i, i%90, i, i%(n/100))
}

// readShape is a query shape whose cost must not grow with its class
// (issue 23).
type readShape struct {
	name string
	// query returns a request's GraphQL query; arg is random, below the
	// smaller class's size.
	query func(arg int) string
	// doc is the same query as storage sees it, for its EXPLAIN.
	doc func(s *sluice.Schema, arg int) (postgres.DocQuery, error)
}

var readShapes = []readShape{
	{"page-1000",
		func(int) string { return `{ Person(limit: 1000) { _id name email age score active } }` },
		func(*sluice.Schema, int) (postgres.DocQuery, error) {
			return postgres.DocQuery{Class: "Person", Classes: []string{"Person"}, Limit: 1000,
				Fields: []string{"_id", "name", "email", "age", "score", "active"}}, nil
		}},
	{"filter-100",
		func(arg int) string {
			return fmt.Sprintf(`{ Person(filter: {grp: {eq: %d}}) { _id name email age } }`, arg/100)
		},
		func(s *sluice.Schema, arg int) (postgres.DocQuery, error) {
			f, err := filter.Parse(s, "Person", map[string]any{"grp": map[string]any{"eq": int64(arg / 100)}})
			return postgres.DocQuery{Class: "Person", Classes: []string{"Person"}, Limit: 10001, Filter: f,
				Fields: []string{"_id", "name", "email", "age"}}, err
		}},
	{"by-id",
		func(arg int) string { return fmt.Sprintf(`{ Person(id: "Person/p%d") { _id name email age } }`, arg) },
		func(_ *sluice.Schema, arg int) (postgres.DocQuery, error) {
			return postgres.DocQuery{Class: "Person", Classes: []string{"Person"}, Limit: 10001,
				IDs: []string{fmt.Sprintf("Person/p%d", arg)}, Fields: []string{"_id", "name", "email", "age"}}, nil
		}},
}

// BenchmarkReadScale is issue 23's scale check: the same three reads
// (a default-ordered page of 1,000, an indexed filter matching 100
// documents, a lookup by id) against a class of 20,000 documents and one
// of 200,000 (SLUICE_BENCH_LARGE sets another size, such as 1000000), on
// one daemon, alternating request by request. It reports each side's
// median request time and their ratio per shape (target: at most 1.5),
// and, with SLUICE_BENCH_EXPLAIN set, prints the EXPLAIN ANALYZE of each
// shape on the larger class (on stderr, where it may split a result line).
func BenchmarkReadScale(b *testing.B) {
	const small = 20000
	large := 200000
	if v := os.Getenv("SLUICE_BENCH_LARGE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < small {
			b.Fatalf("SLUICE_BENCH_LARGE=%q: want a number of documents of at least %d", v, small)
		}
		large = n
	}
	dbURL := newDatabase(b)
	d := dt.Start(b, dt.WithDatabaseURL(dbURL))
	authz := "Bearer " + adminToken(b, d)
	for _, c := range []struct {
		name string
		n    int
	}{{"small", small}, {"large", large}} {
		d.CreateDatabase(b, c.name, readSDL)
		load(b, d, authz, c.name, c.n)
	}
	store, err := postgres.Open(context.Background(), dbURL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	vacuum(b, dbURL)
	if os.Getenv("SLUICE_BENCH_EXPLAIN") != "" {
		explain(b, store, "large", readShapes, large)
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	r := rand.New(rand.NewPCG(23, 23))
	times := map[string][]time.Duration{}
	for b.Loop() {
		for _, sh := range readShapes {
			q := sh.query(r.IntN(small))
			for _, db := range []string{"small", "large"} {
				start := time.Now()
				graphql(b, client, d.URL, authz, db, q)
				times[sh.name+"/"+db] = append(times[sh.name+"/"+db], time.Since(start))
			}
		}
	}
	for _, sh := range readShapes {
		s, l := median(times[sh.name+"/small"]), median(times[sh.name+"/large"])
		b.ReportMetric(float64(s.Microseconds())/1000, sh.name+"-20k-ms")
		b.ReportMetric(float64(l.Microseconds())/1000, fmt.Sprintf("%s-%dk-ms", sh.name, large/1000))
		b.ReportMetric(float64(l)/float64(s), sh.name+"-ratio")
	}
}

// load inserts n documents into database db in one NDJSON request.
func load(b *testing.B, d *dt.Daemon, authz, db string, n int) {
	b.Helper()
	pr, pw := io.Pipe()
	go func() {
		for i := range n {
			if _, err := io.WriteString(pw, readJSON(i, n)+"\n"); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", d.URL+"/api/document/admin/"+db, pr)
	req.Header.Set("Authorization", authz)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("load %s: %d %s", db, resp.StatusCode, out)
	}
}

// graphql runs a query against admin/<db> and fails b unless it answers
// data without errors.
func graphql(b *testing.B, client *http.Client, base, authz, db, query string) {
	body := `{"query":` + strconv.Quote(query) + `}`
	req, _ := http.NewRequest("POST", base+"/api/graphql/admin/"+db, strings.NewReader(body))
	req.Header.Set("Authorization", authz)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(out), `"errors"`) {
		b.Fatalf("%s on %s: %d %.300s", query, db, resp.StatusCode, out)
	}
}

// explain prints the EXPLAIN ANALYZE of each shape on database admin/<db>.
func explain(b *testing.B, store *postgres.DB, db string, shapes []readShape, n int) {
	ctx := context.Background()
	d, sdl, err := store.Database(ctx, "admin", db)
	if err != nil {
		b.Fatal(err)
	}
	s, err := schema.Parse(sdl)
	if err != nil {
		b.Fatal(err)
	}
	for _, sh := range shapes {
		q, err := sh.doc(s, n/2)
		if err != nil {
			b.Fatal(err)
		}
		plan, err := store.ExplainQuery(ctx, d, s, q, true)
		if err != nil {
			b.Fatal(err)
		}
		// On stderr: the testing package cuts a benchmark's log short.
		fmt.Fprintf(os.Stderr, "EXPLAIN %s on %d documents:\n%s\n", sh.name, n, plan)
	}
}

// vacuum runs VACUUM ANALYZE on the database at dbURL: what autovacuum
// does after a bulk load, before reads matter.
func vacuum(b *testing.B, dbURL string) {
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
}

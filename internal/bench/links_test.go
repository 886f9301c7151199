package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// linksSDL is the class of BenchmarkLinksScale: items with an indexed
// group and an owner.
const linksSDL = `type Owner { name: String! } type Item { name: String! grp: Int @index owner: Owner }`

// linksJSON returns item i of a database of n: the first n point at
// Owner/big, and their grp holds each value 0..n/100-1 exactly 100 times,
// whatever n; each of the n/10 after them (grp -1) at an owner of its
// own, so that Postgres' statistics see one document with many links
// among many with one, as real data has a few much-linked documents
// among many others.
func linksJSON(i, n int) string {
	owner, grp := "big", i%(n/100)
	if i >= n {
		owner, grp = fmt.Sprintf("o%d", i-n), -1
	}
	return fmt.Sprintf(`{"@type":"Item","@id":"i%d","name":"Item %d","grp":%d,"owner":"Owner/%s"}`, i, i, grp, owner)
}

// linkShapes are the reads BenchmarkLinksScale times: a count over an
// @index filter that selects 100 documents, a page of 100 of the
// backlinks of the document every item of the class points at, and, for
// contrast, a count of the whole class.
var linkShapes = []struct {
	name  string
	query func(arg int) string
}{
	{"count-indexed", func(arg int) string { return fmt.Sprintf(`{ Item_aggregate(filter: {grp: {eq: %d}}) { count } }`, arg) }},
	{"backlink-page", func(int) string { return `{ Owner(id: "Owner/big") { _owner_of_Item(limit: 100) { _id name } } }` }},
	{"count-all", func(int) string { return `{ Item_aggregate { count } }` }},
}

// BenchmarkLinksScale is issue 35's scale check: the same reads against
// classes of 200, 20,000 and 200,000 items (each with a tenth more that
// point at an owner each), on one daemon, alternating request by
// request.
// It reports each size's median request time per shape and the ratio of
// each larger size's to the smallest's (target for count-indexed and
// backlink-page: flat; count-all grows with the class, for contrast),
// and, with SLUICE_BENCH_EXPLAIN set, prints the plans of the indexed
// count and the backlink page on each size (on stderr).
func BenchmarkLinksScale(b *testing.B) {
	sizes := []int{200, 20000, 200000}
	dbURL := newDatabase(b)
	d := dt.Start(b, dt.WithDatabaseURL(dbURL))
	authz := "Bearer " + adminToken(b, d)
	for _, n := range sizes {
		db := fmt.Sprintf("links%d", n)
		d.CreateDatabase(b, db, linksSDL)
		loadWith(b, d, authz, db, n+n/10, func(i int) string { return linksJSON(i, n) })
		owners := []string{`{"@type":"Owner","@id":"big","name":"Big"}`}
		for i := range n / 10 {
			owners = append(owners, fmt.Sprintf(`{"@type":"Owner","@id":"o%d","name":"O%d"}`, i, i))
		}
		loadWith(b, d, authz, db, len(owners), func(i int) string { return owners[i] })
	}
	vacuum(b, dbURL)
	if os.Getenv("SLUICE_BENCH_EXPLAIN") != "" {
		for _, n := range sizes {
			explainLinks(b, dbURL, fmt.Sprintf("links%d", n))
		}
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	r := rand.New(rand.NewPCG(35, 35))
	times := map[string][]time.Duration{}
	round := 0
	for b.Loop() {
		round++
		for _, sh := range linkShapes {
			q := sh.query(r.IntN(sizes[0] / 100))
			for j := range sizes {
				n := sizes[(j+round)%len(sizes)] // no size always goes first
				key := fmt.Sprintf("%s/%d", sh.name, n)
				start := time.Now()
				graphql(b, client, d.URL, authz, fmt.Sprintf("links%d", n), q)
				times[key] = append(times[key], time.Since(start))
			}
		}
	}
	for _, sh := range linkShapes {
		base := median(times[fmt.Sprintf("%s/%d", sh.name, sizes[0])])
		for _, n := range sizes {
			m := median(times[fmt.Sprintf("%s/%d", sh.name, n)])
			b.ReportMetric(float64(m.Microseconds())/1000, fmt.Sprintf("%s-%s-ms", sh.name, sizeName(n)))
			if n != sizes[0] {
				b.ReportMetric(float64(m)/float64(base), fmt.Sprintf("%s-%s/%s", sh.name, sizeName(n), sizeName(sizes[0])))
			}
		}
	}
}

func sizeName(n int) string {
	if n >= 1000 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// loadWith inserts n documents, doc(0) … doc(n-1), into database db in
// one NDJSON request.
func loadWith(b *testing.B, d *dt.Daemon, authz, db string, n int, doc func(int) string) {
	b.Helper()
	pr, pw := io.Pipe()
	go func() {
		for i := range n {
			if _, err := io.WriteString(pw, doc(i)+"\n"); err != nil {
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

// explainLinks prints the EXPLAIN ANALYZE of the indexed count and of the
// backlink page on database admin/<db>.
func explainLinks(b *testing.B, dbURL, db string) {
	ctx := context.Background()
	store, err := postgres.Open(ctx, dbURL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	d, sdl, err := store.Database(ctx, "admin", db)
	if err != nil {
		b.Fatal(err)
	}
	s, err := schema.Parse(sdl)
	if err != nil {
		b.Fatal(err)
	}
	f, err := filter.Parse(s, "Item", map[string]any{"grp": map[string]any{"eq": int64(1)}})
	if err != nil {
		b.Fatal(err)
	}
	count, err := store.ExplainAggregate(ctx, d, s, postgres.AggregateQuery{Class: "Item", Classes: []string{"Item"}, Filter: f}, true)
	if err != nil {
		b.Fatal(err)
	}
	page, err := store.ExplainBacklinks(ctx, d, s, postgres.BacklinkQuery{
		Query: postgres.DocQuery{Class: "Item", Classes: []string{"Item"}, Limit: 100, Fields: []string{"_id", "name"}},
		Field: "owner", Targets: []string{"Owner/big"}, Total: 10001}, true)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "EXPLAIN count-indexed on %s:\n%s\nEXPLAIN backlink-page on %s:\n%s\n", db, count, db, page)
}

package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
)

// BenchmarkPast measures reads of the past (issue 34) on `sluice serve`
// run as its own process: a class of 200,000 documents (readSDL), then
// 10,000 commits each replacing one random document (SLUICE_BENCH_PAST_
// COMMITS sets another number). It times, alternating request by request,
// the same page now and as of the position before those commits: the
// first 100 by id over GraphQL and REST, and the 100 of one indexed group
// (a filter); and the whole diff of those commits, paged by 1,000. It
// reports medians, their ratios, and the server's peak RSS (VmHWM, reset
// before each phase) while it served the pages now, the pages as of the
// position, and the diff, after a round of both (its RSS then:
// rss-before). With SLUICE_BENCH_EXPLAIN set, it prints the
// EXPLAIN ANALYZE of the page as of the position on stderr.
func BenchmarkPast(b *testing.B) {
	const n = 200000
	commits := 10000
	if v := os.Getenv("SLUICE_BENCH_PAST_COMMITS"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 1 {
			b.Fatalf("SLUICE_BENCH_PAST_COMMITS=%q: want a number of commits", v)
		}
		commits = c
	}
	bin := buildBinary(b, b.TempDir(), "github.com/sluice-dev/sluice/cmd/sluice")
	dbURL := newDatabase(b)
	p, authz := startSluiceBench(b, bin, dbURL, readSDL)
	base := "http://" + p.Addr
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 10 * time.Minute}
	loadURL(b, client, base, authz, "bench", n)
	pos := readPosition(b, client, base, authz)
	replaceRandom(b, client, base, authz, n, commits)
	vacuum(b, dbURL)
	if os.Getenv("SLUICE_BENCH_EXPLAIN") != "" {
		explainPast(b, dbURL, pos)
	}

	q := url.QueryEscape(pos)
	shapes := []struct {
		name      string
		now, past func(arg int) (method, path, body string)
	}{
		{"page",
			func(int) (string, string, string) {
				return "POST", "/api/graphql/admin/bench", `{"query":"{ Person(limit: 100) { _id name email age } }"}`
			},
			func(int) (string, string, string) {
				return "POST", "/api/graphql/admin/bench", `{"query":"{ Person(limit: 100, asOf: \"` + pos + `\") { _id name email age } }"}`
			}},
		{"filter",
			func(arg int) (string, string, string) {
				return "POST", "/api/graphql/admin/bench", fmt.Sprintf(`{"query":"{ Person(filter: {grp: {eq: %d}}) { _id name email age } }"}`, arg%(n/100))
			},
			func(arg int) (string, string, string) {
				return "POST", "/api/graphql/admin/bench", fmt.Sprintf(`{"query":"{ Person(filter: {grp: {eq: %d}}, asOf: \"%s\") { _id name email age } }"}`, arg%(n/100), pos)
			}},
		{"rest",
			func(int) (string, string, string) {
				return "GET", "/api/document/admin/bench?type=Person&count=100", ""
			},
			func(int) (string, string, string) {
				return "GET", "/api/document/admin/bench?type=Person&count=100&as_of=" + q, ""
			}},
	}
	do := func(method, path, body string) {
		if _, err := sendJSON(client, method, base+path, authz, body, http.StatusOK); err != nil {
			b.Fatal(err)
		}
	}
	const warm = 200 // requests per shape of each RSS phase
	r := rand.New(rand.NewPCG(34, 34))
	// A round of each first, so that what the load left in the heap is
	// not counted against the first phase.
	for range warm / 4 {
		for _, sh := range shapes {
			do(sh.now(r.IntN(n)))
			do(sh.past(r.IntN(n)))
		}
	}
	rssBefore := p.rss(b)
	p.resetPeak(b)
	for range warm {
		for _, sh := range shapes {
			do(sh.now(r.IntN(n)))
		}
	}
	rssNow := p.peakRSS(b)
	p.resetPeak(b)
	for range warm {
		for _, sh := range shapes {
			do(sh.past(r.IntN(n)))
		}
	}
	rssPast := p.peakRSS(b)

	times := map[string][]time.Duration{}
	for b.Loop() {
		for _, sh := range shapes {
			arg := r.IntN(n)
			start := time.Now()
			do(sh.now(arg))
			times[sh.name+"/now"] = append(times[sh.name+"/now"], time.Since(start))
			start = time.Now()
			do(sh.past(arg))
			times[sh.name+"/past"] = append(times[sh.name+"/past"], time.Since(start))
		}
	}
	for _, sh := range shapes {
		now, past := median(times[sh.name+"/now"]), median(times[sh.name+"/past"])
		b.ReportMetric(float64(now.Microseconds())/1000, sh.name+"-now-ms")
		b.ReportMetric(float64(past.Microseconds())/1000, sh.name+"-past-ms")
		b.ReportMetric(float64(past)/float64(now), sh.name+"-ratio")
	}

	// The whole diff, page by page, three times.
	p.resetPeak(b)
	var diffs []time.Duration
	entries, pages := 0, 0
	for range 3 {
		start := time.Now()
		entries, pages = diffAll(b, client, base, authz, pos)
		diffs = append(diffs, time.Since(start))
	}
	rssDiff := p.peakRSS(b)
	b.ReportMetric(float64(median(diffs).Milliseconds()), "diff-ms")
	b.ReportMetric(float64(entries), "diff-documents")
	b.ReportMetric(float64(pages), "diff-pages")
	// (Metrics reported before b.Loop are reset by it.)
	b.ReportMetric(float64(rssBefore)/(1<<20), "rss-before-MB")
	b.ReportMetric(float64(rssNow)/(1<<20), "peak-rss-now-MB")
	b.ReportMetric(float64(rssPast)/(1<<20), "peak-rss-past-MB")
	b.ReportMetric(float64(rssDiff)/(1<<20), "peak-rss-diff-MB")
}

// loadURL inserts n documents (readJSON) into admin/<db> of the server at
// base in one NDJSON request.
func loadURL(b *testing.B, client *http.Client, base, authz, db string, n int) {
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
	req, _ := http.NewRequest("POST", base+"/api/document/admin/"+db, pr)
	req.Header.Set("Authorization", authz)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("load %s: %d %s", db, resp.StatusCode, out)
	}
}

// readPosition returns the position a read of admin/bench answers now.
func readPosition(b *testing.B, client *http.Client, base, authz string) string {
	req, _ := http.NewRequest("GET", base+"/api/document/admin/bench?type=Person&count=0", nil)
	req.Header.Set("Authorization", authz)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	pos := resp.Header.Get("Sluice-Position")
	if pos == "" {
		b.Fatalf("no Sluice-Position: %d", resp.StatusCode)
	}
	return pos
}

// replaceRandom makes commits commits, each replacing one random document
// of admin/bench's n, from 8 concurrent writers.
func replaceRandom(b *testing.B, client *http.Client, base, authz string, n, commits int) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 34))
			for k := w; k < commits; k += 8 {
				i := r.IntN(n)
				doc := fmt.Sprintf(`{"@type":"Person","@id":"Person/p%d","name":"Person %d v%d","email":"p%d@example.com","age":%d,"score":%d.5,"active":false,"grp":%d}`,
					i, i, k, i, (i+k)%90, i, i%(n/100))
				if _, err := sendJSON(client, http.MethodPut, base+"/api/document/admin/bench", authz, doc, http.StatusOK); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// diffAll reads the whole diff of admin/bench from position from, page by
// page, and returns the documents and pages it held.
func diffAll(b *testing.B, client *http.Client, base, authz, from string) (int, int) {
	path := "/api/diff/admin/bench?count=1000&from=" + url.QueryEscape(from)
	entries, pages := 0, 0
	for {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", authz)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var page struct {
			More    bool
			Changes []struct {
				ID string `json:"@id"`
			}
		}
		err = jsonDecode(resp.Body, &page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("diff page %d: %d %v", pages, resp.StatusCode, err)
		}
		pages++
		entries += len(page.Changes)
		link := resp.Header.Get("Link")
		if !page.More {
			return entries, pages
		}
		path = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
	}
}

// explainPast prints the EXPLAIN ANALYZE of the first page of 100 of
// admin/bench as of position pos.
func explainPast(b *testing.B, dbURL, pos string) {
	ctx := context.Background()
	store, err := postgres.Open(ctx, dbURL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	d, sdl, err := store.Database(ctx, "admin", "bench")
	if err != nil {
		b.Fatal(err)
	}
	s, err := schema.Parse(sdl)
	if err != nil {
		b.Fatal(err)
	}
	p, err := sluice.ParsePosition(pos)
	if err != nil {
		b.Fatal(err)
	}
	snap := store.Snapshot(d)
	defer snap.Close()
	snap.SetAsOf(&postgres.AsOf{Pos: p})
	plan, err := store.ExplainQuery(postgres.WithSnapshot(ctx, snap), d, s, postgres.DocQuery{Class: "Person", Classes: []string{"Person"}, Limit: 100,
		Fields: []string{"_id", "name", "email", "age"}}, true)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "EXPLAIN the first page as of %s:\n%s\n", pos, plan)
}

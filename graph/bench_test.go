package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/engine"
)

// BenchmarkQueries measures GraphQL requests (through the whole handler:
// authorization, parsing with the query cache, SQL, JSON) against the same
// result fetched with one hand-written SQL statement through pgx, in the
// same run, on 2,000 Person documents with 3 friends each. Both run with
// b.RunParallel at GOMAXPROCS concurrency; see docs/benchmarks.md.
func BenchmarkQueries(b *testing.B) {
	st := newStack(b, testSDL)
	const n = 2000
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf(`{"@type":"Person","@id":"p%04d","name":"P%d","age":%d,"friends":["Person/p%04d","Person/p%04d","Person/p%04d"]}`,
			i, i, i%90, (i+1)%n, (i+7)%n, (i+31)%n))
	}
	st.insert(b, "["+strings.Join(docs, ",")+"]")
	d := mustDB(b, st)
	table := pgx.Identifier{fmt.Sprintf("sluice_db_%d", d.ID), "Person"}.Sanitize()
	pool, err := pgxpool.New(context.Background(), st.url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)

	filtered := `{ Person(filter: {age: {ge: 30, lt: 60}}, limit: 100) { _id name age } }`
	filteredSQL := `SELECT coalesce(json_agg(json_build_object('_id', _id, 'name', name, 'age', age) ORDER BY _id COLLATE "C"), '[]')
		FROM (SELECT _id, name, age FROM ` + table + ` WHERE age >= $1 AND age < $2 ORDER BY _id COLLATE "C" LIMIT 100) t`
	nested := `{ Person(filter: {age: {ge: 30, lt: 60}}, limit: 100) { _id name friends { _id name age } } }`
	nestedSQL := `SELECT coalesce(json_agg(json_build_object('_id', t._id, 'name', t.name, 'friends',
			(SELECT coalesce(json_agg(json_build_object('_id', f._id, 'name', f.name, 'age', f.age) ORDER BY e.i), '[]')
			 FROM jsonb_array_elements_text(t.friends) WITH ORDINALITY e(id, i) JOIN ` + table + ` f ON f._id = e.id)) ORDER BY t._id COLLATE "C"), '[]')
		FROM (SELECT _id, name, friends FROM ` + table + ` WHERE age >= $1 AND age < $2 ORDER BY _id COLLATE "C" LIMIT 100) t`

	for _, c := range []struct{ name, query, sql string }{
		{"filtered", filtered, filteredSQL},
		{"nested", nested, nestedSQL},
	} {
		body, _ := json.Marshal(map[string]any{"query": c.query})
		// Check both give the same documents before timing them.
		gq := st.query(b, c.query, nil).mustOK(b)
		var sqlJSON []byte
		if err := pool.QueryRow(context.Background(), c.sql, 30, 60).Scan(&sqlJSON); err != nil {
			b.Fatal(err)
		}
		if !sameJSON(b, gq.Data, []byte(`{"Person":`+string(sqlJSON)+`}`)) {
			b.Fatalf("%s: GraphQL and SQL results differ:\n%s\n%s", c.name, gq.Data, sqlJSON)
		}
		b.Run(c.name+"/graphql", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest(http.MethodPost, "/api/graphql/admin/db", strings.NewReader(string(body)))
					req.Header.Set("Content-Type", "application/json")
					req = req.WithContext(auth.WithUser(req.Context(), st.admin))
					rec := httptest.NewRecorder()
					st.router.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("status %d", rec.Code)
					}
					_, _ = io.Copy(io.Discard, rec.Body)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
		b.Run(c.name+"/sql", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var out []byte
					if err := pool.QueryRow(context.Background(), c.sql, 30, 60).Scan(&out); err != nil {
						b.Fatal(err)
					}
					// The same envelope the GraphQL response has.
					resp := append(append([]byte(`{"data":{"Person":`), out...), "}}"...)
					_ = resp
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// BenchmarkLiteralLookups measures lookups by id whose query text holds
// the id, as the peer benchmark's do: every request is a text the query
// cache has not seen (parsed, and validated unless its shape was), through
// the whole handler, 2 at a time; see docs/benchmarks.md.
func BenchmarkLiteralLookups(b *testing.B) {
	st := newStack(b, testSDL)
	const n = 2000
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf(`{"@type":"Person","@id":"p%04d","name":"P%d","age":%d}`, i, i, i%90))
	}
	st.insert(b, "["+strings.Join(docs, ",")+"]")
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := fmt.Sprintf(`{"query":"{ Person(id: \"Person/p%04d\") { _id name age } }"}`, next.Add(1)%n)
			req := httptest.NewRequest(http.MethodPost, "/api/graphql/admin/db", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req = req.WithContext(auth.WithUser(req.Context(), st.admin))
			rec := httptest.NewRecorder()
			st.router.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"_id"`) {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	})
}

func sameJSON(t testing.TB, a, b []byte) bool {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// BenchmarkFragmentBomb measures the CPU the whole handler spends refusing
// the 30-level fragment bomb (2^31 fields once expanded; before the
// document limits, gqlgen's complexity walk never finished it), one
// request at a time; see docs/benchmarks.md.
func BenchmarkFragmentBomb(b *testing.B) {
	st := newStack(b, testSDL)
	body, _ := json.Marshal(map[string]any{"query": fragmentBomb(30)})
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	b.ResetTimer()
	for range b.N {
		req := httptest.NewRequest(http.MethodPost, "/api/graphql/admin/db", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(auth.WithUser(req.Context(), st.admin))
		rec := httptest.NewRecorder()
		st.router.ServeHTTP(rec, req)
		if !strings.Contains(rec.Body.String(), "graphql_max_fields") {
			b.Fatalf("not refused by the fields limit: %s", rec.Body)
		}
	}
	b.ReportMetric(float64(cpu()-start)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkPastBacklinks measures a backlink read as of a position every
// linking document has changed since: 3,000 users each with one note,
// every note rewritten after the position. Each request lists every
// user's notes: now, as of the position, and, for contrast, the notes'
// references as of the position. See docs/benchmarks.md ("Reads of the
// past").
func BenchmarkPastBacklinks(b *testing.B) {
	st := newStack(b, `type User { name: String } type Note { owner: User title: String }`)
	const n = 3000
	docs := func(f func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	st.insert(b, docs(func(i int) string { return fmt.Sprintf(`{"@type":"User","@id":"u%04d","name":"u%d"}`, i, i) }))
	st.insert(b, docs(func(i int) string {
		return fmt.Sprintf(`{"@type":"Note","@id":"n%04d","owner":"User/u%04d","title":"a"}`, i, i)
	}))
	var res struct{ Extensions struct{ Position string } }
	if err := json.Unmarshal([]byte(st.query(b, `{ Note(limit: 0) { _id } }`, nil).mustOK(b).raw), &res); err != nil {
		b.Fatal(err)
	}
	var raw []map[string]any
	if err := json.Unmarshal([]byte(docs(func(i int) string {
		return fmt.Sprintf(`{"@type":"Note","@id":"n%04d","owner":"User/u%04d","title":"b"}`, i, i)
	})), &raw); err != nil {
		b.Fatal(err)
	}
	if _, err := st.eng.Replace(context.Background(), st.admin, "admin", "db", &docSource{docs: raw}, engine.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	vars := map[string]any{"p": res.Extensions.Position}
	for _, c := range []struct{ name, query string }{
		{"backlinks/now", `{ User { _owner_of_Note { _id title } } }`},
		{"backlinks/asOf", `query($p: String) { User(asOf: $p) { _owner_of_Note { _id title } } }`},
		{"references/asOf", `query($p: String) { Note(asOf: $p) { owner { _id } } }`},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if out := st.query(b, c.query, vars).mustOK(b); len(out.Data) < n*20 {
					b.Fatalf("%.200s", out.raw)
				}
			}
		})
	}
}

// BenchmarkEventReferences measures a subscription's evaluation of one
// commit (Events), adding one note of one of 1,000 users, whose selection
// reads the note's owner, or not: on the newest commit (a live stream
// keeping up) and on a commit 100 commits behind, each changing a user
// (a stream resumed, or lagging under continuous writes), whose owner is
// read as of the commit. See docs/benchmarks.md ("Events").
func BenchmarkEventReferences(b *testing.B) {
	st := newStack(b, `type User { name: String } type Note { owner: User title: String }`)
	const users = 1000
	parts := make([]string, users)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"@type":"User","@id":"u%04d","name":"u%d"}`, i, i)
	}
	st.insert(b, "["+strings.Join(parts, ",")+"]")
	st.insert(b, `[{"@type":"Note","@id":"n0","owner":"User/u0000","title":"a"}]`)
	behind := int64(2)
	st.insert(b, `[{"@type":"Note","@id":"n1","owner":"User/u0001","title":"a"}]`)
	for i := range 100 {
		st.query(b, fmt.Sprintf(`mutation { User_replace(documents: [{_id: "User/u%04d", name: "v%d"}]) }`, i, i), nil).mustOK(b)
	}
	st.insert(b, `[{"@type":"Note","@id":"n2","owner":"User/u0002","title":"a"}]`)
	ctx := context.Background()
	for _, c := range []struct {
		name, sel string
		seq       int64
	}{
		{"plain/newest", `{ _id title }`, 0},
		{"plain/behind", `{ _id title }`, behind},
		{"owner/newest", `{ _id owner { name } }`, 0},
		{"owner/behind", `{ _id owner { name } }`, behind},
	} {
		b.Run(c.name, func(b *testing.B) {
			events, err := graph.SubscriptionEvents(ctx, st.eng, st.admin, "admin", "db", `subscription { Note_added `+c.sel+` }`, c.seq)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				evs, err := events()
				if err != nil || len(evs) != 1 {
					b.Fatalf("%v, %d events", err, len(evs))
				}
			}
		})
	}
}

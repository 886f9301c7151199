package bench

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgembed"
)

const personSDL = `type Person { name: String! email: String! age: Int score: Float active: Boolean }`

// indexedPersonSDL is personSDL with two indexes, to measure what indexes
// cost writes: SLUICE_BENCH_INDEXED=1 makes the write benchmarks use it.
const indexedPersonSDL = `type Person @index(fields: ["age", "name"]) { name: String! @index email: String! age: Int score: Float active: Boolean }`

// writeSDL returns the schema the write benchmarks' Sluice side uses.
func writeSDL() string {
	if os.Getenv("SLUICE_BENCH_INDEXED") != "" {
		return indexedPersonSDL
	}
	return personSDL
}

// rawTable has the same columns as Sluice's Person table, without change
// capture: the baseline.
const rawTable = `CREATE TABLE raw_person (_id text PRIMARY KEY, _commit_uid bigint NOT NULL,
	name text, email text, age integer, score double precision, active boolean)`

var dbCounter atomic.Int64

// newDatabase creates a fresh Postgres database on the durable cluster.
func newDatabase(b *testing.B) string {
	b.Helper()
	return newDatabaseOn(b, cluster)
}

// newDatabaseOn creates a fresh Postgres database on the cluster c.
func newDatabaseOn(b *testing.B, c *pgembed.Postgres) string {
	b.Helper()
	name := fmt.Sprintf("bench_%d", dbCounter.Add(1))
	conn, err := pgx.Connect(context.Background(), c.URL("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	return c.URL(name)
}

func personJSON(i int) string {
	return fmt.Sprintf(`{"@type":"Person","@id":"p%d","name":"Person %d","email":"p%d@example.com","age":%d,"score":%d.5,"active":true}`, i, i, i, i%90, i)
}

func personRow(i int) []any {
	return []any{fmt.Sprintf("Person/p%d", i), int64(1), fmt.Sprintf("Person %d", i), fmt.Sprintf("p%d@example.com", i), int32(i % 90), float64(i) + 0.5, true}
}

var personCols = []string{"_id", "_commit_uid", "name", "email", "age", "score", "active"}

// sluiceTarget starts a daemon on a fresh durable database with the Person
// schema and returns a function that POSTs a body as the admin with an API
// token, as a service would.
func sluiceTarget(b *testing.B) func(body string) {
	d := dt.Start(b, dt.WithDatabaseURL(newDatabase(b)))
	d.CreateDatabase(b, "bench", writeSDL())
	return poster(b, d, "Bearer "+adminToken(b, d))
}

// adminToken returns a new API token of the admin user.
func adminToken(b *testing.B, d *dt.Daemon) string {
	var tok struct{ Token string }
	r := d.MustDo(b, 201, dt.Admin(), "POST", "/api/tokens", `{"name":"bench"}`)
	if err := jsonUnmarshal(r.Body, &tok); err != nil {
		b.Fatal(err)
	}
	return tok.Token
}

// poster returns a function that POSTs a body to admin/bench with the
// Authorization header authz. With SLUICE_BENCH_IDEMPOTENCY=1 each request
// carries an Idempotency-Key of its own, to measure what keys cost writes.
func poster(b *testing.B, d *dt.Daemon, authz string) func(body string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	url := d.URL + "/api/document/admin/bench"
	keyed := os.Getenv("SLUICE_BENCH_IDEMPOTENCY") != ""
	var keys atomic.Int64
	return func(body string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", authz)
		if keyed {
			req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d", keys.Add(1)))
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Errorf("POST: %d %s", resp.StatusCode, out)
		}
	}
}

// BenchmarkWriteLatencyByAuth writes one document per request, one request
// at a time, alternating Basic auth and an API token on one daemon, and
// reports each side's latency percentiles (ms): a client that keeps
// presenting the same password pays its bcrypt once, so both sides should
// look the same.
func BenchmarkWriteLatencyByAuth(b *testing.B) {
	d := dt.Start(b, dt.WithDatabaseURL(newDatabase(b)))
	d.CreateDatabase(b, "bench", personSDL)
	basic := poster(b, d, "Basic "+base64.StdEncoding.EncodeToString([]byte("admin:"+dt.AdminPassword)))
	bearer := poster(b, d, "Bearer "+adminToken(b, d))
	var basicTimes, bearerTimes []time.Duration
	i := 0
	for b.Loop() {
		for _, side := range []struct {
			post  func(string)
			times *[]time.Duration
		}{{basic, &basicTimes}, {bearer, &bearerTimes}} {
			start := time.Now()
			side.post(personJSON(i))
			*side.times = append(*side.times, time.Since(start))
			i++
		}
	}
	for _, side := range []struct {
		name  string
		times []time.Duration
	}{{"basic", basicTimes}, {"bearer", bearerTimes}} {
		ts := slices.Clone(side.times)
		slices.Sort(ts)
		ms := func(q float64) float64 { return float64(ts[int(q*float64(len(ts)-1))].Microseconds()) / 1000 }
		b.ReportMetric(ms(0.5), side.name+"-p50-ms")
		b.ReportMetric(ms(0.99), side.name+"-p99-ms")
		b.ReportMetric(ms(1), side.name+"-max-ms")
	}
}

func rawPool(b *testing.B) *pgxpool.Pool {
	pool, err := pgxpool.New(context.Background(), newDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), rawTable); err != nil {
		b.Fatal(err)
	}
	return pool
}

// BenchmarkWriteBatch1000 is target (a): one request at a time, each
// committing 1,000 documents. The two sides alternate request by request
// (this machine's load drifts over seconds; alternating exposes both to the
// same drift), and each side's figure comes from its median request time.
func BenchmarkWriteBatch1000(b *testing.B) {
	const batch = 1000
	post := sluiceTarget(b)
	pool := rawPool(b)
	next := 0
	var sluiceTimes, rawTimes []time.Duration
	// CPU per request of each side, as in BenchmarkWriteConcurrent8: this
	// process's (for Sluice, the daemon and its HTTP client) and the
	// cluster's. Read around each request, outside its timing.
	pgURL := cluster.URL("postgres")
	var slSelf, slPG, rawSelf, rawPG time.Duration
	cpu := func(self, pg *time.Duration, f func()) {
		s, p := cpuDuring(b, pgURL, f)
		*self += s
		*pg += p
	}
	for b.Loop() {
		var body strings.Builder
		body.Grow(batch * 140)
		body.WriteByte('[')
		for i := range batch {
			if i > 0 {
				body.WriteByte(',')
			}
			body.WriteString(personJSON(next + i))
		}
		body.WriteByte(']')
		cpu(&slSelf, &slPG, func() {
			start := time.Now()
			post(body.String())
			sluiceTimes = append(sluiceTimes, time.Since(start))
		})
		cpu(&rawSelf, &rawPG, func() {
			start := time.Now()
			rows := make([][]any, batch)
			for i := range rows {
				rows[i] = personRow(next + i)
			}
			err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
				_, err := tx.CopyFrom(context.Background(), pgx.Identifier{"raw_person"}, personCols, pgx.CopyFromRows(rows))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			rawTimes = append(rawTimes, time.Since(start))
		})
		next += batch
	}
	s, r := median(sluiceTimes), median(rawTimes)
	b.ReportMetric(batch/s.Seconds(), "sluice-docs/s")
	b.ReportMetric(batch/r.Seconds(), "raw-docs/s")
	b.ReportMetric(r.Seconds()/s.Seconds(), "ratio")
	perReq := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(len(sluiceTimes)) }
	b.ReportMetric(perReq(slSelf), "sluice-go-µs/req")
	b.ReportMetric(perReq(slPG), "sluice-pg-µs/req")
	b.ReportMetric(perReq(rawSelf), "raw-go-µs/req")
	b.ReportMetric(perReq(rawPG), "raw-pg-µs/req")
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkWriteConcurrent8 is target (b): 8 concurrent clients, each
// committing one document per request, into one database. b.N counts
// documents per side. The sides alternate in rounds of 400 documents, so
// that both see the same load drift, and each side's figure is its
// documents over the time its rounds took. It also reports each side's
// CPU per document during its rounds: this process's (for Sluice, the
// daemon and its HTTP client; for raw pgx, the client) and the Postgres
// cluster's, which say whether a side was bound by CPU or by waiting
// (2 cores: 2 s of CPU a second at most).
func BenchmarkWriteConcurrent8(b *testing.B) {
	const clients, round = 8, 400
	// run writes documents [from, to) with 8 clients and returns how long
	// it took.
	run := func(from, to int, write func(i int)) time.Duration {
		next := atomic.Int64{}
		next.Store(int64(from))
		var wg sync.WaitGroup
		start := time.Now()
		for range clients {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= to {
						return
					}
					write(i)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	post := sluiceTarget(b)
	pool := rawPool(b)
	sql := "INSERT INTO raw_person (_id, _commit_uid, name, email, age, score, active) VALUES ($1, $2, $3, $4, $5, $6, $7)"
	pgURL := cluster.URL("postgres")
	// side is one side's time and CPU over its rounds.
	type side struct{ wall, self, pg time.Duration }
	var sl, raw side
	measure := func(s *side, from, to int, write func(i int)) {
		self, pg := cpuDuring(b, pgURL, func() { s.wall += run(from, to, write) })
		s.self += self
		s.pg += pg
	}
	b.ResetTimer()
	for from := 0; from < b.N; from += round {
		to := min(from+round, b.N)
		measure(&sl, from, to, func(i int) { post(personJSON(i)) })
		measure(&raw, from, to, func(i int) {
			if _, err := pool.Exec(context.Background(), sql, personRow(i)...); err != nil {
				b.Error(err)
			}
		})
	}
	b.ReportMetric(float64(b.N)/sl.wall.Seconds(), "sluice-docs/s")
	b.ReportMetric(float64(b.N)/raw.wall.Seconds(), "raw-docs/s")
	b.ReportMetric(raw.wall.Seconds()/sl.wall.Seconds(), "ratio")
	perDoc := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(perDoc(sl.self), "sluice-go-µs/doc")
	b.ReportMetric(perDoc(sl.pg), "sluice-pg-µs/doc")
	b.ReportMetric(perDoc(raw.self), "raw-go-µs/doc")
	b.ReportMetric(perDoc(raw.pg), "raw-pg-µs/doc")
}

// cpuDuring runs f and returns the CPU time this process and the
// cluster serving pgURL used meanwhile. This process's is read inside the
// cluster's, so that reading the cluster's (all of /proc) does not count.
func cpuDuring(b *testing.B, pgURL string, f func()) (self, pg time.Duration) {
	pg0 := postgresCPU(b, pgURL)
	self0 := selfCPU(b)
	f()
	self = selfCPU(b) - self0
	pg = postgresCPU(b, pgURL) - pg0
	return self, pg
}

// selfCPU returns the user plus system CPU time this process has used.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

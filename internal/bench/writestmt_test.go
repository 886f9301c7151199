package bench

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// BenchmarkWriteStatements is BenchmarkWriteConcurrent8's Sluice side (8
// clients, one document per request) on a cluster with pg_stat_statements
// tracking every statement, nested ones (trigger functions) included. It
// logs what Postgres ran per document written: each statement's calls and
// execution time, most time first, to say where a write's Postgres time
// goes, and the requests' latency percentiles. b.N counts documents.
func BenchmarkWriteStatements(b *testing.B) {
	const clients = 8
	pg := startStatementsCluster(b, "pg_stat_statements.track", "all", "track_functions", "all")
	dbURL := newDatabaseOn(b, pg)
	d := dt.Start(b, dt.WithDatabaseURL(dbURL))
	d.CreateDatabase(b, "bench", writeSDL())
	post := poster(b, d, "Bearer "+adminToken(b, d))
	for i := range 100 { // warm up: plans, remembered credentials
		post(personJSON(-1 - i))
	}
	before := statementTimes(b, pg, dbURL)
	var next atomic.Int64
	var wg sync.WaitGroup
	times := make([]time.Duration, b.N)
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				start := time.Now()
				post(personJSON(i))
				times[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(times)
	ms := func(q float64) float64 { return float64(times[int(q*float64(len(times)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	after := statementTimes(b, pg, dbURL)
	type row struct {
		query       string
		calls, msec float64
	}
	var rows []row
	var calls, msec float64
	for q, s := range after {
		r := row{q, s.calls - before[q].calls, s.msec - before[q].msec}
		if r.calls > 0 {
			rows = append(rows, r)
			if s.top {
				calls, msec = calls+r.calls, msec+r.msec
			}
		}
	}
	slices.SortFunc(rows, func(x, y row) int { return int(y.msec*1000 - x.msec*1000) })
	n := float64(b.N)
	b.Logf("per document: %.2f top-level statements, %.1f µs executing them", calls/n, msec*1000/n)
	for _, r := range rows[:min(len(rows), 25)] {
		b.Logf("%6.3f calls %7.1f µs  %.110s", r.calls/n, r.msec*1000/n, oneLine(r.query))
	}
	b.ReportMetric(calls/n, "statements/doc")
	b.ReportMetric(msec*1000/n, "pg-exec-µs/doc")
}

// statementTime is one statement's calls and total execution time.
type statementTime struct {
	calls, msec float64
	top         bool
}

// statementTimes returns pg_stat_statements' figures for the database
// dbURL, by query text (with whether it ran at top level).
func statementTimes(b *testing.B, pg interface{ URL(string) string }, dbURL string) map[string]statementTime {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT s.query, s.toplevel, sum(s.calls)::float8, sum(s.total_exec_time)
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE d.datname = $1 GROUP BY 1, 2`, cfg.Database)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]statementTime{}
	for rows.Next() {
		var q string
		var s statementTime
		if err := rows.Scan(&q, &s.top, &s.calls, &s.msec); err != nil {
			b.Fatal(err)
		}
		if !s.top {
			q = "(nested) " + q
		}
		out[q] = s
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// oneLine squeezes a statement's white space for a log line.
func oneLine(q string) string {
	out := make([]byte, 0, len(q))
	space := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c == ' ' || c == '\n' || c == '\t' {
			space = true
			continue
		}
		if space && len(out) > 0 {
			out = append(out, ' ')
		}
		space = false
		out = append(out, c)
	}
	return string(out)
}

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/pgembed"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// The peer benchmark (issue 23): Sluice and PostGraphile 4 serving the
// same rows from one Postgres cluster, five cells, alternating. Run it with
// scripts/peerbench.sh (make bench-peer), which installs PostGraphile and
// wrk; docs/benchmarks.md records the figures and explains the choices.

// peerSDL is the class both servers serve. The compound index serves the
// filter cell (age equal, ordered by name); PostGraphile's table gets the
// same index.
const peerSDL = `type Person @index(fields: ["age", "name"]) { name: String! email: String! age: Int score: Float active: Boolean }`

const peerRows = 50000

// peerTable is PostGraphile's table: the same columns as Sluice's Person
// table without Sluice's commit column, an id made by Postgres for new
// rows, and the same secondary index. insert_people is its bulk insert
// (PostGraphile has none of its own): a mutation insertPeople(docs: JSON).
const peerTable = `CREATE SCHEMA peer;
CREATE TABLE peer.person (id text PRIMARY KEY DEFAULT gen_random_uuid()::text,
	name text NOT NULL, email text NOT NULL, age integer, score double precision, active boolean);
CREATE INDEX person_age_name ON peer.person (age, name, id);
CREATE FUNCTION peer.insert_people(docs jsonb) RETURNS integer LANGUAGE sql VOLATILE STRICT AS $$
	WITH ins AS (INSERT INTO peer.person (name, email, age, score, active)
		SELECT name, email, age, score, active FROM jsonb_to_recordset(docs)
			AS x(name text, email text, age integer, score double precision, active boolean)
		RETURNING 1)
	SELECT count(*)::integer FROM ins $$;`

func peerJSON(i int) string {
	return fmt.Sprintf(`{"@type":"Person","@id":"p%d","name":"Person %d","email":"p%d@example.com","age":%d,"score":%d.5,"active":%t}`,
		i, i, i, i%90, i, i%2 == 0)
}

// peerCell is one cell: a wrk load with a request body per side.
type peerCell struct {
	name        string
	connections int
	seconds     int
	// lua returns the wrk script's request part for a side.
	sluice, peer string
	// writes: the cell adds rows (see settle).
	writes bool
}

// luaRandomQuery returns a wrk request function posting format (a JSON
// body with one %d) with a random number in [0, n).
func luaRandomQuery(format string, n int) string {
	return fmt.Sprintf(`request = function()
  return wrk.format(nil, nil, nil, string.format([==[%s]==], math.random(0, %d)))
end
`, format, n-1)
}

// luaBody returns a wrk script part sending body with every request.
func luaBody(body string) string { return "wrk.body = [==[" + body + "]==]\n" }

func peerCells(seconds int) []peerCell {
	one := `{name: \"new\", email: \"new@example.com\", age: 200, score: 1.5, active: true}`
	// age 200: outside the range the filter cell reads.
	var batch, docs strings.Builder
	for i := range 1000 {
		sep := ","
		if i == 0 {
			sep = "["
		}
		fmt.Fprintf(&batch, `%s{"name":"Batch %d","email":"b%d@example.com","age":200,"score":%d.5,"active":true}`, sep, i, i, i)
		fmt.Fprintf(&docs, `%s{"@type":"Person","name":"Batch %d","email":"b%d@example.com","age":200,"score":%d.5,"active":true}`, sep, i, i, i)
	}
	batch.WriteString("]")
	docs.WriteString("]")
	return []peerCell{
		{"lookup by id", 16, seconds,
			luaRandomQuery(`{"query":"{ Person(id: \"Person/p%d\") { _id name email age score active } }"}`, peerRows),
			luaRandomQuery(`{"query":"{ personById(id: \"Person/p%d\") { id name email age score active } }"}`, peerRows), false},
		{"filter + order + first 100", 16, seconds,
			luaRandomQuery(`{"query":"{ Person(filter: {age: {eq: %d}}, orderBy: {name: ASC}, limit: 100) { _id name email age } }"}`, 90),
			luaRandomQuery(`{"query":"{ allPeopleList(condition: {age: %d}, orderBy: [NAME_ASC, PRIMARY_KEY_ASC], first: 100) { id name email age } }"}`, 90), false},
		{"page of 1,000", 4, seconds,
			luaBody(`{"query":"{ Person(limit: 1000) { _id name email age score active } }"}`),
			luaBody(`{"query":"{ allPeopleList(orderBy: PRIMARY_KEY_ASC, first: 1000) { id name email age score active } }"}`), false},
		{"single inserts", 8, 2 * seconds,
			luaBody(`{"query":"mutation { Person_insert(documents: [` + one + `]) }"}`),
			luaBody(`{"query":"mutation { createPerson(input: {person: ` + one + `}) { clientMutationId } }"}`), true},
		// Sluice's bulk write is REST (a JSON array, one commit), as
		// PostGraphile's is a function of its own.
		{"1,000 documents per request", 1, seconds,
			"wrk.path = \"/api/document/admin/bench\"\n" + luaBody(docs.String()),
			luaBody(`{"query":"mutation($d: JSON!) { insertPeople(input: {docs: $d}) { integer } }","variables":{"d":` + batch.String() + `}}`), true},
	}
}

// luaCommon counts answers that are not 200 or that hold GraphQL errors,
// and prints their number when wrk is done.
const luaCommon = `wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local threads = {}
local n = 0
function setup(thread)
  n = n + 1
  thread:set("id", n)
  table.insert(threads, thread)
end
function init(args)
  bad = 0
  math.randomseed(id * 7919 + os.time())
end
function response(status, headers, body)
  if status ~= 200 or string.find(body, '"errors"', 1, true) then
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + t:get("bad") end
  io.write("bad-responses: " .. total .. "\n")
end
`

// peerSide is one server under load.
type peerSide struct {
	name   string
	url    string
	authz  string
	apiCPU func() time.Duration
	// proc is the server's process when it is a Sluice (for perf).
	proc *serverProc
	// dbURL is the database whose statements pg_stat_statements counts
	// for this side.
	dbURL string
	// peer: PostGraphile (the other requests of a cell).
	peer bool
}

// peerRun is one wrk run's outcome.
type peerRun struct {
	requests       int64
	seconds        float64
	apiCPU, pgCPU  time.Duration
	badResponses   int64
	latencyAverage string
	// p50 and p99 are wrk's latency percentiles (--latency).
	p50, p99 string
	// statements is the calls pg_stat_statements counted in the side's
	// database over the run (top-level statements, BEGIN and ROLLBACK
	// included).
	statements int64
}

func (r peerRun) statementsPerRequest() float64 {
	return float64(r.statements) / float64(r.requests)
}

func (r peerRun) rps() float64 { return float64(r.requests) / r.seconds }
func (r peerRun) perRequest(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(r.requests)
}

// BenchmarkPeer runs the peer benchmark once, whatever b.N: every cell
// on each side in turn (the first side alternating per pair), printing
// throughput and CPU per request (the API process's, and the Postgres
// cluster's: every backend and background process) per run, and the
// ratios (Sluice over PostGraphile, geometric mean over the pairs).
func BenchmarkPeer(b *testing.B) {
	pgBin := os.Getenv("PEERBENCH_POSTGRAPHILE")
	if pgBin == "" {
		b.Fatal("PEERBENCH_POSTGRAPHILE is not set: run scripts/peerbench.sh (make bench-peer), which installs PostGraphile 4 and wrk")
	}
	wrkBin, err := exec.LookPath("wrk")
	if err != nil {
		b.Fatal("wrk is not installed: run scripts/peerbench.sh (make bench-peer), or apt-get install wrk")
	}
	pairs, seconds := envInt(b, "PEERBENCH_PAIRS", 3), envInt(b, "PEERBENCH_SECONDS", 10)
	ctx := context.Background()
	dir := b.TempDir()
	// Planning counted too: a statement prepared once may still be
	// planned again at every execution (a custom plan).
	pg := startStatementsCluster(b, "pg_stat_statements.track_planning", "on")
	dbURL := newDatabaseOn(b, pg)

	sluiceBin := buildBinary(b, dir, "github.com/sluice-dev/sluice/cmd/sluice")
	sluice := startPeerSluice(b, "sluice", sluiceBin, dbURL)
	sides := []peerSide{sluice}
	if list := os.Getenv("PEERBENCH_BASELINE"); list != "" {
		// Other builds of Sluice (a list separated by colons), each on a
		// database of its own in the same cluster, in turns with the
		// others: to compare builds.
		for i, bin := range strings.Split(list, ":") {
			name := "baseline"
			if i > 0 {
				name += strconv.Itoa(i + 1)
			}
			sides = append(sides, startPeerSluice(b, name, bin, newDatabaseOn(b, pg)))
		}
	}

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	var dbID int64
	if err := conn.QueryRow(ctx, "SELECT id FROM sluice.databases WHERE org = 'admin' AND name = 'bench'").Scan(&dbID); err != nil {
		b.Fatal(err)
	}
	for _, sql := range []string{peerTable,
		fmt.Sprintf(`INSERT INTO peer.person SELECT _id, name, email, age, score, active FROM sluice_db_%d."Person"`, dbID),
		"VACUUM ANALYZE"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			b.Fatalf("%.60s: %v", sql, err)
		}
	}
	conn.Close(ctx)

	node := startPostGraphile(b, pgBin, dbURL)
	sides = append(sides, peerSide{name: "postgraphile", url: node.url, dbURL: dbURL, peer: true,
		apiCPU: func() time.Duration { return procCPU(b, node.cmd.Process.Pid) }})
	printPeerPlans(b, dbURL)

	cells := peerCells(seconds)
	if re := os.Getenv("PEERBENCH_CELLS"); re != "" {
		// Only the cells whose names match: to measure one again.
		m, err := regexp.Compile(re)
		if err != nil {
			b.Fatalf("PEERBENCH_CELLS: %v", err)
		}
		cells = slices.DeleteFunc(cells, func(c peerCell) bool { return !m.MatchString(c.name) })
	}
	runs := map[string][]peerRun{} // cell/side → one run per pair
	perfDir := os.Getenv("PEERBENCH_PERF")
	fmt.Printf("%-30s %-13s %10s %12s %12s %12s %8s %8s %8s %10s\n", "cell", "server", "req/s", "API µs/req", "PG µs/req", "total µs/req", "latency", "p50", "p99", "stmts/req")
	for pair := range pairs + 1 {
		for _, c := range cells {
			// The first side turns with each pair.
			order := append(slices.Clone(sides[pair%len(sides):]), sides[:pair%len(sides)]...)
			for _, s := range order {
				script := luaCommon + c.sluice
				if s.peer {
					script = luaCommon + c.peer
				}
				if s.authz != "" {
					script += fmt.Sprintf("wrk.headers[\"Authorization\"] = %q\n", s.authz)
				}
				secs := c.seconds
				if pair == 0 {
					secs = 2 // warm-up: JIT, caches, pools; not counted
				}
				stopPerf := func() {}
				if perfDir != "" && pair == 1 && s.proc != nil {
					stopPerf = recordPerf(b, s.proc, filepath.Join(perfDir, fmt.Sprintf("%s-%s.data", s.name, strings.Fields(c.name)[0])))
				}
				r := runWrk(b, wrkBin, filepath.Join(dir, "cell.lua"), script, s, c.connections, secs, pg)
				stopPerf()
				if c.writes {
					settle(b, s.dbURL)
				}
				if r.badResponses > 0 {
					b.Errorf("%s on %s: %d answers were not 200 or held GraphQL errors", c.name, s.name, r.badResponses)
				}
				if pair == 0 {
					continue
				}
				runs[c.name+"/"+s.name] = append(runs[c.name+"/"+s.name], r)
				fmt.Printf("%-30s %-13s %10.0f %12.0f %12.0f %12.0f %8s %8s %8s %10.2f\n", c.name, s.name, r.rps(),
					r.perRequest(r.apiCPU), r.perRequest(r.pgCPU), r.perRequest(r.apiCPU+r.pgCPU), r.latencyAverage,
					r.p50, r.p99, r.statementsPerRequest())
			}
		}
	}
	for _, s := range sides {
		printStatements(b, pg, s)
	}
	for _, other := range sides[1:] {
		fmt.Printf("\nsluice / %s, geometric mean of %d pairs:\n%-30s %12s %12s %12s %12s\n", other.name, pairs, "cell", "throughput", "API CPU/req", "PG CPU/req", "total CPU/req")
		for _, c := range cells {
			s, p := runs[c.name+"/sluice"], runs[c.name+"/"+other.name]
			ratio := func(f func(peerRun) float64) float64 {
				sum := 0.0
				for i := range s {
					sum += math.Log(f(s[i]) / f(p[i]))
				}
				return math.Exp(sum / float64(len(s)))
			}
			fmt.Printf("%-30s %11.2fx %11.2fx %11.2fx %11.2fx\n", c.name,
				ratio(peerRun.rps),
				ratio(func(r peerRun) float64 { return r.perRequest(r.apiCPU) }),
				ratio(func(r peerRun) float64 { return r.perRequest(r.pgCPU) }),
				ratio(func(r peerRun) float64 { return r.perRequest(r.apiCPU + r.pgCPU) }))
		}
	}
}

// startPeerSluice runs a Sluice build (bin) as side name on database
// dbURL: the peer class, a bearer token, the peer rows loaded.
func startPeerSluice(b *testing.B, name, bin, dbURL string) peerSide {
	sp := startServer(b, []string{"SLUICE_ADMIN_PASSWORD=" + benchPassword}, bin, "serve",
		"--listen", "127.0.0.1:0", "--data-dir", b.TempDir(), "--database-url", dbURL)
	client := &http.Client{Timeout: 5 * time.Minute}
	base := "http://" + sp.Addr
	basic := "Basic YWRtaW46YmVuY2gtcHc=" // admin:bench-pw
	if _, err := postJSON(client, base+"/api/db/admin/bench", basic, `{"schema":`+strconv.Quote(peerSDL)+`}`, http.StatusCreated); err != nil {
		b.Fatal(err)
	}
	out, err := postJSON(client, base+"/api/tokens", basic, `{"name":"bench"}`, http.StatusCreated)
	if err != nil {
		b.Fatal(err)
	}
	var tok struct{ Token string }
	if err := jsonUnmarshal(out, &tok); err != nil || tok.Token == "" {
		b.Fatalf("token: %v: %s", err, out)
	}
	var nd strings.Builder
	for i := range peerRows {
		nd.WriteString(peerJSON(i) + "\n")
	}
	req, _ := http.NewRequest("POST", base+"/api/document/admin/bench", strings.NewReader(nd.String()))
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	req.Header.Set("Content-Type", "application/x-ndjson")
	if resp, err := client.Do(req); err != nil || resp.StatusCode != 200 {
		b.Fatalf("load: %v %v", resp, err)
	}
	vacuum(b, dbURL)
	return peerSide{name: name, url: base + "/api/graphql/admin/bench", authz: "Bearer " + tok.Token, proc: sp, dbURL: dbURL,
		apiCPU: func() time.Duration { return sp.cpuTime(b) }}
}

// recordPerf records the CPU profile of p into out with perf until the
// function it returns is called.
func recordPerf(b *testing.B, p *serverProc, out string) func() {
	cmd := exec.Command("perf", "record", "-q", "-F", "999", "-g", "-p", strconv.Itoa(p.Cmd.Process.Pid), "-o", out)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("PEERBENCH_PERF: start perf: %v", err)
	}
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			b.Logf("perf record: %v", err)
		}
		fmt.Printf("CPU profile in %s\n", out)
	}
}

// settle vacuums and analyzes the database at dbURL and checkpoints the
// cluster, after a cell that wrote to it: otherwise autovacuum and the
// checkpointer do that work while a later cell runs, and its CPU is
// counted as the Postgres CPU of whichever server that cell loads (with
// the write cells last in every pair, the next pair's lookups).
func settle(b *testing.B, dbURL string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{"VACUUM (ANALYZE)", "CHECKPOINT"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
}

// runWrk runs one wrk load against side s and reads the CPU the API
// process and the Postgres cluster used meanwhile.
func runWrk(b *testing.B, wrkBin, scriptPath, script string, s peerSide, connections, seconds int, pg *pgembed.Postgres) peerRun {
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		b.Fatal(err)
	}
	threads := min(2, connections)
	dbURL := s.dbURL
	st0 := statements(b, pg, dbURL)
	api0, pg0 := s.apiCPU(), postgresCPU(b, dbURL)
	start := time.Now()
	out, err := exec.Command(wrkBin, "-t", strconv.Itoa(threads), "-c", strconv.Itoa(connections),
		"-d", strconv.Itoa(seconds)+"s", "--timeout", "30s", "--latency", "-s", scriptPath, s.url).CombinedOutput()
	elapsed := time.Since(start)
	api1, pg1 := s.apiCPU(), postgresCPU(b, dbURL)
	_, calls := statementsSince(st0, statements(b, pg, dbURL))
	if err != nil {
		b.Fatalf("wrk on %s: %v\n%s", s.name, err, out)
	}
	r := peerRun{apiCPU: api1 - api0, pgCPU: pg1 - pg0, statements: calls}
	if m := regexp.MustCompile(`(?m)^\s+50%\s+(\S+)`).FindSubmatch(out); m != nil {
		r.p50 = string(m[1])
	}
	if m := regexp.MustCompile(`(?m)^\s+99%\s+(\S+)`).FindSubmatch(out); m != nil {
		r.p99 = string(m[1])
	}
	m := regexp.MustCompile(`(\d+) requests in ([\d.]+)(m?s)`).FindSubmatch(out)
	if m == nil {
		b.Fatalf("wrk on %s: no request count in:\n%s", s.name, out)
	}
	r.requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	r.seconds, _ = strconv.ParseFloat(string(m[2]), 64)
	if string(m[3]) == "ms" {
		r.seconds /= 1000
	}
	if r.requests == 0 || r.seconds <= 0 || r.seconds > elapsed.Seconds()+1 {
		b.Fatalf("wrk on %s: %d requests in %.1f s:\n%s", s.name, r.requests, r.seconds, out)
	}
	if m := regexp.MustCompile(`bad-responses: (\d+)`).FindSubmatch(out); m != nil {
		r.badResponses, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := regexp.MustCompile(`Latency\s+(\S+)`).FindSubmatch(out); m != nil {
		r.latencyAverage = string(m[1])
	}
	if m := regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`).FindSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		r.badResponses += n
	}
	return r
}

// postGraphile is a running PostGraphile server.
type postGraphile struct {
	cmd *exec.Cmd
	url string
}

// startPostGraphile runs PostGraphile 4 on schema peer of dbURL, with
// simple lists (allPeopleList) and JSON values as JSON, and waits for it
// to say it serves; it is stopped when the benchmark ends.
func startPostGraphile(b *testing.B, bin, dbURL string) *postGraphile {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--connection", dbURL, "--schema", "peer", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--simple-collections", "both", "--dynamic-json", "--disable-query-log", "--no-setof-functions-contain-nulls")
	cmd.Env = append(os.Environ(), "NODE_ENV=production")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // it may have exited
		cmd.Wait()         //nolint:errcheck // killed
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "GraphQL API:") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
		io.Copy(io.Discard, stdout) //nolint:errcheck // draining
	}()
	select {
	case ok := <-ready:
		if !ok {
			b.Fatal("postgraphile exited before serving")
		}
	case <-time.After(2 * time.Minute):
		b.Fatal("postgraphile did not start within 2 minutes")
	}
	return &postGraphile{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d/graphql", port)}
}

// procCPU returns the user plus system CPU time process pid has used.
func procCPU(b *testing.B, pid int) time.Duration {
	f, err := statFields(pid)
	if err != nil {
		b.Fatal(err)
	}
	return ticks(f[11]) + ticks(f[12])
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

// printPeerPlans prints the EXPLAIN ANALYZE of Sluice's three read
// shapes on the peer class.
func printPeerPlans(b *testing.B, dbURL string) {
	store, err := postgres.Open(context.Background(), dbURL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	fields := []string{"_id", "name", "email", "age", "score", "active"}
	explain(b, store, "bench", []readShape{
		{name: "lookup by id", doc: func(_ *sluice.Schema, arg int) (postgres.DocQuery, error) {
			return postgres.DocQuery{Class: "Person", Classes: []string{"Person"}, Limit: 10001, IDs: []string{fmt.Sprintf("Person/p%d", arg)}, Fields: fields}, nil
		}},
		{name: "filter + order + first 100", doc: func(s *sluice.Schema, _ int) (postgres.DocQuery, error) {
			f, err := filter.Parse(s, "Person", map[string]any{"age": map[string]any{"eq": int64(42)}})
			return postgres.DocQuery{Class: "Person", Classes: []string{"Person"}, Limit: 100, Filter: f,
				Order: []postgres.OrderKey{{Field: "name"}}, Fields: fields[:4]}, err
		}},
		{name: "page of 1,000", doc: func(*sluice.Schema, int) (postgres.DocQuery, error) {
			return postgres.DocQuery{Class: "Person", Classes: []string{"Person"}, Limit: 1000, Fields: fields}, nil
		}},
	}, peerRows)
}

// printStatements prints the statements pg_stat_statements holds for
// side s's database, most called first: calls, plans, and the mean
// execution and planning times.
func printStatements(b *testing.B, pg *pgembed.Postgres, s peerSide) {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(s.dbURL)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT s.calls, s.plans, s.mean_exec_time, s.mean_plan_time, s.query FROM pg_stat_statements s
		JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 ORDER BY s.calls DESC LIMIT 8`, cfg.Database)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	fmt.Printf("\nstatements of %s's database (calls, plans, mean execution and planning ms):\n", s.name)
	for rows.Next() {
		var calls, plans int64
		var exec, plan float64
		var q string
		if err := rows.Scan(&calls, &plans, &exec, &plan, &q); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("%9d %9d %8.4f %8.4f %.240s\n", calls, plans, exec, plan, strings.Join(strings.Fields(q), " "))
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
}

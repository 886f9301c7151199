package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/pgembed"
)

// The live query benchmark (issue 22, "Tests and figures"): 10,000 live
// queries of Person(filter: {owner: {eq: $u}}, limit: 20) with 1,000
// distinct $u, ten subscribers per owner, held by one `sluice serve`
// process over graphql-ws (100 sockets of 100 subscriptions each, as a
// client multiplexing many subscriptions would), while one document of a
// random owner is committed ten times a second. Every subscriber of the
// touched owner must read a result holding that commit's document; the
// document's name is the commit's send time (unix nanoseconds), so each
// subscriber measures the latency from just before the commit request to
// the result it read.
//
// It runs on a Postgres cluster of its own, with pg_stat_statements loaded
// so that the statements a commit costs can be counted; the other
// benchmarks' cluster stays without it.

const (
	liveQueries = 10000
	liveOwners  = 1000
	liveSockets = 100
	liveRate    = 10               // commits per second
	liveLoad    = 60 * time.Second // how long it commits for
	// liveSlots is how many documents an owner may have: each commit
	// replaces one of them, creating it when missing, so that commits
	// are inserts and updates, and an owner's result (at most liveSlots
	// documents) is always whole within the limit of 20.
	liveSlots = 4
	// livePreloaded is how many of those slots hold a document before
	// the live queries open.
	livePreloaded = 2
	// liveIdle ends the drain after the last commit when no awaited
	// result arrived for this long; liveDrainMax bounds it.
	liveIdle     = 3 * time.Second
	liveDrainMax = 120 * time.Second
	// liveOpenMax bounds the wait for every live query's first result.
	liveOpenMax = 5 * time.Minute
)

const liveSDL = `type Person { name: String! owner: String! }`

const liveQuery = `subscription($u: String) { Person(filter: {owner: {eq: $u}}, limit: 20) { _id name owner } }`

// liveSub is one live query: subscription i is on socket i/100 (operation
// id i) and follows owner i%1000, so an owner's ten subscribers are on ten
// sockets. Its fields are written by its socket's reader goroutine and
// read by the benchmark once the readers have stopped.
type liveSub struct {
	owner  int
	opened bool // its first result arrived
	// seen holds the send times of the commits whose documents it read
	// in a result; latest, per document id, the newest of them.
	seen      map[int64]bool
	latest    map[string]int64
	results   int64 // results after the first
	stale     int64 // results after the first that held no new commit
	wrongRows int64 // documents of another owner
}

// liveCommit is one commit: the document it wrote and its send time.
type liveCommit struct {
	owner int
	id    string
	sent  int64
}

// liveClient is the benchmark's side: the sockets and what they read.
type liveClient struct {
	subs []*liveSub
	hist latencyHistogram
	// maxLatency is the longest latency read, in nanoseconds.
	maxLatency atomic.Int64
	opened     atomic.Int64
	allOpen    chan struct{} // closed when every live query has its first result
	// received counts the (subscriber, commit) pairs read; arrived is
	// signalled (without blocking) after each.
	received atomic.Int64
	arrived  chan struct{}
	problems atomic.Int64 // error and complete messages, results with errors
	problem  atomic.Pointer[string]
}

// liveMessage is a graphql-ws message from the server, decoded as far as
// the benchmark needs.
type liveMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Payload struct {
		Data struct {
			Person []struct {
				ID    string `json:"_id"`
				Name  string `json:"name"`
				Owner string `json:"owner"`
			} `json:"Person"`
		} `json:"data"`
		Errors json.RawMessage `json:"errors"`
	} `json:"payload"`
}

// liveResult is what the cell measured.
type liveResult struct {
	open                   time.Duration
	rssPerQuery            float64 // bytes
	commits                int
	expected               int64 // (subscriber, commit) pairs owed
	received, superseded   int64 // read; not read but a later state of its document was
	lost                   int64
	results, stale         int64
	p50, p99, max          time.Duration
	cpu, pgCPU             time.Duration
	window                 time.Duration // from the first commit to the end of the drain
	statements, liveReads  float64       // over the window
	liveStatements         float64
	maxCommit              time.Duration
	commitP50, commitP99   time.Duration // of the commit requests
	problems, serverLogged int64
	problem                *string // the first problem
	drainTimedOut          bool
	topStatements          []statementCalls
}

// BenchmarkLiveQueries runs two cells: owners (the live queries of
// issue 22, above) and ordered (issue 36, liveorder_test.go: the first
// documents of an order over a growing class). SLUICE_BENCH_BINARY runs
// another build of sluice, to compare.
func BenchmarkLiveQueries(b *testing.B) {
	raiseOpenFiles(b)
	bin := os.Getenv("SLUICE_BENCH_BINARY")
	if bin == "" {
		bin = buildBinary(b, b.TempDir(), "github.com/sluice-dev/sluice/cmd/sluice")
	}
	pg := startStatementsCluster(b)
	b.Run("owners", func(b *testing.B) { benchLiveOwners(b, bin, pg) })
	b.Run("ordered", func(b *testing.B) { benchLiveOrdered(b, bin, pg) })
}

func benchLiveOwners(b *testing.B, bin string, pg *pgembed.Postgres) {
	dbURL := newDatabaseOn(b, pg)
	p, bearer := startSluiceBench(b, bin, dbURL, liveSDL)
	var r *liveResult
	for b.Loop() {
		if r == nil {
			r = runLiveCell(b, p, bearer, pg, dbURL)
		}
	}
	perCommit := func(v float64) float64 { return v / float64(max(r.commits, 1)) }
	b.ReportMetric(r.open.Seconds(), "open-s")
	b.ReportMetric(float64(r.p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(r.p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(r.lost), "lost")
	b.ReportMetric(perCommit(float64(r.cpu.Microseconds()))/1000, "cpu-ms/commit")
	b.ReportMetric(perCommit(float64(r.pgCPU.Microseconds()))/1000, "pg-cpu-ms/commit")
	b.ReportMetric(perCommit(r.statements), "pg-stmts/commit")
	b.ReportMetric(r.rssPerQuery/1024, "rss-KiB/query")
	b.Logf("%d live queries (%d owners, %d sockets) opened in %v; RSS %.2f KiB per live query",
		liveQueries, liveOwners, liveSockets, r.open.Round(time.Millisecond), r.rssPerQuery/1024)
	b.Logf("%d commits at %d/s: results owed %d, read %d, superseded by a later state of the document %d, lost %d (drain timed out %v); %d results after the first (%d holding no new commit); latency p50 %v, p99 %v, max %v; commit requests p50 %v, p99 %v, max %v",
		r.commits, liveRate, r.expected, r.received, r.superseded, r.lost, r.drainTimedOut, r.results, r.stale, r.p50, r.p99, r.max, r.commitP50, r.commitP99, r.maxCommit)
	b.Logf("over %v from the first commit to the last result: daemon CPU %v (%.1f%% of one core, %v/commit), Postgres CPU %v (%v/commit); Postgres statements %.1f/commit (pg_stat_statements calls in the database, top level, utility statements such as BEGIN included); live reads %.2f/commit sending %.2f statements/commit (the daemon's metrics)",
		r.window.Round(time.Millisecond), r.cpu, 100*r.cpu.Seconds()/r.window.Seconds(), r.cpu/time.Duration(max(r.commits, 1)),
		r.pgCPU, r.pgCPU/time.Duration(max(r.commits, 1)), perCommit(r.statements), perCommit(r.liveReads), perCommit(r.liveStatements))
	// One line, since a benchmark's log is cut after ten lines without -v.
	var top []string
	for _, s := range r.topStatements {
		top = append(top, fmt.Sprintf("%.2f× %.70s", perCommit(float64(s.calls)), strings.Join(strings.Fields(s.query), " ")))
	}
	b.Logf("statements per commit, most called first: %s", strings.Join(top, " | "))
	// The daemon's warnings are shown (startServer) and counted, not
	// failed on: it warns of variables it does not know, such as
	// SLUICE_BENCH_PERF, which it inherits.
	b.Logf("the daemon logged %d warnings or errors", r.serverLogged)
	if r.problems > 0 {
		b.Errorf("%d error or complete messages or results with errors; first: %s", r.problems, deref(r.problem))
	}
	if r.lost > 0 {
		b.Errorf("%d results lost", r.lost)
	}
}

// deref is the problem recorded, or "none".
func deref(p *string) string {
	if p == nil {
		return "none"
	}
	return *p
}

// startStatementsCluster starts a throwaway cluster like the other
// benchmarks' with pg_stat_statements loaded, and creates the extension
// in its postgres database (the view shows every database's statements).
// extra are more settings, as name, value pairs.
func startStatementsCluster(b *testing.B, extra ...string) *pgembed.Postgres {
	dir, err := os.MkdirTemp("", "sluice-live-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	// Postgres may run as another user (pgembed, when we are root).
	if err := os.Chmod(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	settings := clusterSettings()
	settings["shared_preload_libraries"] = "pg_stat_statements"
	for i := 0; i+1 < len(extra); i += 2 {
		settings[extra[i]] = extra[i+1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := pgembed.Start(ctx, pgembed.Options{
		DataDir:  filepath.Join(dir, "pg"),
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		Settings: settings,
	})
	if err != nil {
		b.Fatalf("start postgres: %v", err)
	}
	b.Cleanup(func() { _ = pg.Stop(context.Background()) })
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		b.Fatal(err)
	}
	return pg
}

// statementCalls is one statement of pg_stat_statements and its calls.
type statementCalls struct {
	query string
	calls int64
}

// statements returns the calls of every statement pg_stat_statements
// holds for database dbURL, by query id, read from the postgres database
// (so that this read is not counted).
func statements(b *testing.B, pg *pgembed.Postgres, dbURL string) map[int64]statementCalls {
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
	rows, err := conn.Query(ctx, `SELECT s.queryid, s.query, s.calls FROM pg_stat_statements s
		JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`, cfg.Database)
	if err != nil {
		b.Fatal(err)
	}
	out := map[int64]statementCalls{}
	for rows.Next() {
		var id int64
		var s statementCalls
		if err := rows.Scan(&id, &s.query, &s.calls); err != nil {
			b.Fatal(err)
		}
		// Statements of several users may share an id: add them.
		t := out[id]
		t.query, t.calls = s.query, t.calls+s.calls
		out[id] = t
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// statementsSince returns the calls made since before, most called first,
// and their sum.
func statementsSince(before, after map[int64]statementCalls) ([]statementCalls, int64) {
	var out []statementCalls
	var total int64
	for id, s := range after {
		if n := s.calls - before[id].calls; n > 0 {
			out = append(out, statementCalls{query: s.query, calls: n})
			total += n
		}
	}
	slices.SortFunc(out, func(x, y statementCalls) int { return int(y.calls - x.calls) })
	return out, total
}

// daemonMetric returns the sum of a metric's series on the daemon.
func daemonMetric(b *testing.B, p *serverProc, name string) float64 {
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.Addr+"/metrics", nil)
	req.Header.Set("Authorization", benchBasic)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	return dt.MetricValue(string(body), name)
}

// liveDocument is the document of slot k of owner u, named name.
func liveDocument(u, k int, name string) string {
	return fmt.Sprintf(`{"@type":"Person","@id":"Person/u%d-%d","name":%q,"owner":"u%d"}`, u, k, name, u)
}

// runLiveCell preloads the owners' documents, opens the live queries,
// commits for liveLoad, waits for the results and measures.
func runLiveCell(b *testing.B, p *serverProc, bearer string, pg *pgembed.Postgres, dbURL string) *liveResult {
	r := &liveResult{}
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 5 * time.Minute}
	docs := "http://" + p.Addr + "/api/document/admin/bench"

	var nd []byte
	for u := range liveOwners {
		for k := range livePreloaded {
			nd = append(nd, liveDocument(u, k, "preloaded")+"\n"...)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, docs, bytes.NewReader(nd))
	req.Header.Set("Authorization", bearer)
	req.Header.Set("Content-Type", "application/x-ndjson")
	if resp, err := httpc.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("preload: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	vacuum(b, dbURL)

	c := &liveClient{subs: make([]*liveSub, liveQueries), allOpen: make(chan struct{}), arrived: make(chan struct{}, 1)}
	for i := range c.subs {
		c.subs[i] = &liveSub{owner: i % liveOwners, seen: map[int64]bool{}, latest: map[string]int64{}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Open: every socket dials, initialises and subscribes at once; the
	// time to open ends when the last live query's first result is read.
	rss0 := p.rss(b)
	var (
		sockets = make([]*websocket.Conn, liveSockets)
		readers sync.WaitGroup
		dials   sync.WaitGroup
		openErr atomic.Pointer[error]
	)
	defer func() {
		cancel()
		for _, s := range sockets {
			if s != nil {
				_ = s.CloseNow()
			}
		}
		readers.Wait()
	}()
	start := time.Now()
	for s := range sockets {
		dials.Go(func() {
			ws, err := c.openSocket(ctx, p.Addr, bearer, s)
			if err != nil {
				openErr.CompareAndSwap(nil, &err)
				return
			}
			sockets[s] = ws
			readers.Go(func() { c.read(ctx, ws) })
		})
	}
	dials.Wait()
	if err := openErr.Load(); err != nil {
		b.Fatalf("open socket: %v", *err)
	}
	select {
	case <-c.allOpen:
	case <-time.After(liveOpenMax):
		b.Fatalf("%d of %d live queries had their first result after %v", c.opened.Load(), liveQueries, liveOpenMax)
	}
	r.open = time.Since(start)
	r.rssPerQuery = float64(p.rss(b)-rss0) / liveQueries

	// Commit at a fixed rate, each commit on its own goroutine so that a
	// slow one does not delay the next; each replaces a random slot of a
	// random owner (created when missing).
	stopPerf := startPerf(b, p, liveQueries, liveRate)
	stmts0 := statements(b, pg, dbURL)
	reads0 := daemonMetric(b, p, "sluice_live_query_reads_total")
	liveStmts0 := daemonMetric(b, p, "sluice_live_query_statements_total")
	cpu0, pg0 := p.cpuTime(b), postgresCPU(b, dbURL)
	rng := rand.New(rand.NewPCG(22, 22))
	n := int(int64(liveRate) * int64(liveLoad) / int64(time.Second))
	commits := make([]liveCommit, n)
	var (
		posts       sync.WaitGroup
		failed      atomic.Int64
		commitErr   atomic.Pointer[error]
		maxCommit   atomic.Int64
		commitTimes latencyHistogram
	)
	first := time.Now()
	tick := time.NewTicker(time.Second / liveRate)
	for k := range n {
		if k > 0 {
			<-tick.C
		}
		u, slot := rng.IntN(liveOwners), rng.IntN(liveSlots)
		posts.Go(func() {
			sent := time.Now().UnixNano()
			commits[k] = liveCommit{owner: u, id: fmt.Sprintf("Person/u%d-%d", u, slot), sent: sent}
			_, err := sendJSON(httpc, http.MethodPut, docs+"?create=true", bearer, liveDocument(u, slot, strconv.FormatInt(sent, 10)), http.StatusOK)
			if err != nil {
				failed.Add(1)
				commitErr.CompareAndSwap(nil, &err)
				commits[k].sent = 0 // owes nothing
			}
			d := time.Now().UnixNano() - sent
			commitTimes.record(time.Duration(d))
			for m := maxCommit.Load(); d > m && !maxCommit.CompareAndSwap(m, d); m = maxCommit.Load() {
			}
		})
	}
	tick.Stop()
	posts.Wait()
	if err := commitErr.Load(); err != nil {
		b.Errorf("%d of %d commits failed; first: %v", failed.Load(), n, *err)
	}
	r.commits = n - int(failed.Load())
	r.maxCommit = time.Duration(maxCommit.Load())
	r.expected = int64(r.commits) * (liveQueries / liveOwners)

	// Drain: until every result owed arrived, none arrived for liveIdle
	// (a commit superseded by a later one of the same document is never
	// read as such), or liveDrainMax.
	idle := time.NewTimer(liveIdle)
	deadline := time.NewTimer(liveDrainMax)
drain:
	for c.received.Load() < r.expected {
		select {
		case <-c.arrived:
			idle.Reset(liveIdle)
		case <-idle.C:
			break drain
		case <-deadline.C:
			r.drainTimedOut = true
			break drain
		}
	}
	idle.Stop()
	deadline.Stop()
	r.window = time.Since(first)
	r.cpu = p.cpuTime(b) - cpu0
	r.pgCPU = postgresCPU(b, dbURL) - pg0
	stopPerf()
	r.liveReads = daemonMetric(b, p, "sluice_live_query_reads_total") - reads0
	r.liveStatements = daemonMetric(b, p, "sluice_live_query_statements_total") - liveStmts0
	top, total := statementsSince(stmts0, statements(b, pg, dbURL))
	r.statements = float64(total)
	r.topStatements = top[:min(len(top), 12)]

	cancel()
	for _, s := range sockets {
		_ = s.CloseNow()
	}
	readers.Wait()

	// Tally every (subscriber, commit) pair: read, superseded (the
	// subscriber read a later state of the same document: coalescing),
	// or lost.
	for _, cm := range commits {
		if cm.sent == 0 {
			continue
		}
		for i := cm.owner; i < liveQueries; i += liveOwners {
			s := c.subs[i]
			switch {
			case s.seen[cm.sent]:
				r.received++
			case s.latest[cm.id] > cm.sent:
				r.superseded++
			default:
				r.lost++
			}
		}
	}
	for _, s := range c.subs {
		r.results += s.results
		r.stale += s.stale
		if s.wrongRows > 0 {
			b.Errorf("live query of owner u%d read %d documents of other owners", s.owner, s.wrongRows)
		}
	}
	q := c.hist.quantiles(0.5, 0.99)
	r.p50, r.p99, r.max = q[0], q[1], time.Duration(c.maxLatency.Load())
	q = commitTimes.quantiles(0.5, 0.99)
	r.commitP50, r.commitP99 = q[0], q[1]
	r.problems = c.problems.Load()
	if pr := c.problem.Load(); pr != nil {
		s := *pr
		r.problem = &s
	}
	r.serverLogged = p.problems.Load()
	return r
}

// openSocket dials graphql-ws socket s, initialises it with the bearer
// token and sends its subscriptions, without waiting for results.
func (c *liveClient) openSocket(ctx context.Context, addr, bearer string, s int) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, "ws://"+addr+"/api/graphql/admin/bench", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(1 << 20)
	init, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": bearer}})
	if err := ws.Write(dctx, websocket.MessageText, init); err != nil {
		ws.CloseNow()
		return nil, err
	}
	_, ack, err := ws.Read(dctx)
	if err != nil || string(ack) != `{"type":"connection_ack"}` {
		ws.CloseNow()
		return nil, fmt.Errorf("connection_init: %s %v", ack, err)
	}
	query, _ := json.Marshal(liveQuery)
	for i := s * (liveQueries / liveSockets); i < (s+1)*(liveQueries/liveSockets); i++ {
		msg := fmt.Sprintf(`{"id":"%d","type":"subscribe","payload":{"query":%s,"variables":{"u":"u%d"}}}`, i, query, c.subs[i].owner)
		if err := ws.Write(dctx, websocket.MessageText, []byte(msg)); err != nil {
			ws.CloseNow()
			return nil, err
		}
	}
	return ws, nil
}

// read reads socket ws's messages until it closes: each result is matched
// with its live query, and each commit's document it holds for the first
// time is counted and its latency recorded.
func (c *liveClient) read(ctx context.Context, ws *websocket.Conn) {
	for {
		_, raw, err := ws.Read(ctx)
		if err != nil {
			return
		}
		now := time.Now().UnixNano()
		var m liveMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			c.fail(fmt.Sprintf("undecodable message %.200s: %v", raw, err))
			continue
		}
		switch m.Type {
		case "ping":
			_ = ws.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`))
			continue
		case "pong":
			continue
		case "next":
		default:
			c.fail(fmt.Sprintf("%.200s", raw))
			continue
		}
		i, err := strconv.Atoi(m.ID)
		if err != nil || i < 0 || i >= len(c.subs) {
			c.fail(fmt.Sprintf("next of an unknown operation: %.200s", raw))
			continue
		}
		if len(m.Payload.Errors) > 0 {
			c.fail(fmt.Sprintf("%.200s", raw))
		}
		s := c.subs[i]
		owner := "u" + strconv.Itoa(s.owner)
		fresh := false
		for _, d := range m.Payload.Data.Person {
			if d.Owner != owner {
				s.wrongRows++
				continue
			}
			sent, err := strconv.ParseInt(d.Name, 10, 64)
			if err != nil || s.seen[sent] {
				continue // preloaded, or read before
			}
			s.seen[sent] = true
			s.latest[d.ID] = max(s.latest[d.ID], sent)
			fresh = true
			c.hist.record(time.Duration(now - sent))
			for m := c.maxLatency.Load(); now-sent > m && !c.maxLatency.CompareAndSwap(m, now-sent); m = c.maxLatency.Load() {
			}
			c.received.Add(1)
			select {
			case c.arrived <- struct{}{}:
			default:
			}
		}
		if !s.opened {
			s.opened = true
			if c.opened.Add(1) == int64(len(c.subs)) {
				close(c.allOpen)
			}
			continue
		}
		s.results++
		if !fresh {
			s.stale++
		}
	}
}

// fail records a problem a message showed.
func (c *liveClient) fail(msg string) {
	c.problems.Add(1)
	c.problem.CompareAndSwap(nil, &msg)
}

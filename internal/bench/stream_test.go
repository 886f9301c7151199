package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The stream benchmark (issue 4, "Measure and report"): N concurrent SSE
// subscriptions to one server, documents committed at a fixed rate, against
// Sluice (GraphQL subscription over SSE, commits through the REST API) and
// against internal/bench/minimalsse (the same payload bytes published in
// memory, one goroutine per connection, write and flush per event). Both
// servers run as processes of their own so that their CPU time and RSS are
// read from /proc apart from the load generator's.

// streamCells are the cells of the issue: subscribers, commits per second,
// and how long each commits for, whatever b.N. 10,000 subscribers at 100
// commits/s offer a million events a second, far beyond what two cores
// deliver (about 50,000, client included): that cell is the overload, and
// it commits for 5 s, long enough for a plain server's per-connection
// queue and socket buffers to overflow, short enough for a lossless server
// to deliver every event in a minute or two.
var streamCells = []struct {
	subs, rate int
	load       time.Duration
}{{1000, 10, 10 * time.Second}, {10000, 1, 10 * time.Second}, {10000, 100, 5 * time.Second}}

const (
	// streamIdle ends the drain after the last commit when no event has
	// arrived for this long (a server that dropped events sends no more).
	streamIdle = 3 * time.Second
	// streamDrainMax bounds the drain of a lossless but slow server.
	streamDrainMax = 180 * time.Second
	// openConcurrency is how many streams are being opened at once.
	openConcurrency = 64
)

const itemSDL = `type Item { n: String! }`

// subscriptionBody is the request body of every stream: Sluice runs it, the
// minimal server ignores it.
const subscriptionBody = `{"query":"subscription { Item_added { _id n _CommitMetadata { _timestamp } } }"}`

// streamTarget is one server under load.
type streamTarget struct {
	proc *serverProc
	// request opens a stream: a complete HTTP/1.1 request.
	request []byte
	// commit makes document k, carrying sent (unix nanoseconds), visible
	// to the streams.
	commit func(k int, sent int64) error
	// pgCPU, when not nil, returns the CPU time used so far by the
	// Postgres cluster the server uses.
	pgCPU func() time.Duration
}

// streamResult is what one cell measured.
type streamResult struct {
	subs          int
	open          time.Duration
	delivered     int64
	expected      int64 // events owed: commits × subscribers
	lost, extra   int64
	eventsPerSec  float64
	p50, p99      time.Duration
	cpu           time.Duration
	cpuPerEvent   time.Duration
	pgCPUPerEvent time.Duration // Postgres, Sluice only
	maxCommit     time.Duration // the slowest commit request
	problems      int64         // warnings and errors the server logged
	rssPerSub     float64       // bytes
	drainTimedOut bool
}

func BenchmarkStreams(b *testing.B) {
	raiseOpenFiles(b)
	dir := b.TempDir()
	sluiceBin := buildBinary(b, dir, "github.com/sluice-dev/sluice/cmd/sluice")
	minimalBin := buildBinary(b, dir, "github.com/sluice-dev/sluice/internal/bench/minimalsse")
	for _, cell := range streamCells {
		b.Run(fmt.Sprintf("subs=%d,rate=%d", cell.subs, cell.rate), func(b *testing.B) {
			var sl *streamResult
			b.Run("sluice", func(b *testing.B) {
				sl = runStreamBench(b, sluiceStreamTarget(b, sluiceBin), cell.subs, cell.rate, cell.load)
			})
			b.Run("minimal", func(b *testing.B) {
				mn := runStreamBench(b, minimalStreamTarget(b, minimalBin), cell.subs, cell.rate, cell.load)
				if sl == nil {
					return
				}
				b.Logf("sluice/minimal: open %.2f×, events/s %.2f×, p50 %.2f×, p99 %.2f×, cpu/event %.2f×, rss/sub %.2f×; lost: sluice %d, minimal %d",
					ratio(float64(sl.open), float64(mn.open)), ratio(sl.eventsPerSec, mn.eventsPerSec),
					ratio(float64(sl.p50), float64(mn.p50)), ratio(float64(sl.p99), float64(mn.p99)),
					ratio(float64(sl.cpuPerEvent), float64(mn.cpuPerEvent)), ratio(sl.rssPerSub, mn.rssPerSub),
					sl.lost, mn.lost)
			})
		})
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// runStreamBench runs one cell once, whatever b.N, and reports it.
func runStreamBench(b *testing.B, t *streamTarget, subs, rate int, load time.Duration) *streamResult {
	var r *streamResult
	for b.Loop() {
		if r == nil {
			r = runStreamCell(b, t, subs, rate, load)
		}
	}
	b.ReportMetric(r.open.Seconds(), "open-s")
	b.ReportMetric(r.eventsPerSec, "events/s")
	b.ReportMetric(float64(r.p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(r.p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(r.cpuPerEvent.Nanoseconds())/1000, "cpu-µs/event")
	b.ReportMetric(r.rssPerSub/1024, "rss-KiB/sub")
	b.ReportMetric(float64(r.lost), "lost")
	if t.pgCPU != nil {
		b.ReportMetric(float64(r.pgCPUPerEvent.Nanoseconds())/1000, "pg-cpu-µs/event")
	}
	b.Logf("open %v, delivered %d of %d (lost %d, extra %d, drain timed out %v), %.0f events/s, p50 %v, p99 %v, cpu %v (%v/event, postgres %v/event), rss %.1f KiB/sub, slowest commit %v, %d warnings/errors logged",
		r.open.Round(time.Millisecond), r.delivered, r.expected, r.lost, r.extra, r.drainTimedOut, r.eventsPerSec,
		r.p50, r.p99, r.cpu, r.cpuPerEvent, r.pgCPUPerEvent, r.rssPerSub/1024, r.maxCommit, r.problems)
	return r
}

// runStreamCell opens subs streams, commits rate documents per second for
// load, waits for the events to arrive, and measures.
func runStreamCell(b *testing.B, t *streamTarget, subs, rate int, load time.Duration) *streamResult {
	r := &streamResult{subs: subs}
	rss0 := t.proc.rss(b)

	// Open every stream, openConcurrency at a time; the time to open ends
	// when the last one has read `: connected`.
	var (
		hist    latencyHistogram
		total   atomic.Int64
		clients = make([]*sseClient, subs)
		readers sync.WaitGroup
		opens   sync.WaitGroup
		openErr atomic.Pointer[error]
		sem     = make(chan struct{}, openConcurrency)
	)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.conn.Close()
			}
		}
		readers.Wait()
	}()
	start := time.Now()
	for i := range clients {
		opens.Go(func() {
			sem <- struct{}{}
			c, err := openStream(t.proc.Addr, t.request)
			<-sem
			if err != nil {
				openErr.CompareAndSwap(nil, &err)
				return
			}
			clients[i] = c
			readers.Go(func() { c.read(&hist, &total) })
		})
	}
	opens.Wait()
	r.open = time.Since(start)
	if err := openErr.Load(); err != nil {
		b.Fatalf("open stream: %v", *err)
	}

	// Peak RSS, sampled through the load and the drain.
	peak := atomic.Int64{}
	peak.Store(t.proc.rss(b))
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if v := t.proc.rss(b); v > peak.Load() {
					peak.Store(v)
				}
			case <-stopSampling:
				return
			}
		}
	}()

	// Commit at a fixed rate, each commit on its own goroutine so that a
	// slow one does not delay the next.
	stopPerf := startPerf(b, t.proc, subs, rate)
	cpu0 := t.proc.cpuTime(b)
	var pg0 time.Duration
	if t.pgCPU != nil {
		pg0 = t.pgCPU()
	}
	n := int(int64(rate) * int64(load) / int64(time.Second))
	var (
		posts     sync.WaitGroup
		failed    atomic.Int64
		commitErr atomic.Pointer[error]
		maxCommit atomic.Int64
	)
	first := time.Now()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for k := range n {
		if k > 0 {
			<-tick.C
		}
		posts.Go(func() {
			sent := time.Now().UnixNano()
			if err := t.commit(k, sent); err != nil {
				failed.Add(1)
				commitErr.CompareAndSwap(nil, &err)
			}
			d := time.Now().UnixNano() - sent
			for m := maxCommit.Load(); d > m && !maxCommit.CompareAndSwap(m, d); m = maxCommit.Load() {
			}
		})
	}
	tick.Stop()
	posts.Wait()
	if err := commitErr.Load(); err != nil {
		b.Errorf("%d of %d commits failed; first: %v", failed.Load(), n, *err)
	}
	r.maxCommit = time.Duration(maxCommit.Load())
	perSub := int64(n) - failed.Load()
	r.expected = perSub * int64(subs)

	// Drain: until every event arrived, nothing arrived for streamIdle, or
	// streamDrainMax.
	drain := time.NewTicker(100 * time.Millisecond)
	deadline := time.Now().Add(streamDrainMax)
	last, lastChange := total.Load(), time.Now()
	for total.Load() < r.expected {
		now := <-drain.C
		if v := total.Load(); v != last {
			last, lastChange = v, now
		}
		if now.Sub(lastChange) > streamIdle {
			break
		}
		if now.After(deadline) {
			r.drainTimedOut = true
			break
		}
	}
	drain.Stop()
	r.cpu = t.proc.cpuTime(b) - cpu0
	stopPerf()
	var pgCPU time.Duration
	if t.pgCPU != nil {
		pgCPU = t.pgCPU() - pg0
	}
	close(stopSampling)
	<-sampled
	if v := t.proc.rss(b); v > peak.Load() {
		peak.Store(v)
	}

	for _, c := range clients {
		c.conn.Close()
	}
	readers.Wait()
	var lastAt int64
	for _, c := range clients {
		r.delivered += c.received
		if c.received < perSub {
			r.lost += perSub - c.received
		} else {
			r.extra += c.received - perSub
		}
		if c.bad > 0 {
			b.Errorf("%d events without a readable send time", c.bad)
		}
		lastAt = max(lastAt, c.lastAt)
	}
	if r.delivered > 0 {
		r.eventsPerSec = float64(r.delivered) / time.Duration(lastAt-first.UnixNano()).Seconds()
		r.cpuPerEvent = r.cpu / time.Duration(r.delivered)
		r.pgCPUPerEvent = pgCPU / time.Duration(r.delivered)
	}
	q := hist.quantiles(0.5, 0.99)
	r.p50, r.p99 = q[0], q[1]
	r.rssPerSub = float64(peak.Load()-rss0) / float64(subs)
	r.problems = t.proc.problems.Load()
	return r
}

// perfEnv names the environment variable that, set to a directory, makes
// the stream benchmark record each server's CPU profile over the commit
// phase and the drain with `perf record -g` (perf must be installed and
// allowed to attach): <dir>/<server>-<subs>-<rate>.data, read with
// `perf report -i`. Go binaries keep frame pointers, so call graphs work.
const perfEnv = "SLUICE_BENCH_PERF"

// startPerf starts perf on the server when perfEnv asks for it and returns
// the function that stops it and waits for the profile to be written.
func startPerf(b *testing.B, p *serverProc, subs, rate int) func() {
	dir := os.Getenv(perfEnv)
	if dir == "" {
		return func() {}
	}
	out := filepath.Join(dir, fmt.Sprintf("%s-%d-%d.data", filepath.Base(p.Cmd.Path), subs, rate))
	cmd := exec.Command("perf", "record", "-q", "-F", "999", "-g", "-p", strconv.Itoa(p.Cmd.Process.Pid), "-o", out)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("%s: start perf: %v", perfEnv, err)
	}
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			b.Logf("perf record: %v", err)
		}
		b.Logf("CPU profile of %s in %s", filepath.Base(p.Cmd.Path), out)
	}
}

// raiseOpenFiles raises the soft limit on open files to the hard limit:
// ten thousand streams need as many descriptors, in this process and (the
// limit is inherited) in the server.
func raiseOpenFiles(b *testing.B) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	const need = 10000 + 1000
	if lim.Cur < need {
		b.Fatalf("open files limited to %d; the stream benchmark needs %d (ulimit -n)", lim.Cur, need)
	}
}

// streamRequest returns the HTTP/1.1 request that opens a stream at path.
func streamRequest(addr, path, auth string) []byte {
	return []byte("POST " + path + " HTTP/1.1\r\nHost: " + addr +
		"\r\nAuthorization: " + auth +
		"\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(subscriptionBody)) + "\r\n\r\n" + subscriptionBody)
}

// postJSON POSTs body and fails unless the status is want.
func postJSON(client *http.Client, url, auth, body string, want int) ([]byte, error) {
	return sendJSON(client, http.MethodPost, url, auth, body, want)
}

// sendJSON sends body with method and fails unless the status is want.
func sendJSON(client *http.Client, method, url, auth, body string, want int) ([]byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return out, fmt.Errorf("%s %s: status %d: %s", method, url, resp.StatusCode, out)
	}
	return out, nil
}

const benchPassword = "bench-pw"

// benchBasic is the Authorization of the admin with benchPassword.
const benchBasic = "Basic YWRtaW46YmVuY2gtcHc=" // admin:bench-pw

// sluiceStreamTarget runs `sluice serve` on a fresh database of the durable
// cluster, with an Item class, and commits each document with one REST
// request authorized by an API token.
func sluiceStreamTarget(b *testing.B, bin string) *streamTarget {
	dbURL := newDatabase(b)
	p, bearer := startSluiceBench(b, bin, dbURL, itemSDL)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 5 * time.Minute}
	docs := "http://" + p.Addr + "/api/document/admin/bench"
	return &streamTarget{
		proc:    p,
		request: streamRequest(p.Addr, "/api/graphql/admin/bench", bearer),
		commit: func(k int, sent int64) error {
			_, err := postJSON(client, docs, bearer, fmt.Sprintf(`{"@type":"Item","@id":"i%d","n":"%d"}`, k, sent), http.StatusOK)
			return err
		},
		pgCPU: func() time.Duration { return postgresCPU(b, dbURL) },
	}
}

// startSluiceBench runs `sluice serve` (bin) on the Postgres database
// dbURL, creates the database admin/bench with schema sdl, and returns the
// server and the Authorization of an API token of the admin ("Bearer …"),
// as a service would hold.
func startSluiceBench(b *testing.B, bin, dbURL, sdl string) (*serverProc, string) {
	p := startServer(b, []string{"SLUICE_ADMIN_PASSWORD=" + benchPassword}, bin, "serve",
		"--listen", "127.0.0.1:0", "--data-dir", b.TempDir(), "--database-url", dbURL)
	client := &http.Client{Timeout: 5 * time.Minute}
	base := "http://" + p.Addr
	if _, err := postJSON(client, base+"/api/db/admin/bench", benchBasic, `{"schema":`+strconv.Quote(sdl)+`}`, http.StatusCreated); err != nil {
		b.Fatal(err)
	}
	out, err := postJSON(client, base+"/api/tokens", benchBasic, `{"name":"bench"}`, http.StatusCreated)
	if err != nil {
		b.Fatal(err)
	}
	var tok struct{ Token string }
	if err := jsonUnmarshal(out, &tok); err != nil || tok.Token == "" {
		b.Fatalf("token: %v: %s", err, out)
	}
	return p, "Bearer " + tok.Token
}

// minimalStreamTarget runs the minimal server and publishes, per commit,
// the payload Sluice sends for the same document.
func minimalStreamTarget(b *testing.B, bin string) *streamTarget {
	p := startServer(b, nil, bin)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 5 * time.Minute}
	publish := "http://" + p.Addr + "/publish"
	return &streamTarget{
		proc:    p,
		request: streamRequest(p.Addr, "/sub", "Bearer unused"),
		commit: func(k int, sent int64) error {
			// _timestamp as Sluice renders it: unix seconds, microseconds.
			_, err := postJSON(client, publish, "", fmt.Sprintf(`{"data":{"Item_added":{"_id":"Item/i%d","n":"%d","_CommitMetadata":{"_timestamp":%d.%06d}}}}`,
				k, sent, sent/1e9, sent%1e9/1e3), http.StatusOK)
			return err
		},
	}
}

package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The live query budget benchmark (issue 30): one read-only user opens
// 200 distinct live queries over 5,000 documents, each listing most of
// them, while a writer updates a document every 100 ms (every result
// changes) and another read-only user reads a page of ten documents
// every 50 ms. It reports how many live queries were admitted, how many
// ended on the budget, the daemon's peak RSS, and the other user's
// latency before and while the live queries run.
//
//	go test -run '^$' -bench LiveBudget -benchtime 1x -timeout 30m ./internal/bench/
//
// SLUICE_BENCH_BINARY runs another build of sluice (an older one, to
// compare); SLUICE_BENCH_RSS_MAX (MiB, default 8192) stops the cell when
// the daemon's RSS passes it, so that a build without the budget does not
// take the machine's memory.
const (
	budgetDocs    = 5000
	budgetQueries = 200
	budgetLoad    = 20 * time.Second
)

func BenchmarkLiveBudget(b *testing.B) {
	bin := os.Getenv("SLUICE_BENCH_BINARY")
	if bin == "" {
		bin = buildBinary(b, b.TempDir(), "github.com/sluice-dev/sluice/cmd/sluice")
	}
	rssMax := int64(envInt(b, "SLUICE_BENCH_RSS_MAX", 8192)) << 20
	for b.Loop() {
		runLiveBudget(b, bin, rssMax)
	}
}

func runLiveBudget(b *testing.B, bin string, rssMax int64) {
	p, _ := startSluiceBench(b, bin, newDatabase(b), "type Doc { n: Int! text: String! }")
	base := "http://" + p.Addr
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}, Timeout: time.Minute}
	var body strings.Builder
	for i := range budgetDocs {
		fmt.Fprintf(&body, `{"@type":"Doc","@id":"d%d","n":%d,"text":"%s"}`+"\n", i, i, strings.Repeat("t", 100))
	}
	if _, err := postJSON(client, base+"/api/document/admin/bench", benchBasic, body.String(), http.StatusOK); err != nil {
		b.Fatal(err)
	}
	for _, u := range []string{"mallory", "olive"} {
		if _, err := postJSON(client, base+"/api/users", benchBasic, `{"name":"`+u+`","organization":"admin","password":"`+u+`-password"}`, http.StatusCreated); err != nil {
			b.Fatal(err)
		}
		if _, err := sendJSON(client, "PUT", base+"/api/roles/admin/bench", benchBasic, `{"user":"`+u+`","role":"read"}`, http.StatusOK); err != nil {
			b.Fatal(err)
		}
	}
	mallory := "Basic " + basicOf("mallory", "mallory-password")
	olive := "Basic " + basicOf("olive", "olive-password")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	// The writer: every result changes with each commit.
	var commits atomic.Int64
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			doc := fmt.Sprintf(`{"@type":"Doc","@id":"Doc/d%d","n":%d,"text":"w%d"}`, budgetDocs-1-i%100, budgetDocs-1-i%100, i)
			if _, err := sendJSON(client, "PUT", base+"/api/document/admin/bench", benchBasic, doc, http.StatusOK); err == nil {
				commits.Add(1)
			}
		}
	})
	// The other user's reads, in phases: before the live queries open,
	// and while they run.
	var phase atomic.Int32
	lat := [2][]time.Duration{}
	var latMu sync.Mutex
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ph := phase.Load()
			if ph > 1 {
				continue
			}
			t0 := time.Now()
			if _, err := sendJSON(client, "GET", base+"/api/document/admin/bench?type=Doc&count=10&skip=100", olive, "", http.StatusOK); err != nil {
				b.Error(err)
				return
			}
			latMu.Lock()
			lat[ph] = append(lat[ph], time.Since(t0))
			latMu.Unlock()
		}
	})
	// The peak RSS, sampled (VmHWM would hold the load's peak too).
	var peak atomic.Int64
	over := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if r := p.rss(b); r > peak.Load() {
				peak.Store(r)
				if r > rssMax {
					close(over)
					return
				}
			}
		}
	})
	time.Sleep(5 * time.Second) // the other user's latency without live queries
	rss0 := p.rss(b)
	phase.Store(1)

	var admitted, refused, ended, results atomic.Int64
	var firstRefusal, firstEnd atomic.Pointer[string]
	var conns []*liveBudgetStream
	for k := range budgetQueries {
		q := fmt.Sprintf(`subscription { Doc(filter: {n: {ge: %d}}) { _id n text } }`, k)
		st, status, msg, err := openLiveBudget(p.Addr, mallory, q)
		if err != nil {
			b.Fatal(err)
		}
		if st == nil {
			refused.Add(1)
			firstRefusal.CompareAndSwap(nil, &msg)
			if status != http.StatusTooManyRequests {
				b.Errorf("live query %d: status %d: %s", k, status, msg)
			}
			continue
		}
		admitted.Add(1)
		conns = append(conns, st)
		wg.Go(func() { st.read(&results, &ended, &firstEnd) })
	}
	select {
	case <-time.After(budgetLoad):
	case <-over:
		b.Logf("the daemon's RSS passed %d MiB: stopped", rssMax>>20)
	}
	phase.Store(2)
	close(stop)
	for _, c := range conns {
		c.conn.Close()
	}
	wg.Wait()
	q := func(ds []time.Duration, f float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(int(f*float64(len(s))), len(s)-1)]
	}
	b.ReportMetric(float64(admitted.Load()), "admitted")
	b.ReportMetric(float64(peak.Load()>>20), "peak-MiB")
	b.ReportMetric(float64(q(lat[1], 0.5).Microseconds())/1000, "other-p50-ms")
	b.ReportMetric(float64(q(lat[1], 0.99).Microseconds())/1000, "other-p99-ms")
	b.Logf("%d live queries of one user over %d documents: %d admitted, %d refused (first: %.200s), %d ended with an error (first: %.200s), %d results; %d commits",
		budgetQueries, budgetDocs, admitted.Load(), refused.Load(), deref(firstRefusal.Load()), ended.Load(), deref(firstEnd.Load()), results.Load(), commits.Load())
	b.Logf("daemon RSS %d MiB before the live queries, peak %d MiB while they ran", rss0>>20, peak.Load()>>20)
	b.Logf("another user's page of 10 documents: before p50 %v p99 %v max %v (%d reads); while the live queries ran p50 %v p99 %v max %v (%d reads)",
		q(lat[0], 0.5), q(lat[0], 0.99), q(lat[0], 1), len(lat[0]), q(lat[1], 0.5), q(lat[1], 0.99), q(lat[1], 1), len(lat[1]))
}

// basicOf returns the base64 of user:password.
func basicOf(user, password string) string {
	r, _ := http.NewRequest("GET", "http://x", nil)
	r.SetBasicAuth(user, password)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

// liveBudgetStream is one live query's SSE stream.
type liveBudgetStream struct {
	conn interface{ Close() error }
	body *bufio.Reader
}

// openLiveBudget opens live query q over SSE; a refusal gives its status
// and body instead.
func openLiveBudget(addr, auth, q string) (*liveBudgetStream, int, string, error) {
	body := `{"query":` + strconv.Quote(q) + `}`
	req := []byte("POST /api/graphql/admin/bench HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: " + auth +
		"\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	c, err := openStream(addr, req)
	if err != nil {
		if s, ok := strings.CutPrefix(err.Error(), "status "); ok {
			n, _ := strconv.Atoi(s)
			return nil, n, err.Error(), nil
		}
		return nil, 0, "", err
	}
	return &liveBudgetStream{conn: c.conn, body: c.body}, 0, "", nil
}

// read counts the stream's results, and whether it ended with an error.
func (s *liveBudgetStream) read(results, ended *atomic.Int64, first *atomic.Pointer[string]) {
	for {
		line, err := s.body.ReadSlice('\n')
		long := err == bufio.ErrBufferFull
		if err != nil && !long {
			return
		}
		data, ok := bytes.CutPrefix(line, []byte("data: {"))
		for err == bufio.ErrBufferFull { // the rest of a long line
			_, err = s.body.ReadSlice('\n')
		}
		if !ok {
			continue
		}
		if long && !bytes.HasPrefix(data, []byte(`"errors"`)) {
			results.Add(1)
			continue
		}
		if bytes.HasPrefix(data, []byte(`"errors"`)) {
			ended.Add(1)
			msg := string(data)
			first.CompareAndSwap(nil, &msg)
			continue
		}
		results.Add(1)
	}
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/internal/pgembed"
)

// The ordered cell of BenchmarkLiveQueries (issue 36): orderedQueries
// live queries, one per owner, of the first 20 of the owner's documents
// by name, over a class that grows: orderedRate commits a second, each
// inserting one document of a random owner with a random name. A new
// document changes its owner's result only when its name sorts among the
// first 20; the cell counts the live reads (the daemon's
// sluice_live_query_reads_total) per commit and per result sent, and
// checks that every live query's last result is its owner's first 20
// documents once the commits are done.
const (
	orderedQueries = 20
	orderedPreload = 200 // documents of each owner before the live queries open
	orderedRate    = 50
	orderedLoad    = 20 * time.Second
	orderedQuery   = `subscription($u: String) { Person(filter: {owner: {eq: $u}}, orderBy: {name: ASC}, limit: 20) { _id name owner } }`
	orderedDrain   = 60 * time.Second
)

func benchLiveOrdered(b *testing.B, bin string, pg *pgembed.Postgres) {
	dbURL := newDatabaseOn(b, pg)
	p, bearer := startSluiceBench(b, bin, dbURL, liveSDL)
	for b.Loop() {
		r := runOrderedCell(b, p, bearer, dbURL)
		b.ReportMetric(r.reads/float64(r.commits), "reads/commit")
		b.ReportMetric(r.reads/float64(max(r.results, 1)), "reads/result")
		b.ReportMetric(float64(r.results)/float64(r.commits), "results/commit")
		b.Logf("%d live queries, %d commits at %d/s over a class of %d documents growing to %d: %.0f live reads, %d results sent after the first: %.3f reads per commit, %.2f per result sent; every last result is its owner's first 20: %v",
			orderedQueries, r.commits, orderedRate, orderedQueries*orderedPreload, orderedQueries*orderedPreload+r.commits, r.reads, r.results,
			r.reads/float64(r.commits), r.reads/float64(max(r.results, 1)), r.whole)
		if !r.whole {
			b.Errorf("a live query's last result is not its owner's first 20 documents: %s", r.problem)
		}
	}
}

type orderedResult struct {
	commits int
	reads   float64
	results int64
	whole   bool
	problem string
}

// orderedName is a random name of 12 digits: names sort as numbers.
func orderedName(rng *rand.Rand) string { return fmt.Sprintf("%012d", rng.Int64N(1e12)) }

func runOrderedCell(b *testing.B, p *serverProc, bearer, dbURL string) orderedResult {
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 5 * time.Minute}
	docs := "http://" + p.Addr + "/api/document/admin/bench"
	rng := rand.New(rand.NewPCG(36, 36))
	// names[u] holds every name of owner u, for the expected results.
	names := make([][]string, orderedQueries)
	var nd []byte
	for u := range orderedQueries {
		for range orderedPreload {
			n := orderedName(rng)
			names[u] = append(names[u], n)
			nd = append(nd, fmt.Sprintf(`{"@type":"Person","name":%q,"owner":"o%d"}`+"\n", n, u)...)
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

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+p.Addr+"/api/graphql/admin/bench", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	init, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": bearer}})
	if err := ws.Write(ctx, websocket.MessageText, init); err != nil {
		b.Fatal(err)
	}
	if _, ack, err := ws.Read(ctx); err != nil || string(ack) != `{"type":"connection_ack"}` {
		b.Fatalf("connection_init: %s %v", ack, err)
	}
	query, _ := json.Marshal(orderedQuery)
	for u := range orderedQueries {
		msg := fmt.Sprintf(`{"id":"%d","type":"subscribe","payload":{"query":%s,"variables":{"u":"o%d"}}}`, u, query, u)
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			b.Fatal(err)
		}
	}
	// The reader keeps each live query's last result (its names) and
	// counts the results after the first.
	var (
		mu      sync.Mutex
		last    = make([][]string, orderedQueries)
		opened  = make([]bool, orderedQueries)
		results atomic.Int64
		arrived = make(chan struct{}, 1)
		bad     atomic.Pointer[string]
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			_, raw, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var m liveMessage
			if err := json.Unmarshal(raw, &m); err != nil || m.Type != "next" || len(m.Payload.Errors) > 0 {
				if m.Type == "ping" {
					_ = ws.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`))
					continue
				}
				s := fmt.Sprintf("%.200s", raw)
				bad.CompareAndSwap(nil, &s)
				continue
			}
			u, err := strconv.Atoi(m.ID)
			if err != nil || u < 0 || u >= orderedQueries {
				continue
			}
			var got []string
			for _, d := range m.Payload.Data.Person {
				got = append(got, d.Name)
			}
			mu.Lock()
			if opened[u] {
				results.Add(1)
			}
			opened[u], last[u] = true, got
			mu.Unlock()
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	}()
	first20 := func(u int) []string {
		all := slices.Clone(names[u])
		slices.Sort(all)
		return all[:min(20, len(all))]
	}
	// wait waits until every live query's last result is its owner's
	// first 20 (or the deadline), and reports whether they are.
	wait := func(deadline time.Duration) bool {
		end := time.After(deadline)
		for {
			mu.Lock()
			ok := true
			for u := range orderedQueries {
				if !slices.Equal(last[u], first20(u)) {
					ok = false
					break
				}
			}
			mu.Unlock()
			if ok {
				return true
			}
			select {
			case <-arrived:
			case <-end:
				return false
			}
		}
	}
	if !wait(orderedDrain) {
		b.Fatal("the live queries' first results did not arrive")
	}
	results.Store(0)

	reads0 := daemonMetric(b, p, "sluice_live_query_reads_total")
	n := int(int64(orderedRate) * int64(orderedLoad) / int64(time.Second))
	var posts sync.WaitGroup
	var failed atomic.Int64
	tick := time.NewTicker(time.Second / orderedRate)
	for k := range n {
		if k > 0 {
			<-tick.C
		}
		u, name := rng.IntN(orderedQueries), orderedName(rng)
		names[u] = append(names[u], name)
		posts.Go(func() {
			body := fmt.Sprintf(`{"@type":"Person","name":%q,"owner":"o%d"}`, name, u)
			if _, err := postJSON(httpc, docs, bearer, body, http.StatusOK); err != nil {
				failed.Add(1)
			}
		})
	}
	tick.Stop()
	posts.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d commits failed", f)
	}
	r := orderedResult{commits: n}
	r.whole = wait(orderedDrain)
	r.reads = daemonMetric(b, p, "sluice_live_query_reads_total") - reads0
	r.results = results.Load()
	if s := bad.Load(); s != nil {
		r.whole, r.problem = false, *s
	}
	if !r.whole && r.problem == "" {
		r.problem = "not within the drain"
	}
	cancel()
	ws.CloseNow()
	<-done
	return r
}

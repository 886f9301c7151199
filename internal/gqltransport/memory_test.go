package gqltransport_test

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// BenchmarkExtraSubscription measures what one more subscription on an
// open connection costs (graphql-ws, single connection mode): the heap
// and goroutine stack in use after a GC, over 2,000 subscriptions,
// reported per subscription. Identical subscriptions share their events
// (the common case: many clients watching one thing); distinct ones each
// have a share of their own, evaluated from the connection's one change
// feed subscription, either from one document with different variables
// (how client libraries subscribe to "this item") or from a document of
// their own (which the subscription holds parsed).
//
//	go test -run '^$' -bench ExtraSubscription -benchtime 1x ./internal/gqltransport/
func BenchmarkExtraSubscription(b *testing.B) {
	const n = 2000
	// Each kind runs on a daemon of its own: what the previous one tears
	// down in the background does not cloud the figure.
	start := func(b *testing.B) *dt.Daemon {
		d := dt.Start(b)
		d.CreateDatabase(b, "mem", "type Dog { name: String! }")
		return d
	}
	// payload returns the GraphQL request of subscription i of a kind.
	payload := func(kind string, i int) string {
		switch kind {
		case "variables":
			return fmt.Sprintf(`{"query":"subscription($n: String!) { Dog_added(filter: {name: {eq: $n}}) { name } }","variables":{"n":"d%d"}}`, i)
		case "documents":
			return fmt.Sprintf(`{"query":"subscription { Dog_added(filter: {name: {eq: \"d%d\"}}) { name } }"}`, i)
		}
		return `{"query":"subscription { Dog_added { name } }"}`
	}
	withID := func(p, key, id string) string {
		return p[:len(p)-1] + fmt.Sprintf(`,%q:%s}`, key, id)
	}
	measure := func(b *testing.B, open func(i int)) {
		open(-1) // the first one starts what later ones share
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC() // and what finalizers of the first freed
		runtime.ReadMemStats(&before)
		for i := range n {
			open(i)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heapB/sub")
		b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/n, "stackB/sub")
	}
	for _, kind := range []string{"identical", "variables", "documents"} {
		b.Run("graphql-ws/"+kind, func(b *testing.B) {
			d := start(b)
			for range b.N {
				c := mustConnect(b, d, "mem")
				measure(b, func(i int) {
					c.send(fmt.Sprintf(`{"id":"s%d","type":"subscribe","payload":%s}`, i, payload(kind, i)))
					if i%100 == 99 || i < 0 {
						c.barrier(fmt.Sprintf("b%d", i))
					}
				})
				_ = c.c.CloseNow()
			}
		})
		b.Run("single-connection/"+kind, func(b *testing.B) {
			d := start(b)
			for range b.N {
				tok := reserve(b, d, dt.Admin(), "mem")
				st := mustOpen(b, d, dt.Admin(), "GET", "/api/graphql/admin/mem", "", nil, "Accept", sse, "X-GraphQL-Event-Stream-Token", tok)
				st.connected()
				client := &http.Client{}
				measure(b, func(i int) {
					body := withID(payload(kind, i), "extensions", fmt.Sprintf(`{"operationId":"s%d"}`, i))
					req, _ := http.NewRequest("POST", d.URL+"/api/graphql/admin/mem", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-GraphQL-Event-Stream-Token", tok)
					req.SetBasicAuth("admin", dt.AdminPassword)
					resp, err := client.Do(req)
					if err != nil || resp.StatusCode != 202 {
						b.Fatalf("POST: %v %v", err, resp)
					}
					resp.Body.Close()
				})
				st.Close()
			}
		})
	}
}

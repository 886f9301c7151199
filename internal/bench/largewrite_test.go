package bench

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// BenchmarkWriteLargeDocuments measures what REST writes of large
// documents hold: each iteration sends `clients` requests at once, each a
// JSON array of n documents of size bytes (about 60 MB a body, under
// max_body_bytes), and reports the most the live heap was above its size
// before them (MB; sampled every 20 ms after a forced collection, so
// garbage is not counted, and the daemon runs in this process: its
// client's bodies, built before, are in the base) and the time the
// requests took (s). write_bytes and write_bytes_per_user bound what the
// documents of writes in progress hold; the daemon runs with its default
// settings.
func BenchmarkWriteLargeDocuments(b *testing.B) {
	for _, c := range []struct{ clients, n, size int }{
		{1, 10, 6 << 20},
		{1, 50, 1200 << 10},
		{1, 1000, 60 << 10},
		{20, 50, 1200 << 10},
	} {
		b.Run(fmt.Sprintf("%dx%dx%dKB", c.clients, c.n, c.size>>10), func(b *testing.B) {
			d := dt.Start(b, dt.WithDatabaseURL(newDatabase(b)))
			d.CreateDatabase(b, "bench", "type Note { text: String }")
			post := poster(b, d, "Bearer "+adminToken(b, d))
			text := strings.Repeat("x", c.size)
			var peak int64
			var took time.Duration
			round := 0
			for b.Loop() {
				b.StopTimer()
				bodies := make([]string, c.clients)
				for k := range bodies {
					var body strings.Builder
					body.WriteByte('[')
					for i := range c.n {
						if i > 0 {
							body.WriteByte(',')
						}
						fmt.Fprintf(&body, `{"@type":"Note","@id":"r%dc%dn%d","text":%q}`, round, k, i, text)
					}
					body.WriteByte(']')
					bodies[k] = body.String()
				}
				round++
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				base := int64(m.HeapAlloc)
				stop, sampled := make(chan struct{}), make(chan int64)
				go func() {
					var most int64
					tick := time.NewTicker(20 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							sampled <- most
							return
						case <-tick.C:
						}
						runtime.GC()
						runtime.ReadMemStats(&m)
						most = max(most, int64(m.HeapAlloc)-base)
					}
				}()
				b.StartTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for _, body := range bodies {
					wg.Go(func() { post(body) })
				}
				wg.Wait()
				took += time.Since(start)
				close(stop)
				peak = max(peak, <-sampled)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-live-MB")
			b.ReportMetric(took.Seconds()/float64(b.N), "s/round")
		})
	}
}

package daemon_test

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// liveHeap returns the bytes of the process's live heap.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// openUnreadStream opens the SSE stream at path as user on a connection
// of its own whose receive buffer is small, and returns its reader once
// ready (": connected"); the caller then reads nothing until it wants
// to.
func openUnreadStream(t *testing.T, d *dt.Daemon, path, user, password string) *bufio.Reader {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(dt.StreamWait)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Basic %s\r\n\r\n", path, basic(user, password))
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("before the stream connected: %v", err)
		}
		if strings.HasPrefix(line, ": connected") {
			return br
		}
	}
}

// TestStreamOutputIsBudgetedPerUser: one user's change streams that do
// not read, each sent one event of 8 MiB, hold what that user's
// stream_output_bytes_per_user allows of it unsent, not the event once
// per stream: the stream whose turn it is writes it, and the others wait
// for it, forming and holding nothing of their own. Found by review:
// each stream kept its own copy of what its socket had not taken (the
// parked stream's chunk), so 16 such streams took the live heap about
// 80 MB higher, a user's max_streams_per_user streams a thousand times
// the largest event. Once the clients read, every stream gets the event
// whole, in order. Not parallel: it measures the process's heap.
func TestStreamOutputIsBudgetedPerUser(t *testing.T) {
	const streams, size = 16, 8 << 20
	d := dt.Start(t, func(c *config.Config) { c.StreamOutputBytesPerUser = size })
	d.CreateDatabase(t, "outb", "type Item { text: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rob","organization":"admin","password":"rob-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/outb", `{"user":"rob","role":"read"}`)
	readers := make([]*bufio.Reader, streams)
	for i := range readers {
		readers[i] = openUnreadStream(t, d, "/api/subscribe/admin/outb/Item", "rob", "rob-password")
	}
	doc := `{"@type":"Item","@id":"big","text":"` + strings.Repeat("x", size) + `"}`
	before := liveHeap()
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/outb", doc)
	doc = ""
	// Every stream either writes the event to its client, which does
	// not read (a parked stream whose socket did not take it whole
	// continues on a goroutine), or waits for the budget.
	eventually.True(t, dt.StreamWait, "every stream writes or waits", func() bool {
		m := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
		return dt.MetricValue(m, "sluice_streams_unparked_total")+dt.MetricValue(m, "sluice_stream_output_waiting") == streams
	})
	after := liveHeap()
	t.Logf("%d streams of one user not reading an event of %d MiB: live heap %d -> %d MiB", streams, size>>20, before>>20, after>>20)
	if grew := after - before; grew > 3*size {
		t.Errorf("the live heap grew by %d MiB, want at most %d (the event, and what one stream has not written of it)", grew>>20, 3*size>>20)
	}

	// Every stream gets the event whole once its client reads.
	var wg sync.WaitGroup
	for i, br := range readers {
		wg.Go(func() {
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Errorf("stream %d: %v", i, err)
					return
				}
				if strings.HasPrefix(line, "data: ") {
					if !strings.Contains(line, `"Item/big"`) || len(line) < size {
						t.Errorf("stream %d: an event of %d bytes, want the document's", i, len(line))
					}
					return
				}
			}
		})
	}
	wg.Wait()
}

package daemon_test

import (
	"bufio"
	"net"
	"net/http"
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
// to. header, when set, is one header line sent with the request.
func openUnreadStream(t *testing.T, d *dt.Daemon, path, header, user, password string) (net.Conn, *bufio.Reader) {
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
	req, err := http.NewRequest("GET", d.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Basic "+basic(user, password))
	if header != "" {
		k, v, _ := strings.Cut(header, ": ")
		req.Header.Set(k, v)
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("the stream's answer: %v", err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("the stream's answer: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body) // its chunks decoded
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("before the stream connected: %v", err)
		}
		if strings.HasPrefix(line, ": connected") {
			return conn, br
		}
	}
}

// TestStreamOutputIsBudgetedPerUser: one user's change streams that do
// not read, each sent one event of 8 MiB, hold what that user's
// stream_output_bytes_per_user allows of it unsent, not the event once
// per stream: the stream whose turn it is writes it, and the others wait
// for it, forming and taking nothing. Found by review: each stream kept
// what its socket had not taken of the event, so 16 such streams took
// the live heap 76 MB higher (members of one share, parked: each its own
// copy), and a user's max_streams_per_user streams a thousand times the
// largest event; resumed streams each formed the event and held it while
// their writes waited. Once the clients read, every stream gets the
// event whole. The super user's streams are held to stream_output_bytes
// the same way. Not parallel: it measures the process's heap.
func TestStreamOutputIsBudgetedPerUser(t *testing.T) {
	for _, tc := range []struct {
		name          string
		streams, size int
		resumed       bool
		// super opens the streams as the super user, held to
		// stream_output_bytes only, which is then the bound.
		super bool
	}{
		{name: "shared", streams: 16, size: 8 << 20},
		// Each forms its own event, one at a time: fewer (under -race,
		// an event of megabytes takes seconds to form), each larger
		// than the daemon's socket buffers take, so that the first
		// one's write waits for its client.
		{name: "resumed", streams: 4, size: 6 << 20, resumed: true},
		{name: "process", streams: 16, size: 8 << 20, super: true},
	} {
		name, streams, size, resumed := tc.name, tc.streams, tc.size, tc.resumed
		t.Run(name, func(t *testing.T) {
			d := dt.Start(t, func(c *config.Config) {
				c.StreamOutputBytesPerUser = int64(size)
				if tc.super {
					c.StreamOutputBytes = int64(size)
				}
			})
			d.CreateDatabase(t, "outb", "type Item { text: String! }")
			user, password := "rob", "rob-password"
			if tc.super {
				user, password = "admin", dt.AdminPassword
			} else {
				d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rob","organization":"admin","password":"rob-password"}`)
				d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/outb", `{"user":"rob","role":"read"}`)
			}
			header := ""
			if resumed {
				// A stream resumed from a position reads the log on a
				// subscription of its own, shares nobody's events, and
				// forms each event itself.
				first := answerOf(t, d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/outb", `{"@type":"Item","@id":"small","text":"s"}`))
				header = "Last-Event-ID: " + first.Position
			}
			conns, readers := make([]net.Conn, streams), make([]*bufio.Reader, streams)
			for i := range readers {
				conns[i], readers[i] = openUnreadStream(t, d, "/api/subscribe/admin/outb/Item", header, user, password)
			}
			doc := `{"@type":"Item","@id":"big","text":"` + strings.Repeat("x", size) + `"}`
			before := liveHeap()
			d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/outb", doc)
			doc = ""
			// Until every stream writes the event to its client, which
			// does not read, or waits for the budget: a parked member
			// whose socket did not take the event whole continues on a
			// goroutine (unparked); a resumed stream, on a goroutine
			// already, forms its event only once its turn comes.
			var after int64
			eventually.True(t, dt.StreamWait, "every stream writes or waits", func() bool {
				m := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
				waiting := dt.MetricValue(m, "sluice_stream_output_waiting")
				if resumed {
					return waiting == float64(streams-1)
				}
				return dt.MetricValue(m, "sluice_streams_unparked_total")+waiting == float64(streams)
			})
			after = liveHeap()
			mt := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
			t.Logf("%d %s streams of one user not reading an event of %d MiB: live heap %d -> %d MiB; catchups %v replays %v waiting %v", streams, name, size>>20, before>>20, after>>20,
				dt.MetricValue(mt, "sluice_stream_catchups_total"), dt.MetricValue(mt, "sluice_stream_replays_total"), dt.MetricValue(mt, "sluice_stream_output_waiting"))
			// A resumed stream that read the log itself holds the piece
			// it read (its change images, one row of the log) while it
			// waits, as a stream of its own holds its queue whatever
			// its client does: only the output it forms is the budget's,
			// so only the shared streams' heap is weighed.
			if grew := after - before; !resumed && grew > int64(5*size) {
				t.Errorf("the live heap grew by %d MiB, want at most %d (the event, what one stream has not written of it, and the buffers of the write and the change feed)", grew>>20, 5*size>>20)
			}

			// Every stream gets the event whole once its client reads.
			var wg sync.WaitGroup
			for i, br := range readers {
				if err := conns[i].SetReadDeadline(time.Now().Add(dt.StreamWait)); err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							t.Errorf("stream %d: %v", i, err)
							return
						}
						if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"Item/big"`) {
							if len(line) < size {
								t.Errorf("stream %d: an event of %d bytes, want the document's: %.300s ... %s", i, len(line), line, line[max(0, len(line)-300):])
							}
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

package stream

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/httpstream"
)

// BenchmarkParkedStreamMemory measures what an idle parked stream costs
// the server, beyond its connection: n clients each open a stream (an SSE
// response of a share of all of them) and read its readiness frame; once
// every stream is parked, the live heap, the goroutine stacks and the
// goroutines are compared with n clients whose connections a server took
// and holds without any stream (what a connection costs the kernel and Go
// whoever serves it). It reports bytes of live heap and goroutines per
// stream, and logs the size of each object a parked stream holds. Where
// /proc/slabinfo can be read (root, Linux), it reports the kernel's slab
// memory per connection too: the growth of the caches a TCP connection
// takes objects from, while the connections without streams are open,
// halved (client and server are both on loopback, each end a socket).
//
//	go test -run '^$' -bench ParkedStreamMemory -benchtime 1x ./internal/stream/
func BenchmarkParkedStreamMemory(b *testing.B) {
	const n = 2000
	for range b.N {
		conns := footprint(b, n, false)
		streams := footprint(b, n, true)
		b.ReportMetric(float64(streams.heap-conns.heap)/n, "heap-B/stream")
		b.ReportMetric(float64(streams.stack-conns.stack)/n, "stack-B/stream")
		b.ReportMetric(float64(streams.goroutines-conns.goroutines)/n, "goroutines/stream")
		b.ReportMetric(float64(conns.heap)/n, "heap-B/conn")
		if conns.slab > 0 {
			b.ReportMetric(float64(conns.slab)/n/2, "kernel-B/conn")
		}
	}
	logSizes(b)
}

// usage is what the process holds once n connections are open.
type usage struct {
	heap, stack, slab int64
	goroutines        int
}

// footprint opens n connections to a server that parks a stream on each
// (streams) or only takes each connection and holds it, and returns the
// process's growth once they are all open and idle.
func footprint(b *testing.B, n int, streams bool) usage {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hl := httpstream.NewListener(ln)
	var held sync.Map
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			held.Store(c, true)
		}
	})
	var s *Server
	var stop func()
	if streams {
		l := &memLog{}
		hub := changefeed.NewHub(l, changefeed.HubOptions{})
		tl := changefeed.NewTailer(l, hub, changefeed.TailerOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); tl.Run(ctx) }()
		s = New(hub, Options{})
		handler = func(w http.ResponseWriter, r *http.Request) {
			spec := Spec{Label: "bench", Database: testDB, Grant: benchGrant, Heartbeat: 12 * time.Second,
				Share: &ShareOptions{Key: "k", New: func() Evaluator { return seqEvaluator{} }, Frame: benchFrame}}
			s.Serve(r.Context(), spec, &benchSink{out: httpstream.New(w, r, "text/event-stream", 0)})
		}
		stop = func() {
			cancel()
			<-done
			hub.Close()
			s.Close(context.Background())
		}
	}
	srv := &http.Server{Handler: handler, BaseContext: func(net.Listener) context.Context {
		return httpstream.WithListener(context.Background(), hl)
	}}
	go srv.Serve(hl) //nolint:errcheck // Close ends it
	before := measure()
	clients := make([]net.Conn, n)
	for i := range clients {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = c
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if streams {
			if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
				b.Fatalf("stream %d: %q %v", i, line, err)
			}
		}
	}
	if streams {
		eventually.True(b, wait, "every stream parked", func() bool {
			s.parker.mu.Lock()
			defer s.parker.mu.Unlock()
			return s.parker.n == n
		})
	} else {
		eventually.True(b, wait, "every connection held", func() bool {
			k := 0
			held.Range(func(any, any) bool { k++; return true })
			return k == n
		})
	}
	after := measure()
	for _, c := range clients {
		c.Close()
	}
	held.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
	if stop != nil {
		stop()
	}
	srv.Close()
	return usage{heap: after.heap - before.heap, stack: after.stack - before.stack, slab: after.slab - before.slab, goroutines: after.goroutines - before.goroutines}
}

// measure returns what the process holds after a collection.
func measure() usage {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{heap: int64(ms.HeapAlloc), stack: int64(ms.StackInuse), slab: socketSlab(), goroutines: runtime.NumGoroutine()}
}

// socketCaches are the kernel's slab caches a TCP connection and its file
// take objects from: the socket (TCP), its inode, its file, its dentry,
// and its watches in epoll instances.
var socketCaches = map[string]bool{"TCP": true, "sock_inode_cache": true, "filp": true, "dentry": true, "eventpoll_epi": true}

// socketSlab returns the bytes of the objects in use in socketCaches,
// 0 when /proc/slabinfo cannot be read. Other processes on the machine
// take objects from the same caches: run it on a quiet machine.
func socketSlab() int64 {
	data, err := os.ReadFile("/proc/slabinfo")
	if err != nil {
		return 0
	}
	var total int64
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !socketCaches[f[0]] {
			continue
		}
		active, err1 := strconv.ParseInt(f[1], 10, 64)
		size, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 == nil && err2 == nil {
			total += active * size
		}
	}
	return total
}

var benchGrant = &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 1, Name: "u", Superuser: true}}, Database: testDB, Role: sluice.RoleRead}

func benchFrame(dst []byte, ev sluice.Event) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, ev.Data...)
	return append(dst, "\n\n"...)
}

// benchSink is a minimal SSE sink.
type benchSink struct{ out *httpstream.Writer }

func (k *benchSink) HTTP() *httpstream.Writer        { return k.out }
func (k *benchSink) Refuse(error)                    {}
func (k *benchSink) Fail(error)                      {}
func (k *benchSink) Ready(uint64)                    { k.out.Start(); k.out.Buf.WriteString(": connected\n\n") }
func (k *benchSink) Shared() bool                    { return true }
func (k *benchSink) WriteFrames(frames []byte) error { return k.out.WriteShared(frames) }
func (k *benchSink) WriteEvent(sluice.Event)         {}
func (k *benchSink) Spill() error                    { return k.out.Spill() }
func (k *benchSink) Flush() error                    { return k.out.Flush() }
func (k *benchSink) Ping()                           { k.out.Buf.WriteString(": ping\n\n") }
func (k *benchSink) Idle() time.Duration             { return k.out.Idle() }
func (k *benchSink) End(error)                       {}

// logSizes logs the size of each object a parked stream holds (the
// transport's sink and its framer aside).
func logSizes(b *testing.B) {
	for _, o := range []struct {
		name string
		size uintptr
	}{
		{"stream.Stream", unsafe.Sizeof(Stream{})},
		{"stream.member", unsafe.Sizeof(member{})},
		{"changefeed.Guard (opaque: about)", 64},
		{"httpstream.Writer", unsafe.Sizeof(httpstream.Writer{})},
		{"time.Timer (heartbeat)", unsafe.Sizeof(time.Timer{})},
		{"context.cancelCtx (about)", 96},
		{"stream.watch", unsafe.Sizeof(watch{})},
	} {
		b.Logf("%-36s %4d bytes", o.name, o.size)
	}
}

package rest

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// h2Server serves routes through the API's middleware (observe: the
// write deadlines) over TLS and HTTP/2, and returns its URL and a client
// that speaks HTTP/2 to it.
func h2Server(b *testing.B, routes func(chi.Router)) (string, *http.Client) {
	b.Helper()
	a := &api{Deps: Deps{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.New(), WriteTimeout: time.Minute}}
	r := chi.NewRouter()
	r.Use(a.observe)
	routes(r)
	srv := httptest.NewUnstartedServer(r)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	b.Cleanup(srv.Close)
	return srv.URL, srv.Client()
}

// processCPU returns the CPU time this process has used, server and
// client together.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHTTP2StreamFlush measures what a stream's flush of one small
// event costs over HTTP/2 (TLS, one connection), written through an
// httpstream.Writer behind the API's middleware while clients read as
// fast as they can: time per flush (ns/op) and the CPU of the whole
// process, server and clients, per flush (cpu-ns/op). Over HTTP/2 each
// write is bounded by write_timeout without the stream's deadline being
// set and cleared around it (httpstream.Watchdog); docs/benchmarks.md,
// "Write deadlines over HTTP/2", has the figures.
func BenchmarkHTTP2StreamFlush(b *testing.B) {
	frame := []byte("id: 1234567\nevent: entity.update\ndata: " + string(bytes.Repeat([]byte("x"), 160)) + "\n\n")
	url, client := h2Server(b, func(r chi.Router) {
		r.Get("/stream", func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			st := httpstream.New(w, r, "text/event-stream", time.Minute)
			st.Start()
			for range n {
				st.Buf.Write(frame)
				if st.Flush() != nil {
					return
				}
			}
		})
	})
	for _, streams := range []int{1, 16} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			read := func(n int) error {
				resp, err := client.Get(url + "/stream?n=" + strconv.Itoa(n))
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				if resp.ProtoMajor != 2 {
					return fmt.Errorf("the stream over %s", resp.Proto)
				}
				got, err := io.Copy(io.Discard, resp.Body)
				if err == nil && got != int64(n*len(frame)) {
					err = fmt.Errorf("read %d bytes, want %d", got, n*len(frame))
				}
				return err
			}
			if err := read(10); err != nil { // the connection, opened
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu := processCPU(b)
			var wg sync.WaitGroup
			errs := make(chan error, streams)
			for i := range streams {
				n := b.N / streams
				if i < b.N%streams {
					n++
				}
				wg.Go(func() {
					if err := read(n); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkHTTP2Requests measures what a small answer costs over
// HTTP/2 (TLS, one connection) behind the API's middleware, 8 requests
// at a time: time per request (ns/op) and the CPU of the whole process,
// server and client, per request (cpu-ns/op).
func BenchmarkHTTP2Requests(b *testing.B) {
	body := []byte(`{"version":"dev","databases":3,"ready":true}` + "\n")
	url, client := h2Server(b, func(r chi.Router) {
		r.Get("/info", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
		})
	})
	get := func() error {
		resp, err := client.Get(url + "/info")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
			return fmt.Errorf("%d over %s", resp.StatusCode, resp.Proto)
		}
		return nil
	}
	if err := get(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu := processCPU(b)
	b.SetParallelism(4) // 8 clients on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := get(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkHTTP2BodyRead reads a 4 MiB request body over HTTP/2 through
// the body limits (body_idle_timeout and body_min_rate set), 4 KiB a
// read: the cost of bounding each read (docs/benchmarks.md, "Reading
// request bodies over HTTP/2").
func BenchmarkHTTP2BodyRead(b *testing.B) {
	limits := newBodyLimits(0, 30*time.Second, 8192, 0)
	url, client := h2Server(b, func(r chi.Router) {
		r.With(limits.Middleware).Post("/up", func(w http.ResponseWriter, r *http.Request) {
			buf := make([]byte, 4<<10)
			for {
				if _, err := r.Body.Read(buf); err != nil {
					break
				}
			}
		})
	})
	const size = 4 << 20
	b.SetBytes(size)
	cpu := processCPU(b)
	for b.Loop() {
		req, _ := http.NewRequest("POST", url+"/up", &pieces{left: size, piece: 16 << 10})
		req.ContentLength = size
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// pieces is a body of left zero bytes, handed out piece bytes at a time.
type pieces struct{ left, piece int }

func (p *pieces) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := min(len(b), p.piece, p.left)
	clear(b[:n])
	p.left -= n
	return n, nil
}

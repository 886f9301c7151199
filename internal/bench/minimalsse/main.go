// Command minimalsse is the baseline of the stream benchmark
// (internal/bench/stream_test.go): the least an SSE server can do to
// forward the same payload bytes as Sluice, so that its cost is what this
// hardware charges for the connections and writes themselves.
//
// Every request to /sub (any method; the body is ignored) is a stream: the
// comment `: connected` once it is registered, then one frame per publish,
// `event: next`, `id: <n>`, `data: <payload>`, written and flushed on its
// own by the connection's goroutine. A POST to /publish hands its body (one
// line of JSON) to every stream without blocking: like a typical plain
// server, each stream has a bounded queue (256 frames, as many commits as a
// Sluice subscriber may have waiting) and a frame that does not fit is
// dropped. GET /stats returns the number of frames dropped.
//
// It listens on -listen (default 127.0.0.1:0) and logs the address it
// serves on to stderr as `msg="minimal sse is serving" addr=<host:port>`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
)

// queueSize is how many frames a stream may have waiting before the next
// one is dropped.
const queueSize = 256

// hub fans published frames out to the streams.
type hub struct {
	mu      sync.Mutex
	subs    map[chan []byte]struct{}
	seq     int64
	dropped atomic.Int64
}

func (h *hub) publish(payload []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	frame := make([]byte, 0, len(payload)+40)
	frame = append(frame, "event: next\nid: "...)
	frame = strconv.AppendInt(frame, h.seq, 10)
	frame = append(frame, "\ndata: "...)
	frame = append(frame, payload...)
	frame = append(frame, "\n\n"...)
	for ch := range h.subs {
		select {
		case ch <- frame:
		default:
			h.dropped.Add(1)
		}
	}
}

func (h *hub) serveSub(w http.ResponseWriter, r *http.Request) {
	ch := make(chan []byte, queueSize)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, ": connected\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	for {
		select {
		case frame := <-ch:
			if _, err := w.Write(frame); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

func (h *hub) servePublish(w http.ResponseWriter, r *http.Request) {
	payload, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.publish(payload)
	io.WriteString(w, "{}") //nolint:errcheck
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	h := &hub{subs: map[chan []byte]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/sub", h.serveSub)
	mux.HandleFunc("POST /publish", h.servePublish)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"dropped":%d}`, h.dropped.Load())
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		logger.Error("listen", "err", err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close() //nolint:errcheck
	}()
	logger.Info("minimal sse is serving", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		logger.Error("serve", "err", err)
		os.Exit(1)
	}
}

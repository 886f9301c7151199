package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/connlimit"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/inflight"
)

// recoverer turns a handler panic into a 500 and a log line, never a
// crashed daemon. The 500 has its URL's shape (refuseBody): a GraphQL
// client reads errors[].extensions.code there too.
func (a *api) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The deferred function keeps what it logs, not r: a request
		// kept by a frame below a stream lives as long as the stream.
		method, path, header := r.Method, r.URL.Path, r.Header
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.Logger.Error("handler panic", "method", method, "path", path, "panic", v)
				// A request of the path and Accept header alone: the
				// answer's shape and media type depend on nothing else.
				refuseBody(w, &http.Request{URL: &url.URL{Path: path}, Header: header}, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusWriter records the status code for metrics and logs, and bounds
// how long each write may wait for the client. It forwards Unwrap so
// http.ResponseController reaches the real writer (flushing, deadlines)
// through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	// timeout is how long a write may take from when it starts (at least
	// three quarters of it, see moveDeadline); deadlineSet is when the
	// deadline was last moved.
	timeout     time.Duration
	deadlineSet time.Time
	// dog watches the writes of an HTTP/2 response instead of a deadline
	// (see httpstream.Watchdog: there a deadline that passes resets the
	// stream even while nothing is being written, and setting one costs a
	// hand-off to the connection's goroutine); nil over HTTP/1. Streams
	// writing the response themselves find it (Watchdog).
	dog *httpstream.Watchdog
	// body is set once a write handed the response bytes of a body.
	body bool
	// request, when set, counts the request among its user's in flight
	// (beginRequest) until observe has sent the answer.
	request *inflight.Request
}

// flushWatched sends what the handler left buffered, under the watchdog.
// It costs an HTTP/2 answer the Content-Length the server gives one that
// is still wholly buffered when its handler returns (the headers go out
// now, before the server knows the handler is done): HTTP/2 marks the end
// of an answer without it.
func (w *statusWriter) flushWatched() {
	outer := w.dog.Begin()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
	w.dog.End(outer)
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	if w.dog != nil {
		outer := w.dog.Begin()
		w.ResponseWriter.WriteHeader(code)
		w.dog.End(outer)
		return
	}
	w.moveDeadline()
	w.ResponseWriter.WriteHeader(code)
}

// Write hands b to the response in pieces of httpstream.WritePiece, each
// with its own bound.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body = w.body || len(b) > 0
	n := 0
	for first := true; first || len(b) > 0; first = false {
		piece := b[:min(len(b), httpstream.WritePiece)]
		var k int
		var err error
		if w.dog != nil {
			outer := w.dog.Begin()
			k, err = w.ResponseWriter.Write(piece)
			w.dog.End(outer)
		} else {
			w.moveDeadline()
			k, err = w.ResponseWriter.Write(piece)
		}
		n += k
		if err != nil {
			return n, err
		}
		b = b[len(piece):]
	}
	return n, nil
}

// moveDeadline gives the writes from now on until timeout from now to
// finish. The server has no write timeout (streams are long-lived), so
// without a deadline a client that stops reading, its connection open,
// would block a handler's write for good, and the handler would keep what
// it holds: a listing its Postgres connection and snapshot, a GraphQL
// answer its memory. The deadline is moved at most every quarter timeout
// (moving it costs about as much CPU as a small write), so a write has at
// least three quarters of the timeout. net/http clears the deadline when
// a response ends (the next request on the connection starts without
// one) and when it hands a connection over (a WebSocket, a parked stream).
func (w *statusWriter) moveDeadline() {
	now := time.Now()
	if now.Sub(w.deadlineSet) <= w.timeout/4 {
		return
	}
	// Not every writer supports deadlines (httptest's); the write goes on
	// without one.
	_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(now.Add(w.timeout))
	w.deadlineSet = now
}

// Watchdog returns the watchdog of an HTTP/2 response's writes (nil over
// HTTP/1): httpstream.New finds it, so that a stream's own writes are
// watched by the same timer.
func (w *statusWriter) Watchdog() *httpstream.Watchdog { return w.dog }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe logs each request and records its metrics by route pattern (never
// by raw path, which would make label cardinality unbounded).
func (a *api) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, timeout: a.WriteTimeout}
		// Last, once the answer is sent (below, over HTTP/2): the
		// request leaves its user's requests in flight (beginRequest).
		defer func() { sw.request.End() }()
		returned := false // next returned, rather than panicked
		if r.ProtoMajor == 2 {
			sw.dog = httpstream.NewWatchdog(w, a.WriteTimeout)
			head := r.Method == http.MethodHead
			// However the handler ends (a panic too), the watchdog stops
			// before it returns: the response may not be touched by it
			// after. What the handler left buffered is sent first, while
			// the watchdog still watches; after it only the end of the
			// stream is left, which needs no window. (A deadline set for
			// that tail instead was handled, at random, after the stream
			// had closed: its timer held the closed stream and reset it
			// write_timeout later.) A panic's 500, which the recoverer
			// writes after this, goes out with a deadline, set once.
			defer func() {
				if returned && sw.body && !head && sw.status != http.StatusNoContent && sw.status != http.StatusNotModified {
					sw.flushWatched()
				}
				sw.dog.Stop()
				if !returned {
					_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(sw.timeout))
				}
			}()
		}
		// The request's logger gets its method and path attributes only
		// when something is logged (loggerFrom): building them for every
		// request cost CPU and, for a stream, memory for its whole life.
		// The daemon's server puts it in every request's base context
		// (BaseContext); only a server without it pays a request copy.
		if r.Context().Value(loggerKey) != a.Logger {
			r = r.WithContext(WithLogger(r.Context(), a.Logger))
		}
		// What is used after next returns is taken now: r itself is not
		// kept by this frame for the life of a stream.
		ctx, method, path := r.Context(), r.Method, r.URL.Path
		next.ServeHTTP(sw, r)
		returned = true
		route := chi.RouteContext(ctx).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		d := time.Since(start)
		label := methodLabel(method)
		a.Metrics.HTTPRequests.WithLabelValues(label, route, strconv.Itoa(sw.status)).Inc()
		if !isStream(sw.Header().Get("Content-Type"), route) {
			// A stream's lifetime is not a request duration.
			a.Metrics.HTTPDuration.WithLabelValues(label, route).Observe(d.Seconds())
		}
		if a.Logger.Enabled(ctx, slog.LevelDebug) {
			requestLogger(ctx, method, path).Debug("request", "status", sw.status, "duration", d)
		}
	})
}

// authenticate requires credentials and puts the user in the context. A
// request it refuses (no credentials or wrong ones: 401; too many wrong
// passwords: 429; Postgres unreachable: 503) is answered in the shape of
// its URL (refuse): a GraphQL client reads a 401 as it reads every other
// error of its URL, from errors[].extensions.code.
func (a *api) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := a.Engine.Auth().Authenticate(r)
		if err != nil && r.ContentLength != 0 {
			// The body is never read: nothing sent before
			// authentication may cost more than a few KiB.
			refuseUnread(w, r, err)
			return
		}
		if err != nil {
			refuse(w, r, err)
			return
		}
		// Its connection, once idle, is closed to make room only after
		// those that never carried an authenticated request.
		connlimit.Authenticated(r.Context())
		ctx, end, ok := a.beginRequest(w, r, c)
		if !ok {
			return
		}
		defer end()
		next.ServeHTTP(w, r.WithContext(auth.WithCredential(ctx, c)))
	})
}

// beginRequest counts r, authenticated with c, among its user's requests
// in flight, and the process's (Deps.Requests), before anything works
// for it, and answers 429 past its user's bound, 503 past the process's.
// The request, or its refusal, is counted until observe has sent its
// answer (over HTTP/1, until the handler returns: observe does not flush
// there, which would cost a small answer its Content-Length, and
// net/http writes what is buffered, up to 6 KiB, after, uncounted, one
// answer a connection at most): a client that grants no flow-control
// window or reads nothing holds it, with its handler, until
// write_timeout (HTTP/2 carries 250 a connection, and a user's busy
// connections are never closed to make room). Past the refusals in
// flight too, it is aborted (http.ErrAbortHandler: its HTTP/2 stream
// reset, its HTTP/1 connection closed), which holds nothing once its
// handler returns. A request that becomes a stream is counted out as its
// user's streams count it (inflight.Handover). It returns the request's
// context, what to call when the handler returns, and whether it goes
// on.
func (a *api) beginRequest(w http.ResponseWriter, r *http.Request, c *sluice.Credential) (context.Context, func(), bool) {
	req, err := a.Requests.Begin(c.User)
	if errors.Is(err, inflight.ErrAbort) {
		panic(http.ErrAbortHandler)
	}
	end := func() {}
	if sw := findStatusWriter(w); sw != nil {
		sw.request = req
	} else { // not under observe: counted out when the handler returns
		end = req.End
	}
	if err != nil {
		if r.ContentLength != 0 {
			refuseUnread(w, r, err)
		} else {
			refuse(w, r, err)
		}
		end()
		return nil, nil, false
	}
	return inflight.With(r.Context(), req), end, true
}

// findStatusWriter returns the statusWriter w is or wraps, nil if none.
func findStatusWriter(w http.ResponseWriter) *statusWriter {
	for {
		switch t := w.(type) {
		case *statusWriter:
			return t
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil
		}
	}
}

// isStream reports whether a response was a long-lived stream: server-sent
// events, or NDJSON from the GraphQL endpoint (document listings in NDJSON
// are ordinary requests).
func isStream(contentType, route string) bool {
	return strings.HasPrefix(contentType, "text/event-stream") ||
		strings.HasPrefix(contentType, "application/x-ndjson") && strings.HasPrefix(route, "/api/graphql/")
}

// methodLabel returns method as the metrics label it is counted under:
// the methods Sluice serves by their names, any other "other". net/http
// takes any token of up to several KiB as a method, before anything is
// authenticated: as a label of its own, each made a series that lived
// until the process ended (3,000 anonymous requests of 8,000-byte
// methods took a scrape to 494 MB).
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

package rest

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/jsonesc"
)

// Request bodies are bounded in time as well as in size, on every route:
//
//   - a body that sends nothing for BodyIdleTimeout fails;
//   - once BodyIdleTimeout has passed since it started, a body must keep
//     arriving at BodyMinRate bytes per second on average, counted from its
//     start: a client trickling a byte a second, which the idle timeout
//     alone waits for forever, is cut after the grace;
//   - both count only the time a read waited for the client: while the
//     handler does not read (a write waiting for a row lock before it
//     reads on), the client cannot send, and is not to blame;
//   - at most MaxRequestBodies bodies are read at once by the process, so
//     slow bodies cannot hold every connection (and, for writes, a
//     transaction each); past it a request whose handler starts reading
//     its body is answered 503. A body takes its place at its first read,
//     not as its request arrives: a request waiting for its credentials
//     to be checked (a bcrypt each), or refused before its body is read
//     (401, 403), reads none and holds none, so anonymous clients cannot
//     take every place from those who signed in.
//
// Both deadlines are one read deadline on the connection, moved before
// each read, and cleared once the body is read: after that net/http reads
// the connection in the background to notice a client going away, and a
// deadline passing there would cancel the request (a stream, say). A body
// that failed, or that its handler left unread, keeps its deadline; one
// its handler never read gets a first read's deadline when the handler
// returns. Over
// HTTP/2 a deadline is a timer that ends the body when it fires, read or
// not, and each one set or cleared is a hand-off to the connection's
// goroutine: there a readWatch bounds each read instead, and sets a
// deadline (one already passed) only to end a read that waited too long.

// They are bounded in size on every route too: a body whose
// Content-Length is over max_body_bytes is answered 413, naming the
// setting, before any of it is read (a client that sent Expect:
// 100-continue, as curl does for large bodies, never sends it); one
// without a Content-Length fails with the same 413 once it passes the
// limit. The exception is an NDJSON document write, a stream of any
// length whose documents are bounded one by one (documents.go).

// bodyLimits enforces the size, the time limits and the cap of request
// bodies.
type bodyLimits struct {
	max     int64         // bytes; 0: no limit
	idle    time.Duration // 0: no time limits
	minRate int64         // bytes per second; 0: none
	// slots holds a token per body being read; nil: no cap.
	slots chan struct{}
}

func newBodyLimits(max int64, idle time.Duration, minRate, maxBodies int64) *bodyLimits {
	b := &bodyLimits{max: max, idle: idle, minRate: minRate}
	if maxBodies > 0 {
		b.slots = make(chan struct{}, maxBodies)
	}
	return b
}

// limit returns the most bytes r's body may hold (0: any number).
func (b *bodyLimits) limit(r *http.Request) int64 {
	if (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.HasPrefix(r.URL.Path, "/api/document/") &&
		mediaType(r) == "application/x-ndjson" {
		return 0
	}
	return b.max
}

// errBodyTooLarge is the error of a body over limit (max_body_bytes).
func errBodyTooLarge(limit int64) error {
	return sluice.Errorf(sluice.CodeTooLarge, "the request body is larger than %d bytes, the most max_body_bytes allows", limit)
}

// Middleware refuses a request whose body is too large and puts the
// body's size limit, deadlines and slot (taken at its first read) in
// place.
func (b *bodyLimits) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		limit := b.limit(r)
		if limit > 0 && r.ContentLength > limit {
			refuseUnread(w, r, errBodyTooLarge(limit))
			return
		}
		body := &limitedBody{ReadCloser: r.Body, limits: b, w: w, http1: r.ProtoMajor == 1, rc: http.NewResponseController(w), length: r.ContentLength,
			json: !sdlBody(r)}
		if r.ProtoMajor == 2 && b.idle > 0 {
			body.watch = &readWatch{rc: body.rc}
			// Stopped before the handler returns: the response may not
			// be touched after.
			defer body.watch.stop()
		}
		// A body its handler left unread keeps its last deadline: what
		// net/http reads of it after the handler is bounded too. Its slot,
		// if it took one, is given back however the handler ended (a
		// panic too), once.
		defer body.release()
		r.Body = body
		if limit > 0 {
			r.Body = http.MaxBytesReader(w, body, limit)
		}
		next.ServeHTTP(w, r)
		if body.started || b.idle == 0 || body.watch != nil {
			return
		}
		// A body its handler never read (the request failed before:
		// wrong credentials, say) has no deadline yet, and net/http reads
		// what is left of it (up to 256 KiB, to keep the connection)
		// before it answers: the client's time to send it is bounded as
		// a first read's would be.
		_ = body.rc.SetReadDeadline(time.Now().Add(b.idle))
	})
}

// refusedBodyGrace is how long net/http may go on reading a refused
// request's unread body after the answer, before the connection closes:
// closing it at once, with the client's bytes still arriving, would reset
// the connection, and the client could lose the answer.
const refusedBodyGrace = time.Second

// refuseUnread answers err to a request without reading its body, and
// over HTTP/1 closes the connection after the answer. Otherwise net/http
// reads up to 256 KiB of the body, to keep the connection, before it
// answers, and with no deadline (the server has no ReadTimeout: streams
// are long-lived): a client that waits for the answer before it sends its
// body (Expect: 100-continue) would wait for nothing, and one whose body
// never ends would never see it, holding its connection outside every
// cap. With Connection: close net/http reads what is left after the
// answer instead, for refusedBodyGrace, when at most 256 KiB of it are
// announced (more, and it closes the connection at once, and a client
// still sending may see a reset instead of the answer). (Over HTTP/2 the server ends the
// stream's body itself when the handler returns; Connection: close there
// would close the connection with every other stream on it.) The answer
// has the shape of r's URL (refuse).
func refuseUnread(w http.ResponseWriter, r *http.Request, err error) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(refusedBodyGrace))
	}
	refuse(w, r, err)
}

// refuseStrayBodies answers 400 to an HTTP/1 GET, HEAD or OPTIONS request
// that carries a body (a WebSocket upgrade is a GET): no route reads one,
// and one left unread is read by net/http (see refuseUnread): before a
// stream's first event, which would then wait for the client's body, and,
// past 256 KiB, not at all, leaving its bytes on the connection for the
// request after a parked stream to be read from. It runs before anything
// else answers. An empty chunked body is no body: proxies (Envoy,
// linkerd) send one for an HTTP/2 client's GET whose headers did not end
// its stream; it is read, for at most strayBodyWait. Over HTTP/2 such a
// GET has a body as far as net/http can tell, even when none follows; the
// server ends a body left unread itself.
func refuseStrayBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
			switch r.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
				if r.ContentLength < 0 && emptyBody(w, r) {
					r.Body = http.NoBody
					break
				}
				refuseUnread(w, r, sluice.Errorf(sluice.CodeInvalid, "a %s request carries no body here, and this one has one (Content-Length or Transfer-Encoding)", r.Method))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// strayBodyWait is how long refuseStrayBodies waits for the end of a
// chunked body to see whether it is empty: a proxy sends it with the
// headers.
const strayBodyWait = time.Second

// emptyBody reports whether r's chunked body ends before any byte of it,
// within strayBodyWait. It leaves no deadline behind when it does: once a
// body is read net/http reads the connection in the background, and a
// deadline passing there would cancel the request (a stream's).
func emptyBody(w http.ResponseWriter, r *http.Request) bool {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(strayBodyWait))
	var b [1]byte
	n, err := r.Body.Read(b[:])
	if n == 0 && err == io.EOF {
		_ = rc.SetReadDeadline(time.Time{})
		return true
	}
	return false
}

// sdlBody reports whether r's body is a schema in SDL, the one body that
// is not JSON: in SDL, a block string holds backslashes as they are.
func sdlBody(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/schema/")
}

// checkEscapes checks the next piece p of a JSON body for a \u escape
// naming half of a surrogate pair alone (see package jsonesc), which
// encoding/json would read as U+FFFD; end says p is the last.
func (b *limitedBody) checkEscapes(p []byte, end bool) error {
	l, bad := b.escapes.Write(p)
	if !bad && end {
		l, bad = b.escapes.End()
	}
	if !bad {
		return nil
	}
	return sluice.Errorf(sluice.CodeInvalid, "the request body: %s", l.Refusal())
}

// limitedBody is a request body under bodyLimits.
type limitedBody struct {
	io.ReadCloser
	limits  *bodyLimits
	rc      *http.ResponseController
	watch   *readWatch    // bounds reads over HTTP/2; nil: a deadline does
	waited  time.Duration // time reads spent waiting for the client so far
	started bool          // a read was made
	length  int64         // the announced length; -1: unknown
	n       int64         // bytes read so far
	// rateBound is set when the last deadline set was the rate's.
	rateBound bool
	finished  bool
	// w and http1 are the response and protocol a refusal (take) closes
	// the connection of.
	w     http.ResponseWriter
	http1 bool
	// slotMu guards slotted, set while the body holds a slot, and
	// released, set once it may take none (release ran).
	slotMu   sync.Mutex
	slotted  bool
	released bool
	// text checks that the body is UTF-8 (utf8.go), and escapes, when
	// json is set, that its \u escapes name characters; textErr is their
	// error once one failed, answered to every read after.
	text    utf8Check
	json    bool
	escapes jsonesc.Scanner
	textErr error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.textErr != nil {
		return 0, b.textErr
	}
	b.started = true
	if err := b.take(); err != nil {
		b.textErr = err
		return 0, err
	}
	l := b.limits
	start := time.Now()
	if l.idle > 0 {
		// Without support for deadlines (not the case for HTTP/1 or 2),
		// reads wait.
		wait := l.idle
		b.rateBound = false
		if l.minRate > 0 {
			// The client's time so far may reach the grace plus the time
			// its bytes take at the least rate.
			if left := l.idle + rateTime(b.n, l.minRate) - b.waited; left < wait {
				wait, b.rateBound = left, true
			}
		}
		if b.watch != nil {
			b.watch.begin(start.Add(wait), b.rateBound)
		} else {
			_ = b.rc.SetReadDeadline(start.Add(wait))
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.waited += time.Since(start)
	if b.watch != nil {
		b.watch.end()
	}
	b.n += int64(n)
	if terr := b.text.write(p[:n]); terr == nil && err == io.EOF {
		b.textErr = b.text.end()
	} else {
		b.textErr = terr
	}
	if b.textErr == nil && b.json {
		b.textErr = b.checkEscapes(p[:n], err == io.EOF)
	}
	if b.textErr != nil {
		n, err = 0, b.textErr
	}
	if !b.finished && (err != nil || b.length >= 0 && b.n >= b.length) {
		b.finished = true
		// A body that failed keeps its deadline: what net/http reads of
		// it before answering must not wait for the client either.
		if l.idle > 0 && b.watch == nil && (err == nil || err == io.EOF) {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		b.release()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		rate := b.rateBound
		if b.watch != nil {
			// The read that the watch ended may be an earlier one that
			// returned as it fired: its limit names the cut.
			rate = b.watch.cutByRate()
		}
		if rate {
			err = sluice.Errorf(sluice.CodeInvalid, "the request body arrived slower than %d bytes a second (body_min_rate): %d bytes in %s", l.minRate, b.n, b.waited.Round(time.Second))
		} else {
			err = sluice.Errorf(sluice.CodeInvalid, "the request body sent nothing for %s (body_idle_timeout)", l.idle)
		}
	}
	return n, err
}

// readWatch bounds the reads of an HTTP/2 request body with one timer,
// reset for each read (no hand-off to the connection's goroutine), and
// ends a read that is still waiting when its time is up by setting a read
// deadline already passed: the HTTP/2 server then ends the body at once,
// and the read returns os.ErrDeadlineExceeded.
type readWatch struct {
	rc      *http.ResponseController
	mu      sync.Mutex
	timer   *time.Timer
	due     time.Time // when the read in progress must have returned; zero: none
	rate    bool      // due is body_min_rate's (else body_idle_timeout's)
	cutRate bool      // the read ended was bound by body_min_rate
	stopped bool
}

// begin notes that a read starts, which must return by due, the bound of
// body_min_rate if rate is set.
func (w *readWatch) begin(due time.Time, rate bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.due, w.rate = due, rate
	if w.timer == nil {
		w.timer = time.AfterFunc(time.Until(due), w.check)
	} else {
		w.timer.Reset(time.Until(due))
	}
}

// end notes that the read returned.
func (w *readWatch) end() {
	w.mu.Lock()
	w.due = time.Time{}
	w.mu.Unlock()
}

// check runs when the timer fires: it ends the read in progress if its
// time is up.
func (w *readWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.due.IsZero() {
		return
	}
	if left := time.Until(w.due); left > 0 {
		w.timer.Reset(left)
		return
	}
	w.cutRate = w.rate
	_ = w.rc.SetReadDeadline(time.Unix(1, 0))
}

// cutByRate reports whether the read the watch ended was bound by
// body_min_rate.
func (w *readWatch) cutByRate() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cutRate
}

// stop stops the timer, waiting for a check in progress: after it, the
// response is not touched.
func (w *readWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// rateTime is how long n bytes take at rate bytes a second, at most a
// century (a float64 of nanoseconds past int64 would not convert).
func rateTime(n, rate int64) time.Duration {
	const century = 100 * 365 * 24 * time.Hour
	return time.Duration(min(float64(n)/float64(rate)*float64(time.Second), float64(century)))
}

// take takes a slot for the body before its first read, or refuses it
// when the process reads its most bodies: reading it would be reading one
// more. A refused body is answered as refuseUnread answers (over HTTP/1
// its connection closes after the answer, net/http reading what is left
// of it for refusedBodyGrace at most), since the handler's answer leaves
// it unread. It runs on the handler's goroutine, before the handler
// answers: the Connection header can still be set.
func (b *limitedBody) take() error {
	if b.limits.slots == nil {
		return nil
	}
	b.slotMu.Lock()
	defer b.slotMu.Unlock()
	if b.slotted || b.finished {
		return nil // a read after its end needs no place: it reads nothing more
	}
	if b.released {
		// Read after its handler returned: a slot taken now would never
		// be given back, and the response is no longer the handler's.
		return sluice.Errorf(sluice.CodeUnavailable, "the request body was read after its request was answered")
	}
	select {
	case b.limits.slots <- struct{}{}:
		b.slotted = true
		return nil
	default:
	}
	if b.http1 {
		b.w.Header().Set("Connection", "close")
		_ = b.rc.SetReadDeadline(time.Now().Add(refusedBodyGrace))
	}
	return sluice.Errorf(sluice.CodeUnavailable, "this server is reading its maximum of %d request bodies (config max_request_bodies); retry shortly", cap(b.limits.slots))
}

// release gives back the body's slot if it holds one: when it is read
// (or failed), or when its handler returns. After it the body takes no
// slot.
func (b *limitedBody) release() {
	b.slotMu.Lock()
	defer b.slotMu.Unlock()
	b.released = true
	if b.slotted {
		b.slotted = false
		<-b.limits.slots
	}
}

// optionalBody decodes the small JSON body of an action whose options are
// all optional (a webhook's resume, replay, rotation) into v
// (decodeSmallJSON) unless the request has none.
func (a *api) optionalBody(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	if err := decodeSmallJSON(w, r, v); err != nil && !isEmptyBody(err) {
		return err
	}
	return nil
}

// noBody refuses a body other than none, whitespace or {} for a request
// that takes no options (what names it in the message): a webhook's pause
// or deletion, the deletion of a database, an organization or a user, a
// token's revocation. They took any body and ignored it, and a client
// that sent options ({"after": …} to a pause, {"force": true} to a
// deletion) believed they applied.
func (a *api) noBody(w http.ResponseWriter, r *http.Request, what string) error {
	var none struct{}
	err := a.optionalBody(w, r, &none)
	if err != nil && sluice.ErrorCode(err) == sluice.CodeInvalid {
		return sluice.Errorf(sluice.CodeInvalid, "%s takes no options: send no body, or {} (%s)", what, sluice.ErrorMessage(err))
	}
	return err
}

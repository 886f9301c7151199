package gqltransport

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/httpstream"
	"github.com/sluice-dev/sluice/internal/inflight"
	"github.com/sluice-dev/sluice/internal/protocol"
	"github.com/sluice-dev/sluice/internal/stream"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// graphql-sse single connection mode: one event stream carries the
// results of every operation of a client, for browsers on HTTP/1, which
// open at most six connections to an origin.
//
//   - PUT on the GraphQL URL reserves a stream: 201 with a token
//     (text/plain).
//   - GET with the token (X-GraphQL-Event-Stream-Token, or ?token= for
//     EventSource) and Accept: text/event-stream opens the stream: `:
//     connected`, then `event: next` / `data: {"id":<operationId>,
//     "payload":<ExecutionResult>}` and `event: complete` / `data:
//     {"id":<operationId>}`, and `: ping` after a heartbeat without a
//     frame. Only one stream per reservation (409); it ends the
//     reservation when it ends.
//   - POST with the token and extensions.operationId runs an operation:
//     202 once it is under way (a subscription registered: any commit that
//     starts after the 202 is delivered), its results on the stream. A
//     request that does not validate is a 400 JSON error, as the
//     GraphQL-over-HTTP spec says.
//   - DELETE with the token and ?operationId= stops one (200).
//
// Every request carries credentials, and a token answers only to the user
// who reserved it, on the database it was reserved on (else 404, as an
// unknown token). Each operation is authorized, guarded against access
// changes, capped and resumed (extensions.lastEventId) like a stream of
// its own; its results carry their positions as extensions.lastEventId.
//
// The reservation lives in the process that took the PUT: every request
// of a client must reach that process (docs/subscriptions.md, single
// connection mode's routing: sticky sessions by cookie, or by client
// address).

// reservationTTL is how long a reservation waits for its stream.
const reservationTTL = time.Minute

// connections holds the connections that carry many operations, so that
// Close can end them. Its methods are safe for concurrent use.
type connections struct {
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc

	mu           sync.Mutex
	cond         sync.Cond // broadcast when a connection ends
	closed       bool
	reservations map[string]*reservation
	// served counts the goroutines serving connections (enter), single
	// those of single connection mode streams among them; sockets holds
	// the graphql-ws sockets once accepted. Once Close's deadline passed
	// (cut), a socket is cut as soon as it is accepted.
	served, single int
	sockets        map[*socket]struct{}
	cut            bool
}

func newConnections() *connections {
	ctx, cancel := context.WithCancel(context.Background())
	c := &connections{ctx: ctx, cancel: cancel, reservations: map[string]*reservation{}, sockets: map[*socket]struct{}{}}
	c.cond.L = &c.mu
	return c
}

// enter counts a goroutine serving a connection (a single connection
// mode stream when single is set); false once Close started. Call leave
// when it returns.
func (c *connections) enter(single bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.served++
	if single {
		c.single++
	}
	return true
}

func (c *connections) leave(single bool) {
	c.mu.Lock()
	c.served--
	if single {
		c.single--
	}
	c.cond.Broadcast()
	c.mu.Unlock()
}

// accepted registers socket sc, to be cut should Close's deadline pass
// (at once, when it has); call gone when it ends.
func (c *connections) accepted(sc *socket) {
	c.mu.Lock()
	c.sockets[sc] = struct{}{}
	if c.cut {
		sc.cut()
	}
	c.mu.Unlock()
}

func (c *connections) gone(sc *socket) {
	c.mu.Lock()
	delete(c.sockets, sc)
	c.cond.Broadcast()
	c.mu.Unlock()
}

// Close ends the connections that carry many operations (graphql-ws
// sockets, single connection mode streams) and waits for them until ctx
// ends. Call it after the hub is closed: every subscription has ended
// then, so each connection sends what its operations wrote, their
// complete messages among them, before it closes. Past ctx, it closes
// the sockets left (a write to a client that does not read waits up to
// write_timeout, a close handshake 5 s each way), logs a warning naming
// how many, and waits for them, which end at once; the single connection
// mode streams left are on their requests' goroutines, which the HTTP
// server's Close cuts.
func (s *Server) Close(ctx context.Context) {
	c := s.conns
	c.mu.Lock()
	c.closed = true
	for tok, res := range c.reservations {
		if !res.attached {
			delete(c.reservations, tok)
			res.end()
		}
	}
	c.mu.Unlock()
	c.cancel()
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.served > 0 && ctx.Err() == nil {
		c.cond.Wait()
	}
	if c.served == 0 {
		return
	}
	c.cut = true
	for sc := range c.sockets {
		sc.cut()
	}
	s.opts.Logger.Warn("shutdown_timeout ran out: closing the GraphQL WebSockets still sending (single connection mode streams are cut with the HTTP server's connections)",
		"sockets", len(c.sockets), "single", c.single)
	for len(c.sockets) > 0 {
		c.cond.Wait()
	}
}

// reservation is one single connection mode client.
type reservation struct {
	token string
	user  int64
	db    int64
	// ctx ends when the stream ends (or the reservation expires): the
	// operations stop and the stream's output is dropped.
	ctx    context.Context
	cancel context.CancelFunc
	out    *muxOut
	expire *time.Timer

	mu       sync.Mutex
	attached bool // guarded by the connections' mu
	ended    bool
	ops      map[string]*muxEntry
	// busy counts the POSTs of operations from the moment they are
	// received until their operations end: read and validated, waiting
	// their turn, running. It is capped (Options.MaxOperations), as a
	// graphql-ws socket's operations are, since each holds its request
	// (its variables, its connection) and a goroutine.
	busy int
	// reading has a value while a POST reads, decodes and prepares its
	// operation, up to the moment it is under way (muxRequest.registered:
	// a query or mutation given its turn, a subscription registered):
	// the others wait with their bodies unread, so that a client whose
	// queries wait their turn (it does not read the stream, or has not
	// opened it) holds one of them decoded, not up to
	// graphql_ws_max_operations bodies of up to 8 MiB, each decoded to
	// several times that, until their turns.
	reading chan struct{}
	wg      sync.WaitGroup // the operations' goroutines
	// conn is the reservation's state in the stream server: its
	// operations' feed and pump.
	conn *stream.Conn
	// release gives back the reservation's place among the open streams
	// of its user (stream.Server.Reserve: the stream caps), granted to the
	// credential of its PUT. The guard's end (an access change that takes
	// that grant away, the credential's expiry) ends the reservation:
	// revoked is closed then, and its stream, once claimed, ends after its
	// operations wrote their errors (the hub counted the place out as the
	// guard ended); unclaimed, it is dropped.
	release func()
	// revoked is closed when the guard ends, revokeErr (why: an access
	// change, the credential's expiry, Postgres lost) written before.
	revoked   chan struct{}
	revokeErr error
	endOnce   sync.Once
}

// end stops every operation, drops the output, waits for the operations
// and releases the reservation's guard. Only its first call does.
func (res *reservation) end() { res.endOnce.Do(res.stop) }

func (res *reservation) stop() {
	res.mu.Lock()
	res.ended = true
	for _, e := range res.ops {
		e.stop()
	}
	res.mu.Unlock()
	res.cancel()
	res.conn.End()
	res.wg.Wait()
	res.conn.Close()
	res.release()
}

// leave gives back the place of a POST that runs no operation.
func (res *reservation) leave() {
	res.mu.Lock()
	res.busy--
	res.mu.Unlock()
}

// single serves a request of single connection mode.
func (t *transport) single(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		// Refused before its token is looked up: a HEAD with a token
		// that has no reservation was answered 404.
		w.Header().Set("Allow", protocol.GraphQLAllow)
		writeHTTPError(w, sluice.Errorf(sluice.CodeMethod, "%s is not a method of single connection mode: use PUT, GET, POST or DELETE", r.Method))
		return
	}
	greq := graph.RequestFrom(r.Context())
	if greq.IdempotencyKey != "" {
		// The PUT and the DELETE write nothing and record no answer,
		// and the mutations sent on the reservation carry their own
		// keys: ignored, the key would let a client believe them (or
		// the mutations) idempotent under it.
		switch r.Method {
		case http.MethodPut:
			writeHTTPError(w, sluice.Errorf(sluice.CodeInvalid, "Idempotency-Key is honoured by each mutation's POST of single connection mode; the PUT that reserves the stream writes nothing and takes none"))
			return
		case http.MethodDelete:
			writeHTTPError(w, sluice.Errorf(sluice.CodeInvalid, "Idempotency-Key is honoured by each mutation's POST of single connection mode; the DELETE that stops an operation writes nothing and takes none"))
			return
		}
	}
	if r.Method == http.MethodPut {
		t.reserve(w, r, greq)
		return
	}
	// Every DELETE comes here (protocol.Of), a plain one without a token
	// too, which answered 404 "no stream reservation for this token", as
	// if a token had been sent: what it lacks is named first, and the 404
	// kept for a token that has no reservation.
	var id string
	if r.Method == http.MethodDelete {
		q, err := streamparam.Params(r)
		if err != nil {
			writeHTTPError(w, err)
			return
		}
		id = q.Get("operationId")
		if protocol.StreamToken(r) == "" || id == "" {
			writeHTTPError(w, errDeleteNeeds(protocol.StreamToken(r) == "", id == ""))
			return
		}
	}
	res := t.reservation(r, greq)
	if res == nil {
		writeHTTPError(w, errNoReservation())
		return
	}
	switch r.Method {
	case http.MethodGet:
		t.eventStream(w, r, res)
	case http.MethodPost:
		t.singleOperation(w, r, res, exec)
	case http.MethodDelete:
		res.mu.Lock()
		if e := res.ops[id]; e != nil {
			e.stop()
			delete(res.ops, id)
		}
		res.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}
}

// reserve answers a PUT: a new reservation, 201 with its token. A
// reservation counts toward the stream caps from now on, claimed or not,
// so that reserving costs what opening a stream does: past a cap it is
// refused, 429 or 503 with Retry-After. Its grant holds the PUT's
// credential, as a stream's holds its request's: the reservation, and its
// stream, end when that credential expires or is revoked.
func (t *transport) reserve(w http.ResponseWriter, r *http.Request, greq *graph.Request) {
	if t.opts.Streams == nil {
		writeHTTPError(w, sluice.Errorf(sluice.CodeUnavailable, "the change feed is not running"))
		return
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails on the supported platforms
	tok := base64.RawURLEncoding.EncodeToString(b)
	ctx, cancel := context.WithCancel(t.conns.ctx)
	res := &reservation{token: tok, user: greq.User.ID, db: greq.DB.ID, ctx: ctx, cancel: cancel,
		out: newMuxOut(ctx.Done()), ops: map[string]*muxEntry{}, conn: t.opts.Streams.NewConn(), revoked: make(chan struct{}), reading: make(chan struct{}, 1)}
	c := t.conns
	// The guard's end runs while access changes are applied, holding the
	// hub's access lock, and must not block or take c.mu (end, under
	// c.mu, takes the access lock to release the guard), nor res.mu
	// (held while operations are stopped). The guard calls it once.
	release, err := t.opts.Streams.Reserve(ctx, engine.Grant(r.Context(), greq.User, greq.DB, t.es.Role()), func(err error) {
		res.revokeErr = err
		close(res.revoked)
		go c.dropUnclaimed(res)
	})
	if err != nil {
		cancel()
		writeHTTPError(w, err)
		return
	}
	res.release = release
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		release()
		writeHTTPError(w, sluice.Errorf(sluice.CodeUnavailable, "the server is shutting down"))
		return
	}
	c.reservations[tok] = res
	// A reservation no stream claims goes away.
	res.expire = time.AfterFunc(reservationTTL, func() { c.dropUnclaimed(res) })
	c.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(tok))
}

// errDeleteNeeds names what a DELETE on a GraphQL URL lacks: it stops an
// operation of single connection mode, and needs the stream's token and
// the operation's id.
func errDeleteNeeds(noToken, noID bool) error {
	var missing string
	switch {
	case noToken && noID:
		missing = "the X-GraphQL-Event-Stream-Token header and the operationId query parameter are missing"
	case noToken:
		missing = "the X-GraphQL-Event-Stream-Token header is missing"
	default:
		missing = "the operationId query parameter is missing"
	}
	return sluice.Errorf(sluice.CodeInvalid, "%s: DELETE on a GraphQL URL stops an operation of single connection mode, and needs the stream's token (the answer to its PUT) in the X-GraphQL-Event-Stream-Token header and the operation's id in ?operationId= (the single connection mode of the GraphQL over Server-Sent Events protocol)", missing)
}

func errNoReservation() error {
	return sluice.Errorf(sluice.CodeNotFound, "no stream reservation for this token on this server (single connection mode needs every request of a client to reach the server that took its PUT: see the single connection mode of the GraphQL over Server-Sent Events protocol)")
}

// claim attaches a stream to res, which transport.reservation found:
// checked and set under c.mu, where the reservation's expiry
// (dropUnclaimed) and Close look, so that neither ends it between the
// lookup and the attach. Else its stream would serve a reservation that
// ended: outside the stream caps (its place given back), pinging until
// the client left, every POST for it answered 404.
func (c *connections) claim(res *reservation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.reservations[res.token] != res:
		return errNoReservation()
	case res.attached:
		return sluice.Errorf(sluice.CodeConflict, "the stream of this reservation is already open")
	}
	res.attached = true
	return nil
}

// dropUnclaimed ends res unless a stream claimed it.
func (c *connections) dropUnclaimed(res *reservation) {
	c.mu.Lock()
	drop := !res.attached && c.reservations[res.token] == res
	if drop {
		delete(c.reservations, res.token)
	}
	c.mu.Unlock()
	if drop {
		res.end()
	}
}

// reservation returns the reservation r's token names, when it is the
// caller's on this database.
func (t *transport) reservation(r *http.Request, greq *graph.Request) *reservation {
	tok := protocol.StreamToken(r)
	c := t.conns
	c.mu.Lock()
	defer c.mu.Unlock()
	res := c.reservations[tok]
	if res == nil || res.user != greq.User.ID || res.db != greq.DB.ID {
		return nil
	}
	return res
}

// eventStream serves a reservation's event stream until the client
// leaves, a write fails, the server shuts down or the reservation's guard
// ends (its credential expired or was revoked, its user's access was
// taken away).
func (t *transport) eventStream(w http.ResponseWriter, r *http.Request, res *reservation) {
	heartbeat := t.opts.Heartbeat
	q, err := streamparam.Params(r)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	if q.Has("heartbeat") {
		d, err := streamparam.Heartbeat(q.Get("heartbeat"))
		if err != nil {
			writeHTTPError(w, err)
			return
		}
		heartbeat = d
	}
	c := t.conns
	if err := c.claim(res); err != nil {
		writeHTTPError(w, err)
		return
	}
	res.expire.Stop()
	// The reservation is counted among its user's streams: its stream
	// leaves its user's requests in flight.
	inflight.Handover(r.Context())
	// Claimed, the reservation is this stream's to end, on every way out
	// (Close leaves a claimed one alone): one claimed just before the
	// server began shutting down kept its place among the streams.
	defer func() {
		c.mu.Lock()
		if c.reservations[res.token] == res {
			delete(c.reservations, res.token)
		}
		c.mu.Unlock()
		res.end()
	}()
	if !c.enter(true) {
		writeHTTPError(w, sluice.Errorf(sluice.CodeUnavailable, "the server is shutting down"))
		return
	}
	defer c.leave(true)

	st := httpstream.New(w, r, protocol.MediaSSE+"; charset=utf-8", t.opts.WriteTimeout)
	st.Start()
	st.Buf.WriteString(": connected\n\n")
	if st.Flush() != nil {
		return
	}
	hb := time.NewTimer(heartbeat)
	defer hb.Stop()
	var spare []byte
	write := func() error {
		buf, _ := res.out.take(spare)
		if buf == nil {
			return nil
		}
		err := st.WriteShared(buf)
		if err == nil {
			err = st.Flush()
		}
		spare = reusable(buf)
		return err
	}
	// drain starts no operation any more and closes opsDone once the
	// running ones ended (their streams write their ends first).
	var opsDone chan struct{}
	drain := func() {
		if opsDone != nil {
			return
		}
		opsDone = make(chan struct{})
		go func() {
			res.mu.Lock()
			res.ended = true
			res.mu.Unlock()
			res.wg.Wait()
			close(opsDone)
		}()
	}
	shutdown := c.ctx.Done()
	revoked := res.revoked
	for {
		select {
		case <-res.out.wake:
			if write() != nil {
				return
			}
		case <-hb.C:
			if !httpstream.PingDue(hb, st.Idle(), heartbeat) {
				continue
			}
			st.Buf.WriteString(": ping\n\n")
			if st.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-shutdown:
			// The hub is closed: the subscriptions end and write their
			// complete; send everything before the stream ends.
			shutdown = nil
			drain()
		case <-revoked:
			// The reservation's guard ended: the hub no longer counts it
			// among the streams, so it must not go on. Its subscriptions
			// end with that error, or their own guards' where the same
			// change ended them (those opened with another credential,
			// which still holds, end because the stream that carries them
			// does); send their errors before the stream ends.
			revoked = nil
			res.mu.Lock()
			res.ended = true // no operation starts now
			var streams []*stream.Stream
			for _, e := range res.ops {
				if e.served {
					streams = append(streams, e.stream)
				} else {
					// A query or mutation waiting its turn, or running,
					// or an operation being prepared: stopped, so that
					// none runs with the access the reservation no
					// longer has, and the stream does not wait for
					// them to end.
					e.stop()
				}
			}
			res.mu.Unlock()
			for _, s := range streams {
				s.Revoke(res.revokeErr)
			}
			drain()
		case <-opsDone:
			_ = write()
			return
		}
	}
}

// singleOperation runs the operation a POST sends: 202 once it is under
// way, its results on the reservation's stream.
func (t *transport) singleOperation(w http.ResponseWriter, r *http.Request, res *reservation, exec graphql.GraphExecutor) {
	// The cap is checked before the body is read: a client past it has
	// nothing of its request held (the body is left unread, the
	// connection closed after the answer over HTTP/1, as the REST routes
	// refuse a body they will not read).
	max := t.opts.MaxOperations
	res.mu.Lock()
	full := res.busy >= max
	if !full {
		res.busy++
	}
	res.mu.Unlock()
	if full {
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(time.Second))
		}
		writeHTTPError(w, sluice.LimitErrorf(sluice.CodeTooMany, "graphql_ws_max_operations", "this stream reservation runs its maximum of %d operations at once, those waiting their turn among them (config graphql_ws_max_operations): send it again once one has ended", max))
		return
	}
	// counted is true until the operation's own end (done) gives its
	// place back.
	counted := true
	defer func() {
		if counted {
			res.leave()
		}
	}()
	select {
	case res.reading <- struct{}{}:
	case <-r.Context().Done():
		return
	case <-res.ctx.Done():
		writeHTTPError(w, sluice.Errorf(sluice.CodeNotFound, "the stream of this reservation has ended"))
		return
	}
	var underWay sync.Once
	next := func() { underWay.Do(func() { <-res.reading }) }
	defer next()
	// Its parameters are charged to the budget of requests' parameters
	// while it waits its turn and runs, until it is answered or, a
	// subscription, registered (serve, below).
	params, release, err := t.readParams(r)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	defer release()
	// Its Idempotency-Key is recorded with the hash of the parameters as
	// sent, as every other transport's (transport.parse).
	if err := graph.NoteParams(r.Context(), params); err != nil {
		writeHTTPError(w, err)
		return
	}
	id, _ := params.Extensions["operationId"].(string)
	if id == "" {
		writeHTTPError(w, sluice.Errorf(sluice.CodeInvalid, "extensions.operationId is missing: single connection mode needs an operation id"))
		return
	}
	if len(id) > maxOperationIDBytes {
		writeHTTPError(w, sluice.Errorf(sluice.CodeInvalid, "extensions.operationId is %d bytes: an operation id is at most %d bytes", len(id), maxOperationIDBytes))
		return
	}
	from, err := streamparam.LastEventID(r, params.Extensions)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	// The operation outlives the POST: it ends with the stream or a
	// DELETE. Its context keeps the request's values (the caller, the
	// executable schema).
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	res.mu.Lock()
	switch {
	case res.ended:
		res.mu.Unlock()
		cancel()
		writeHTTPError(w, sluice.Errorf(sluice.CodeNotFound, "the stream of this reservation has ended"))
		return
	case res.ops[id] != nil:
		res.mu.Unlock()
		cancel()
		writeHTTPError(w, sluice.Errorf(sluice.CodeConflict, "an operation with id %q is running on this stream", id))
		return
	}
	e := &muxEntry{stop: cancel}
	res.ops[id] = e
	res.wg.Add(1)
	counted = false // done gives the place back
	res.mu.Unlock()
	done := func() {
		res.mu.Lock()
		if res.ops[id] == e { // else DELETEd, and the id maybe reused
			delete(res.ops, id)
		}
		res.busy--
		res.mu.Unlock()
		cancel()
		res.wg.Done()
	}
	idJSON, _ := json.Marshal(id)
	op := &muxOp{out: res.out, proto: protoSingle, id: idJSON, logger: t.opts.Logger, stopped: ctx.Done(),
		accept: func() { w.WriteHeader(http.StatusAccepted) },
		reject: func(err error, errs gqlerror.List) {
			if err != nil {
				writeHTTPError(w, err)
				return
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(append(errorResult(errs), '\n'))
		}}
	req := &request{params: params, from: from}
	// A retry of a keyed mutation answers its first answer before its
	// operation is validated, as on every transport (transport.start).
	replayed, err := t.es.Replayed(ctx)
	if err != nil {
		done()
		writeHTTPError(w, err)
		return
	}
	var gop *graphql.OperationContext
	if replayed == nil {
		if gop = t.prepare(ctx, op, req, exec); gop == nil {
			done()
			return
		}
	} else {
		// Its 202 is written once the replayed answer is queued: it
		// says so, as a plain POST's answer does, and an error written
		// instead (its stream ended first) does not.
		op.accept = func() {
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusAccepted)
		}
	}
	// The reservation serves a subscription (stream.Conn: its pump, or a
	// goroutine of its own for a resume), and done is called when it is
	// over.
	served := false
	mr := &muxRequest{op: op, conn: res.conn, done: done, registered: next, serve: func(s *stream.Stream) {
		served = true
		release()
		// A DELETE, or the end of the stream, ends it.
		res.mu.Lock()
		if res.ops[id] == e { // else DELETEd: its context ended
			e.stop = func() {
				cancel()
				s.Stop()
			}
			e.stream = s
			e.served = true
		}
		res.mu.Unlock()
		// Served after the reservation's guard ended, perhaps after its
		// stream looked for the streams to end: end it here too (only
		// the first error counts).
		select {
		case <-res.revoked:
			s.Revoke(res.revokeErr)
		default:
		}
	}}
	if t.judge != nil {
		org, name := graph.DatabaseOf(r)
		mr.rejudge = func(role sluice.Role) error {
			return judgeAgain(ctx, t.judge, t.authenticate, r, org, name, role)
		}
	}
	if replayed != nil {
		t.finite(ctx, op, mr, func() *graphql.Response { return replayed })
	} else {
		t.execute(ctx, op, req, gop, exec, mr)
	}
	if !served {
		done()
	}
}

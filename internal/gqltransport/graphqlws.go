package gqltransport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/jsonesc"
	"github.com/sluice-dev/sluice/internal/stream"
)

// GraphQL over WebSocket, the graphql-transport-ws subprotocol of the
// graphql-ws library (Apollo's GraphQLWsLink, urql, Relay, GraphiQL), on
// the GraphQL URLs themselves.
//
// Credentials come from the upgrade request (its Authorization header or
// whatever else the authenticator reads, such as cookies) or, for
// browsers, which cannot set headers on a WebSocket, from the
// connection_init payload: {"Authorization":"Basic …"} (any case, also
// nested as {"headers":{"Authorization":…}}); the payload wins. They are
// checked again for every operation, which is then authorized and
// executed through the GraphQL handler like an HTTP request, against the
// database's current schema; a subscription is served by the same session
// as an SSE stream: guarded against access changes, counted in the stream
// caps, sharing with identical subscriptions, resumed with
// extensions.lastEventId, lossless for slow clients.
//
// Messages: connection_ack answers connection_init; pong answers ping; the
// server pings every heartbeat. Each result is a next whose payload
// carries its position as extensions.lastEventId. A subscription ends
// with complete, or with an error message when something ends it (an
// access change, an expired position, an outage): graphql-ws reports an
// error message to the subscriber as an error, where a next with errors
// would look like a result. A query or mutation gives next and complete;
// one that does not validate, an error. The socket closes with 4400
// (invalid message), 4401 (subscribe before connection_ack), 4403
// (credentials refused), 4408 (no connection_init within 10 s), 4409
// (an operation id in use), 4429 (a second connection_init), and 1001 on
// shutdown once every subscription's complete was sent.

// wsSubprotocol is the only subprotocol served: the legacy
// subscriptions-transport-ws ("graphql-ws") is not.
const wsSubprotocol = "graphql-transport-ws"

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Operations resolves what an operation of a socket runs against
// (graph.Handler.Operation): the current schema of database org/name for
// user u's role, authorized as a request is.
type Operations interface {
	Operation(ctx context.Context, u *sluice.User, org, name string) (context.Context, *graph.ExecutableSchema, graphql.GraphExecutor, error)
	// TakeParams charges cost, what an operation's parameters hold, to
	// u's budget of requests' parameters until the returned function is
	// called (graph.Handler.TakeParams).
	TakeParams(u *sluice.User, cost int64) (func(), error)
}

// Socket returns the handler of WebSocket upgrades on the GraphQL URLs.
// ops authorizes every operation and gives the executor it runs on: the
// socket dispatches operations itself, as the GraphQL handler would a
// request; authenticate returns the credential a request presents
// (auth.ErrNoCredentials when none). It is registered without the
// authentication middleware: a browser's credentials arrive in
// connection_init.
func (s *Server) Socket(ops Operations, authenticate func(*http.Request) (*sluice.Credential, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serveSocket(w, r, ops, authenticate)
	})
}

func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request, ops Operations, authenticate func(*http.Request) (*sluice.Credential, error)) {
	if !headerHasToken(r.Header, "Sec-WebSocket-Protocol", wsSubprotocol) {
		writeHTTPError(w, sluice.Errorf(sluice.CodeInvalid, "a GraphQL WebSocket must use the subprotocol %s (Sec-WebSocket-Protocol); the legacy subscriptions-transport-ws protocol is not served", wsSubprotocol))
		return
	}
	// The one origin policy (internal/origin), as CORS and the
	// cross-site check judge pages.
	allowed, ambient := s.opts.Origins.Socket(r)
	if !allowed {
		writeHTTPError(w, sluice.Errorf(sluice.CodeForbidden, "a page of origin %.256q may not open a GraphQL WebSocket here: it is neither this server's origin nor listed in cors_origins", r.Header.Get("Origin")))
		return
	}
	// Credentials of the upgrade request itself are checked before it is
	// accepted, so wrong ones get a plain 401. A browser adds the ones it
	// remembers by itself: they count only for a page allowed to use them.
	var cred *sluice.Credential
	if ambient {
		var err error
		cred, err = authenticate(r)
		if err != nil && !errors.Is(err, auth.ErrNoCredentials) {
			writeHTTPError(w, err)
			return
		}
	}
	// The socket is made before the upgrade is accepted: the place its
	// upgrade's credentials take among the streams may end it (sc.end)
	// from then on. ws and raw are set once it is accepted.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	org, name := graph.DatabaseOf(r)
	sc := &socket{srv: s, upgrade: r, org: org, name: name, dispatch: ops, authenticate: authenticate, cred: cred, ambient: ambient, ack: func() {},
		ctx: ctx, cancel: cancel, out: newMuxOut(ctx.Done()), ops: map[string]*muxEntry{}, ended: make(chan struct{})}
	if cred == nil {
		// Until connection_ack a socket without credentials of its own
		// is anyone's: there are only so many, each reading at most
		// MaxInitBytes, and one address holds only its share of them.
		release, err := s.admitPending(s.clientAddr(r))
		if err != nil {
			writeHTTPError(w, err)
			return
		}
		var acked sync.Once
		sc.ack = func() { acked.Do(release) }
		defer sc.ack()
	} else {
		// One whose upgrade authenticated is its user's, not counted
		// among those (anonymous sockets cannot refuse it): it takes its
		// place among the streams of its user and of the process now, as
		// it would at connection_init, so that one user cannot hold any
		// number of sockets that never send connection_init. Past a cap,
		// or without access to the database, the upgrade is answered as
		// a stream's request would be (429 or 503 with Retry-After,
		// 403). connection_init keeps this place (initPlace), else it is
		// given back here.
		place, err := sc.hold(cred)
		if err != nil {
			writeHTTPError(w, err)
			return
		}
		sc.place = place
		defer func() {
			// Read after run returned: its reader, which may take the
			// place, has ended.
			if sc.place != nil {
				sc.place()
			}
		}()
	}
	c := s.conns
	if !c.enter(false) {
		writeHTTPError(w, sluice.Errorf(sluice.CodeUnavailable, "the server is shutting down"))
		return
	}
	defer c.leave(false)
	kw := &keepConn{ResponseWriter: w}
	ws, err := websocket.Accept(kw, r, &websocket.AcceptOptions{
		Subprotocols: []string{wsSubprotocol},
		// The origin policy decided, comparing scheme, host and port,
		// where the library's patterns compare the host only.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return // Accept answered
	}
	ws.SetReadLimit(s.opts.MaxInitBytes)
	sc.ws, sc.raw = ws, kw.conn
	c.accepted(sc)
	defer c.gone(sc)
	sc.run()
}

// pendingShare is the most unacknowledged sockets one client address
// holds of a process cap of max: a tenth, at least one, so that one
// anonymous client cannot take every place and ten addresses are needed
// to (the default cap of 1,000 leaves each 100, more than a page opens).
func pendingShare(max int64) int64 { return (max + 9) / 10 }

// clientAddr returns the address of the client that sent r (see
// Options.ClientAddr).
func (s *Server) clientAddr(r *http.Request) string {
	if s.opts.ClientAddr == nil {
		return r.RemoteAddr
	}
	return s.opts.ClientAddr(r)
}

// admitPending counts an unacknowledged socket without credentials from
// remoteAddr, unless the process or the address (auth.AddressKey) holds
// its maximum; release, to be called once, counts it out.
func (s *Server) admitPending(remoteAddr string) (release func(), err error) {
	max := s.opts.MaxPendingSockets
	if max <= 0 {
		return func() {}, nil
	}
	addr := auth.AddressKey(remoteAddr)
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	if s.pending >= max {
		return nil, sluice.Errorf(sluice.CodeUnavailable, "this server holds its maximum of %d GraphQL WebSockets waiting for connection_init (config max_unauthenticated_sockets); retry shortly, or send credentials with the upgrade", max)
	}
	if share := pendingShare(max); s.pendingBy[addr] >= share {
		return nil, sluice.Errorf(sluice.CodeUnavailable, "this address holds its share of %d GraphQL WebSockets waiting for connection_init (a tenth of config max_unauthenticated_sockets); retry shortly, or send credentials with the upgrade", share)
	}
	s.pending++
	s.pendingBy[addr]++
	return func() {
		s.pendingMu.Lock()
		defer s.pendingMu.Unlock()
		s.pending--
		if s.pendingBy[addr]--; s.pendingBy[addr] == 0 {
			delete(s.pendingBy, addr) // a map of the addresses waiting now, not of all seen
		}
	}, nil
}

// keepConn is the response websocket.Accept takes a socket's connection
// from: it keeps the connection, which socket.cut closes.
type keepConn struct {
	http.ResponseWriter
	conn net.Conn
}

func (k *keepConn) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(k.ResponseWriter).Hijack()
	k.conn = conn
	return conn, rw, err
}

func (k *keepConn) Unwrap() http.ResponseWriter { return k.ResponseWriter }

// socket is one graphql-ws connection.
type socket struct {
	srv *Server
	ws  *websocket.Conn
	// raw is the socket's connection, which cut closes.
	raw     net.Conn
	upgrade *http.Request
	// org and name are the database of the socket's URL.
	org, name    string
	dispatch     Operations
	authenticate func(*http.Request) (*sluice.Credential, error)
	cred         *sluice.Credential // of the upgrade request; nil: none
	// ambient is set when the upgrade's own credentials may count (see
	// checkOrigin).
	ambient bool
	// ack counts the socket out of the unacknowledged ones, once.
	ack func()
	// place, when the upgrade's credentials took the socket's place among
	// the streams (hold), gives it back; nil once connection_init took
	// it over (initPlace), or when they did not.
	place func()

	// ctx ends with the connection; each operation's context is a child.
	ctx    context.Context
	cancel context.CancelFunc
	out    *muxOut

	// credReq presents the connection's credentials (set by
	// connection_init, read by the operations).
	credReq *http.Request

	mu  sync.Mutex
	ops map[string]*muxEntry // running operations by id
	wg  sync.WaitGroup       // their goroutines and streams
	// running counts the operations started, not yet done and not
	// completed by the client: at most Options.MaxOperations. A complete
	// gives its operation's place back at once, so that a client at the
	// cap that completes one may start another with its next message:
	// counted until its goroutine ended, an operation completed while it
	// waited for room (its client reads nothing) or ran kept its place
	// for as long as that took, and the next subscribe was refused. It
	// ends soon after: its turn, room in the queue and Postgres watch its
	// context; a subscription served by the connection's pump ends when
	// the pump comes to it, which may first wait for room for another
	// subscription until the client reads. Meanwhile a subscription sent
	// waits for room to be under way, and the reader waits for it: no
	// other operation starts while the client reads nothing, so those
	// still ending are among those counted before the queue filled.
	running int
	// conn is the socket's state in the stream server: its
	// subscriptions' feed and pump.
	conn *stream.Conn

	// ended is closed, once, when the socket's own place among the
	// streams is taken away (hold: an access change, its credential's
	// expiry, Postgres lost); endCode and endReason, set before, are the
	// close it then ends with, once its operations ended.
	ended     chan struct{}
	endOnce   sync.Once
	endCode   websocket.StatusCode
	endReason string
}

// end makes the socket close with code and reason once its operations
// have ended (see write); only its first call counts. It does not block.
func (sc *socket) end(code websocket.StatusCode, reason string) {
	sc.endOnce.Do(func() {
		sc.endCode, sc.endReason = code, reason
		close(sc.ended)
	})
}

// cut ends the socket at once, from any goroutine: its context ends, and
// its connection is closed, so that a write to a client that does not
// read, or a close handshake with it, fails.
func (sc *socket) cut() {
	sc.cancel()
	_ = sc.raw.Close()
}

// run serves the socket: this goroutine writes, another reads.
func (sc *socket) run() {
	if e := sc.srv.opts.Streams; e != nil {
		sc.conn = e.NewConn()
		defer sc.conn.Close() // after the operations ended (wg.Wait below)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc.read()
	}()
	sc.write()
	sc.cancel()
	if sc.conn != nil {
		sc.conn.End() // their contexts ended with the connection's
	}
	<-readDone
	sc.wg.Wait()
	_ = sc.ws.CloseNow()
}

// write sends what the operations and the reader queue, and a ping every
// heartbeat, until the connection ends; on shutdown it waits for the
// operations to end (the hub is closed, so their subscriptions do), sends
// what they wrote and closes with 1001.
func (sc *socket) write() {
	hb := time.NewTimer(sc.srv.opts.Heartbeat)
	defer hb.Stop()
	var spare []byte
	send := func(msgs ...[]byte) bool {
		ctx, cancel := context.WithTimeout(sc.ctx, sc.srv.opts.WriteTimeout)
		defer cancel()
		for _, m := range msgs {
			if sc.ws.Write(ctx, websocket.MessageText, m) != nil {
				return false
			}
		}
		return true
	}
	flush := func() bool {
		buf, ends := sc.out.take(spare)
		if buf == nil {
			return true
		}
		msgs := make([][]byte, len(ends))
		start := 0
		for i, end := range ends {
			msgs[i] = buf[start:end]
			start = end
		}
		ok := send(msgs...)
		spare = reusable(buf)
		return ok
	}
	shutdown := sc.srv.conns.ctx.Done()
	ended := sc.ended
	var opsDone chan struct{}
	// drain stops new operations and closes opsDone once the running
	// ones have ended (their subscriptions end by themselves).
	drain := func() {
		if opsDone != nil {
			return
		}
		opsDone = make(chan struct{})
		go func() {
			sc.mu.Lock()
			sc.ops = nil // no operation starts now
			sc.mu.Unlock()
			sc.wg.Wait()
			close(opsDone)
		}()
	}
	code, reason := websocket.StatusGoingAway, "server shutting down"
	for {
		select {
		case <-sc.out.wake:
			if !flush() {
				return
			}
		case <-hb.C:
			if !send([]byte(`{"type":"ping"}`)) {
				return
			}
			hb.Reset(sc.srv.opts.Heartbeat)
		case <-sc.ctx.Done():
			return
		case <-shutdown:
			shutdown = nil
			drain()
		case <-ended:
			ended = nil
			if opsDone == nil { // a shutdown's close comes first
				code, reason = sc.endCode, sc.endReason
			}
			// The socket lost its place (its access was taken away, its
			// credential expired): its subscriptions end with their own
			// errors, and its queries and mutations, waiting their turn
			// or running, are stopped: none of them runs with the access
			// it no longer has, and the close does not wait for them.
			sc.stopFinite()
			drain()
		case <-opsDone:
			flush()
			_ = sc.ws.Close(code, reason)
			return
		}
	}
}

// stopFinite stops the operations whose streams the socket does not
// serve: queries and mutations, and operations still being prepared.
func (sc *socket) stopFinite() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, e := range sc.ops {
		if !e.served {
			e.stop()
		}
	}
}

// closeWith closes the socket with a graphql-ws close code.
func (sc *socket) closeWith(code websocket.StatusCode, reason string) {
	_ = sc.ws.Close(code, closeReason(reason))
	sc.cancel()
}

// closeReason returns reason cut to fit a close frame (at most 123
// bytes), on a character's boundary: a reason cut inside one is not
// UTF-8, which RFC 6455 requires, and browsers then fail the connection
// (1006 or 1007) instead of reporting its code.
func closeReason(reason string) string {
	if len(reason) <= 120 {
		return reason
	}
	n := 120
	for n > 0 && !utf8.RuneStart(reason[n]) {
		n--
	}
	return reason[:n]
}

// wsMessage is a graphql-transport-ws message.
type wsMessage struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Payload json.RawMessage `json:"payload"`
}

// read handles the client's messages until the connection ends.
func (sc *socket) read() {
	defer sc.cancel()
	initTimer := time.AfterFunc(sc.srv.opts.InitTimeout, func() {
		sc.closeWith(4408, "Connection initialisation timeout")
	})
	defer initTimer.Stop()
	acked := false
	// pending is closed once the last operation started is under way
	// (muxRequest.registered): a query or mutation given its turn, a
	// subscription registered. The loop reads on meanwhile, so that a
	// complete (of the operation waiting or of the one running) and a
	// ping are answered while a query waits behind a long one, but it
	// starts no other operation until then: the next subscribe waits
	// here, as bytes, so a socket holds at most one operation waiting
	// and one message read ahead of it, besides those running.
	var pending <-chan struct{}
	for {
		typ, data, err := sc.ws.Read(sc.ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			sc.closeWith(4400, "graphql-transport-ws messages are text")
			return
		}
		if !utf8.Valid(data) {
			// encoding/json would read it as U+FFFD.
			sc.closeWith(4400, "Invalid message: not valid UTF-8")
			return
		}
		if l, bad := jsonesc.Find(data); bad {
			// So would it read half of a surrogate pair.
			sc.closeWith(4400, fmt.Sprintf("Invalid message: %s at byte %d is half of a UTF-16 surrogate pair without its other half", l.Escape(), l.Offset))
			return
		}
		var m wsMessage
		if err := json.Unmarshal(data, &m); err != nil || m.Type == "" {
			sc.closeWith(4400, "Invalid message: want a JSON object with a type")
			return
		}
		switch m.Type {
		case "connection_init":
			if acked || !initTimer.Stop() {
				sc.closeWith(4429, "Too many initialisation requests")
				return
			}
			if err := sc.init(m.Payload); err != nil {
				sc.refuseInit(err)
				return
			}
			release, err := sc.initPlace()
			if err != nil {
				sc.refuseInit(err)
				return
			}
			defer release()
			acked = true
			sc.ack()
			sc.ws.SetReadLimit(sc.srv.opts.MaxMessageBytes)
			sc.out.add([]byte(`{"type":"connection_ack"}`))
			_ = sc.out.flush(nil)
		case "ping":
			// Before connection_ack the socket is anyone's: a ping
			// while a pong still waits for the writer gets none of its
			// own, so a client that pings and never reads holds one
			// pong here, not 64 KiB of them (one pong says as much as
			// many). After it, the queue's bound holds the socket back.
			if !acked && sc.out.waiting() {
				continue
			}
			sc.out.add([]byte(`{"type":"pong"}`))
			_ = sc.out.flush(nil)
		case "pong":
		case "subscribe":
			if !acked {
				sc.closeWith(4401, "Unauthorized")
				return
			}
			if pending != nil {
				select {
				case <-pending:
				case <-sc.ctx.Done():
					return
				}
			}
			if m.ID == "" {
				sc.closeWith(4400, "Invalid message: subscribe needs an id")
				return
			}
			if len(m.ID) > maxOperationIDBytes {
				sc.closeWith(4400, fmt.Sprintf("Invalid message: an operation id is at most %d bytes", maxOperationIDBytes))
				return
			}
			params, msg := graph.ParseRequestBody(m.Payload)
			if msg != "" {
				sc.closeWith(4400, "Invalid message: "+msg)
				return
			}
			var ok bool
			if pending, ok = sc.subscribe(m.ID, params, graph.ParamsCost(m.Payload)); !ok {
				sc.closeWith(4409, "Subscriber for "+m.ID+" already exists")
				return
			}
		case "complete":
			sc.mu.Lock()
			if e := sc.ops[m.ID]; e != nil {
				e.stop()
				delete(sc.ops, m.ID)
				e.released = true // see running
				sc.running--
			}
			sc.mu.Unlock()
		default:
			sc.closeWith(4400, "Invalid message: unknown type "+m.Type)
			return
		}
	}
}

// refuseInit closes the socket whose connection_init was refused with err,
// shown as every transport shows an error (sluice.Show): 4400 for an
// invalid message, 1013 (try again later, which graphql-ws clients retry)
// when the server cannot serve now, 4500 for a failure of its own, 4403
// otherwise.
func (sc *socket) refuseInit(err error) {
	sh := sluice.Show(err)
	sh.Log(sc.ctx, sc.srv.opts.Logger, "graphql-ws connection_init refused", err)
	switch sh.Code {
	case sluice.CodeInvalid:
		sc.closeWith(4400, "Invalid message: "+sh.Message)
	case sluice.CodeUnavailable, sluice.CodeTooMany:
		sc.closeWith(websocket.StatusTryAgainLater, "Try again later: "+sh.Message)
	case sluice.CodeInternal:
		sc.closeWith(4500, "Internal server error")
	default:
		sc.closeWith(4403, "Forbidden: "+sh.Message)
	}
}

// initPlace returns the socket's place among the streams from
// connection_ack on, once connection_init took its credentials (checked
// again here): the place its upgrade took when connection_init took the
// upgrade's credentials and they still name the same user, so that the
// socket counts once; else, the payload's credentials winning, the
// upgrade's place is given back first (the socket counts once there too)
// and one is taken for the credentials connection_init carried, which may
// be refused.
func (sc *socket) initPlace() (release func(), err error) {
	if sc.srv.opts.Streams == nil {
		return func() {}, nil
	}
	cred, err := sc.authenticate(sc.credReq.WithContext(sc.ctx))
	if err != nil {
		return nil, err
	}
	place := sc.place
	sc.place = nil
	if place != nil {
		if sc.credReq == sc.upgrade && cred.User.ID == sc.cred.User.ID {
			return place, nil
		}
		place()
	}
	return sc.hold(cred)
}

// hold counts the socket, for credential cred (of its upgrade, or of
// connection_init), toward the stream caps of its user and of the
// process, as a single connection mode reservation counts
// (stream.Server.Reserve), until release is called: an accepted socket
// holds a connection and its goroutines with or without subscriptions, so
// without this one user could hold any number.
// An access change that takes the user's access to the socket's database
// away, or the expiry of its JWT, ends its subscriptions (their own
// guards) and then closes the socket with 4403; Postgres lost closes it
// with 1013: a socket that holds no place among the streams is not kept.
func (sc *socket) hold(cred *sluice.Credential) (release func(), err error) {
	e := sc.srv.opts.Streams
	if e == nil {
		return func() {}, nil
	}
	octx, es, _, err := sc.dispatch.Operation(auth.WithCredential(sc.ctx, cred), cred.User, sc.org, sc.name)
	if err != nil {
		return nil, err
	}
	grant := engine.Grant(octx, cred.User, graph.RequestFrom(octx).DB, es.Role())
	return e.Reserve(sc.ctx, grant, func(err error) {
		// From the goroutine applying access changes: must not block.
		if errors.Is(err, sluice.ErrStorageUnavailable) {
			sc.end(websocket.StatusTryAgainLater, "Try again later: the database server is unavailable")
			return
		}
		sc.end(4403, closeReason("Forbidden: "+sluice.ErrorMessage(err)))
	})
}

// init takes the connection's credentials: the connection_init payload's
// Authorization, else the upgrade request's (when they may count: see
// checkOrigin). A payload naming it twice (in two spellings, or at the top
// and under headers) is refused as Invalid: which one counts would be a
// guess. So is an Authorization that is not a string.
func (sc *socket) init(payload json.RawMessage) error {
	// Its members are kept as text, and only those of "headers" decoded
	// too: the payload comes before any credential, and decoded whole
	// into Go values a nested one of 16 KiB held half a megabyte.
	var p map[string]json.RawMessage
	if len(bytes.TrimSpace(payload)) > 0 && !bytes.Equal(bytes.TrimSpace(payload), []byte("null")) {
		if err := json.Unmarshal(payload, &p); err != nil {
			return sluice.Errorf(sluice.CodeInvalid, "the connection_init payload must be an object")
		}
		// A map keeps the last of two equal keys: which credential
		// counts would be a guess.
		if name, ok := repeatedMember(payload); ok {
			return sluice.Errorf(sluice.CodeInvalid, "the connection_init payload names %s twice: send it once", sluice.Echo(name))
		}
	}
	authz, n, err := authorizationOf(p)
	if err != nil {
		return err
	}
	var h map[string]json.RawMessage
	// Headers that are not an object are not read, as before.
	if json.Unmarshal(p["headers"], &h) == nil {
		hz, hn, err := authorizationOf(h)
		if err != nil {
			return err
		}
		if n > 0 && hn > 0 {
			return sluice.Errorf(sluice.CodeInvalid, "the connection_init payload has an Authorization both at its top and under headers: send one")
		}
		if hn > 0 {
			authz = hz
		}
	}
	if authz == "" {
		if sc.cred == nil {
			return auth.ErrNoCredentials
		}
		sc.credReq = sc.upgrade
		return nil
	}
	req := sc.upgrade.Clone(sc.ctx)
	req.Header.Set("Authorization", authz)
	if _, err := sc.authenticate(req); err != nil {
		return err
	}
	sc.credReq = req
	return nil
}

// repeatedMember returns a member name that JSON object obj, or the
// object under its "headers", names twice, and whether there is one
// (none either when obj is not valid JSON, which its decoding says).
func repeatedMember(obj []byte) (string, bool) { return repeatedIn(obj, true) }

// repeatedIn is repeatedMember, looking into the object under "headers"
// only when headers is set: the credentials are read at the top and
// under "headers" (authorizationOf), never deeper. Each level read the
// rest of the text again, so following every nested "headers" made a
// connection_init of 16 KiB, sent before any credential,
// {"headers":{"headers":… 1,300 levels deep, cost 86 MB of garbage and
// a fifth of a second of a core (TestDeepConnectionInitCostsLittle).
func repeatedIn(obj []byte, headers bool) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		name, _ := t.(string)
		if seen[name] {
			return name, true
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", false
		}
		if name == "headers" && headers {
			if inner, ok := repeatedIn(v, false); ok {
				return "headers." + inner, true
			}
		}
	}
	return "", false
}

// authorizationOf returns the string under the key authorization, in any
// case, of m, and how many such keys m has; an Invalid error for two, or
// for one that is not a string.
func authorizationOf(m map[string]json.RawMessage) (string, int, error) {
	var s string
	n := 0
	for k, v := range m {
		if !strings.EqualFold(k, "authorization") {
			continue
		}
		n++
		if n > 1 {
			return "", n, sluice.Errorf(sluice.CodeInvalid, "the connection_init payload has the key Authorization in two spellings: send one")
		}
		// A JSON string; null decodes into a string too, without error.
		if v = bytes.TrimSpace(v); len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
			return "", n, sluice.Errorf(sluice.CodeInvalid, "the connection_init payload's %s must be a string", k)
		}
	}
	return s, n, nil
}

// subscribe starts operation id and returns a channel closed once it is
// under way (see muxRequest.registered), nil when it was not started. It
// reports false when id is in use.
func (sc *socket) subscribe(id string, params *graphql.RawParams, cost int64) (registered <-chan struct{}, ok bool) {
	ctx, cancel := context.WithCancel(sc.ctx)
	sc.mu.Lock()
	if sc.ops == nil { // shutting down: the operation is not started
		sc.mu.Unlock()
		cancel()
		return nil, true
	}
	if sc.ops[id] != nil {
		sc.mu.Unlock()
		cancel()
		return nil, false
	}
	if max := sc.srv.opts.MaxOperations; sc.running >= max {
		sc.mu.Unlock()
		cancel()
		// An error message ends this operation only: graphql-ws
		// clients report it to its subscriber and go on with the
		// others, where they take a close as the end of all of them
		// (4429 and the other 4xxx codes without retrying).
		idJSON, _ := json.Marshal(id)
		op := &muxOp{out: sc.out, proto: protoWS, id: idJSON, logger: sc.srv.opts.Logger}
		op.refuse(sluice.LimitErrorf(sluice.CodeTooMany, "graphql_ws_max_operations", "this socket runs its maximum of %d operations at once (config graphql_ws_max_operations): send it again once one has ended", max))
		return nil, true
	}
	e := &muxEntry{stop: cancel}
	sc.ops[id] = e
	sc.running++
	sc.wg.Add(1)
	sc.mu.Unlock()
	reg := make(chan struct{})
	go sc.operation(ctx, cancel, e, id, params, cost, reg)
	return reg, true
}

// operation runs operation id: authorized, then dispatched to the
// transport of the database's current schema and the caller's role, as
// the GraphQL handler serves a request.
func (sc *socket) operation(ctx context.Context, cancel context.CancelFunc, e *muxEntry, id string, params *graphql.RawParams, cost int64, registered chan struct{}) {
	var once sync.Once
	mark := func() { once.Do(func() { close(registered) }) }
	served := false
	// release gives back the charge of the operation's parameters to the
	// budget of requests' parameters (TakeParams, below).
	release := func() {}
	done := func() {
		release()
		sc.mu.Lock()
		if sc.ops[id] == e { // else completed, and the id maybe reused
			delete(sc.ops, id)
		}
		if !e.released {
			sc.running--
		}
		sc.mu.Unlock()
		cancel()
		sc.wg.Done()
	}
	idJSON, _ := json.Marshal(id)
	op := &muxOp{out: sc.out, proto: protoWS, id: idJSON, logger: sc.srv.opts.Logger, stopped: ctx.Done()}
	defer func() {
		if v := recover(); v != nil {
			// A failure of this operation's, not of the connection's.
			op.refuse(fmt.Errorf("graphql-ws operation %s: panic: %v", id, v))
		}
		mark()
		if !served {
			done()
		}
	}()
	// Every operation presents the connection's credentials again: a
	// revoked token or changed password refuses it as it would a request.
	cred, err := sc.authenticate(sc.credReq.WithContext(ctx))
	if err != nil {
		op.refuse(err)
		return
	}
	// What its parameters hold is charged, as a plain request's is, while
	// it waits and runs: a socket holds one query waiting and one running,
	// but a user may hold many sockets. A subscription gives it back once
	// registered, its variables then charged to the streams' budgets.
	if release, err = sc.dispatch.TakeParams(cred.User, cost); err != nil {
		release = func() {}
		op.refuse(err)
		return
	}
	octx, es, exec, err := sc.dispatch.Operation(auth.WithCredential(ctx, cred), cred.User, sc.org, sc.name)
	if err != nil {
		// No access, no such database, Postgres unavailable: the error
		// ends the operation.
		op.refuse(err)
		return
	}
	// The connection serves a subscription (stream.Conn: its pump, or a
	// goroutine of its own for a resume; this one's stack grew while
	// preparing), and done is called when it is over.
	mr := &muxRequest{params: params, op: op, registered: mark, conn: sc.conn, done: done, serve: func(s *stream.Stream) {
		served = true
		release()
		// A complete from the client ends it.
		sc.mu.Lock()
		if sc.ops[id] == e { // else completed: its context ended
			e.stop = func() {
				cancel()
				s.Stop()
			}
		}
		e.served = true
		sc.mu.Unlock()
	}, rejudge: func(role sluice.Role) error {
		return judgeAgain(ctx, sc.dispatch, sc.authenticate, sc.credReq, sc.org, sc.name, role)
	}}
	(&transport{Server: sc.srv, es: es}).operate(octx, mr, exec)
}

package gqltransport

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/origin"
	"github.com/sluice-dev/sluice/internal/protocol"
	"github.com/sluice-dev/sluice/internal/stream"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// Options configure a Server. Zero values take the defaults.
type Options struct {
	// Streams serves subscriptions and live queries; without it they get
	// an UNAVAILABLE error (finite operations still work).
	Streams *stream.Server
	Logger  *slog.Logger
	Metrics *metrics.Stream
	// Heartbeat is the keep-alive interval when a request gives no
	// ?heartbeat= (config key heartbeat; default 12s).
	Heartbeat time.Duration
	// WriteTimeout bounds each write to a client, so a vanished peer is
	// noticed (default 1m). The HTTP server itself has no write timeout.
	WriteTimeout time.Duration
	// MaxBodyBytes bounds a POST body (default 10 MiB).
	MaxBodyBytes int64
	// MaxInitBytes bounds a graphql-ws message before connection_ack
	// (config max_header_bytes; default 16 KiB), MaxMessageBytes one
	// after it (config graphql_ws_max_message_bytes; default 1 MiB).
	MaxInitBytes    int64
	MaxMessageBytes int64
	// MaxOperations caps the operations one graphql-ws socket, or one
	// single connection mode reservation, runs at once: queries,
	// mutations and subscriptions, those waiting their turn among them
	// (config graphql_ws_max_operations; default 100).
	MaxOperations int
	// MaxPendingSockets caps the graphql-ws sockets not yet acknowledged
	// whose upgrade carried no credentials of its own (config
	// max_unauthenticated_sockets; 0: no cap); one client address holds
	// at most a tenth of them (pendingShare).
	MaxPendingSockets int64
	// ClientAddr returns the address of the client that sent a request
	// (auth.ClientAddr, which believes X-Forwarded-For from the proxies
	// in config trusted_proxies), which MaxPendingSockets' share per
	// address is keyed on. Nil: the request's RemoteAddr.
	ClientAddr func(*http.Request) string
	// MaxChangeSetBytes bounds the changes of one commit gathered for a
	// _ChangeSet event, their images and per-change overhead
	// (changeBytes; config key graphql_max_response_bytes; 0: no bound).
	// A larger commit gives such a subscriber an error event.
	MaxChangeSetBytes int64
	// Origins is the origin policy (config cors_origins; internal/origin)
	// deciding which pages may open a GraphQL WebSocket, and with which
	// credentials: pages of the server's own origin or a listed one with
	// the browser's; with "*", any page, with those of its
	// connection_init only. Nil: same origin only.
	Origins *origin.Policy
	// Live bounds what live queries hold (config live_*).
	Live LiveBudget
	// InitTimeout is how long a graphql-ws socket has to send
	// connection_init (0: 10 s). Tests that hold sockets unacknowledged
	// on a loaded machine lengthen it.
	InitTimeout time.Duration
}

// Server is the graphql-sse transport shared by every database's gqlgen
// server. It is safe for concurrent use.
type Server struct {
	opts Options

	conns *connections // graphql-ws sockets, single connection mode streams
	// live evaluates the live queries of each feed together.
	live *liveBatcher
	// pendingMu guards pending and pendingBy: the graphql-ws sockets not
	// yet acknowledged whose upgrade carried no credentials, in all and
	// by client address (auth.AddressKey).
	pendingMu sync.Mutex
	pending   int64
	pendingBy map[string]int64
	// judge and authenticate judge a single connection mode operation
	// again when its turn comes (see Judge); nil until Judge is called.
	judge        Operations
	authenticate func(*http.Request) (*sluice.Credential, error)
}

// Judge gives single connection mode what judges each query and mutation
// again when its turn comes, as a graphql-ws socket judges its own (see
// Socket): ops resolves the database for the user authenticate finds in
// the operation's POST. Call it before the server serves requests.
// Without it, a query or mutation waiting its turn runs with the access
// of its POST; its reservation losing its place among the streams still
// stops it.
func (s *Server) Judge(ops Operations, authenticate func(*http.Request) (*sluice.Credential, error)) {
	s.judge, s.authenticate = ops, authenticate
}

// NewServer returns a Server.
func NewServer(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 12 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = time.Minute
	}
	if o.InitTimeout <= 0 {
		o.InitTimeout = 10 * time.Second
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 10 << 20
	}
	if o.MaxInitBytes <= 0 {
		o.MaxInitBytes = 16 << 10
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 1 << 20
	}
	if o.MaxOperations <= 0 {
		o.MaxOperations = 100
	}
	if o.Origins == nil {
		o.Origins = origin.New(nil)
	}
	return &Server{opts: o, conns: newConnections(), live: newLiveBatcher(o.Streams, o.Metrics, o.Live), pendingBy: map[string]int64{}}
}

// Transport returns the gqlgen transport serving the event-stream requests
// of the executable schema es; register it with graph.Options.Transports.
func (s *Server) Transport(es *graph.ExecutableSchema) graphql.Transport {
	return &transport{Server: s, es: es}
}

type transport struct {
	*Server
	es *graph.ExecutableSchema
}

// Supports claims the requests protocol.Of says are of single connection
// mode (sse_single.go) or an event stream (SSE, NDJSON, multipart);
// graph.HTTPTransport takes the rest. The operations of a graphql-ws
// socket are no requests: the socket dispatches them itself
// (graphqlws.go).
func (t *transport) Supports(r *http.Request) bool {
	switch protocol.Of(r) {
	case protocol.SingleConnection, protocol.SSE, protocol.NDJSON, protocol.Multipart:
		return true
	}
	return false
}

// request is a parsed streaming request.
type request struct {
	params    *graphql.RawParams
	heartbeat time.Duration
	named     bool             // ?connected=true: send the named connected event
	from      *sluice.Position // resume after it; nil: from now
	// release gives back the charge of params to the budget of
	// requests' parameters (graph.ReadChargedParams), once the operation
	// is answered or its subscription registered; nil for the operations
	// of a graphql-ws socket, which charge their own.
	release func()
}

// Do serves one streaming request.
//
// Everything up to the readiness frame (parsing, validation, the first
// reads of the log) runs on a goroutine of its own that ends once the
// subscription is registered: those call chains grow a goroutine's stack
// to 16 KiB or more, the runtime only shrinks a stack to half when less
// than a quarter of it is in use, and a subscription's handler goroutine
// then waits for hours with that stack. Its stack stays at the size the
// long-lived loop needs.
func (t *transport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	p := protocol.Of(r)
	switch p {
	case protocol.SingleConnection:
		t.single(w, r, exec)
		return
	}
	// An event stream (SSE, NDJSON, Multipart): Supports claims nothing
	// else.
	var (
		s        *stream.Stream
		panicked any
		started  = make(chan struct{})
	)
	go func() {
		defer close(started)
		// A panic belongs to the handler goroutine, where the server's
		// recovery middleware sees it.
		defer func() { panicked = recover() }()
		s = t.start(w, r, p, exec)
	}()
	<-started
	if panicked != nil {
		panic(panicked)
	}
	if s != nil {
		s.Serve()
	}
}

// start answers a request up to the point where a subscription is
// registered and ready, and returns its stream; nil when the request is
// over (an error, or a finite operation). p is the request's event stream
// protocol (SSE, NDJSON or Multipart).
func (t *transport) start(w http.ResponseWriter, r *http.Request, p protocol.Kind, exec graphql.GraphExecutor) *stream.Stream {
	st := newFramer(w, r, p, t.opts.WriteTimeout)
	req, err := t.parse(r)
	if err != nil {
		writeHTTPError(w, err)
		return nil
	}
	// A subscription is registered, and a query or mutation answered,
	// when start returns.
	defer req.release()
	req.params.Headers = r.Header
	if r.Method == http.MethodPost {
		// A retry of a keyed mutation answers its first answer before
		// its operation is validated, as a plain request does: a
		// schema change since may refuse the operation now.
		resp, err := t.es.Replayed(r.Context())
		if err != nil {
			writeHTTPError(w, err)
			return nil
		}
		if resp != nil {
			w.Header().Set("Idempotent-Replayed", "true")
			t.finite(r.Context(), st, nil, func() *graphql.Response { return resp })
			return nil
		}
	}
	op := t.prepare(r.Context(), st, req, exec)
	if op == nil {
		return nil
	}
	if r.Method == http.MethodGet && op.Operation.Operation == ast.Mutation {
		w.Header().Set("Allow", "POST")
		writeHTTPError(w, sluice.Errorf(sluice.CodeMethod, "a mutation cannot be sent with GET; use POST"))
		return nil
	}
	return t.execute(r.Context(), st, req, op, exec, nil)
}

// prepare parses and validates the operation of req, in ctx (the
// request's or the connection operation's, carrying graph.Request); nil
// when it does not validate (answered through st: graphql-sse answers it
// on an accepted stream).
func (t *transport) prepare(ctx context.Context, st framer, req *request, exec graphql.GraphExecutor) *graphql.OperationContext {
	start := graphql.Now()
	req.params.ReadTime = graphql.TraceTiming{Start: start, End: start}
	op, errs := exec.CreateOperationContext(ctx, req.params)
	if errs != nil {
		st.invalid(errs)
		_ = st.flush()
		return nil
	}
	return op
}

// execute runs a validated operation: a query or mutation gives one next
// and complete (finite); a subscription is opened (see subscribe) and,
// unless it is an operation of a connection (mr), its stream returned to
// be served (nil when it could not start).
func (t *transport) execute(ctx context.Context, st framer, req *request, op *graphql.OperationContext, exec graphql.GraphExecutor, mr *muxRequest) *stream.Stream {
	if op.Operation.Operation != ast.Subscription && !t.es.IsLive(op) {
		t.finite(ctx, st, mr, func() *graphql.Response {
			responses, rctx := exec.DispatchOperation(ctx, op)
			return responses(rctx)
		})
		return nil
	}
	return t.subscribe(ctx, st, req, op, mr)
}

// finite answers a query or mutation, whose response run makes, with one
// next and complete: at once, or, as an operation of a connection (mr),
// in its turn among the connection's.
func (t *transport) finite(ctx context.Context, st framer, mr *muxRequest, run func() *graphql.Response) {
	if mr != nil {
		// An operation of a connection runs once the connection's
		// queries and mutations before it have queued their results
		// and the queue has room (muxOut.turn): so a client that
		// does not read holds little.
		release, err := mr.op.out.turn(ctx.Done())
		if err != nil {
			// Stopped, or the connection is gone: nothing is sent
			// for it, but a POST of single connection mode still
			// needs an answer.
			if mr.op.reject != nil {
				mr.op.refuse(sluice.Errorf(sluice.CodeNotFound, "the operation ended before it ran: its stream ended, its access was taken away, or a DELETE stopped it"))
			}
			return
		}
		defer release()
		if mr.registered != nil {
			mr.registered()
		}
		if mr.rejudge != nil {
			// The access it was authorized with may have changed
			// while it waited: it runs only if it would be
			// authorized now.
			if err := mr.rejudge(t.es.Role()); err != nil {
				mr.op.refuse(err)
				return
			}
		}
	}
	resp := run()
	if mr != nil && ctx.Err() != nil {
		// The client completed it (graphql-ws) or a DELETE stopped
		// it (single connection mode) while it ran: nothing more
		// is sent for its id, which may name a new operation by
		// now (its result was "the request was cancelled", and its
		// complete ended the new one for the client).
		if mr.op.reject != nil {
			mr.op.refuse(sluice.Errorf(sluice.CodeNotFound, "the operation was stopped while it ran: a DELETE stopped it, or its stream ended"))
		}
		return
	}
	t.answer(st, resp)
	if mr != nil {
		// Its result is queued, and the operation is over: it does
		// not wait for the writer to take it. Its turn waited for
		// room, and the next query or mutation waits for room in
		// its turn, so the queue still holds at most muxOutLimit
		// and one result. Waiting here would hold a single
		// connection mode POST unfinished (its 202 unsent, or sent
		// on a connection that serves nothing else meanwhile) until
		// a stream takes the result: a client that waits for the
		// POST before it opens the stream would wait for nothing.
		mr.op.out.notify()
		return
	}
	_ = st.flush()
}

// answer buffers resp, the response of a query or mutation, as a finite
// operation's: one next, then complete.
func (t *transport) answer(st framer, resp *graphql.Response) {
	b, err := graph.MarshalResponse(resp)
	if err != nil {
		b = errorResult(gqlerror.List{gqlError(t.opts.Logger, fmt.Errorf("encode a graphql response: %w", err))})
	}
	st.start()
	st.next("", b)
	st.complete()
}

// parse reads the request's parameters: the GraphQL parameters from the
// URL (GET) or the JSON body (POST), charged to the budget of requests'
// parameters until req.release is called, and the stream's own URL
// parameters. Errors are CodeInvalid (400) or 415/413 request errors, or
// the budget's refusal; a URL parameter given more than once is one
// (streamparam.Params), the GraphQL ones of a GET among them.
func (t *transport) parse(r *http.Request) (*request, error) {
	q, err := streamparam.Params(r)
	if err != nil {
		return nil, err
	}
	req := &request{heartbeat: t.opts.Heartbeat}
	if q.Has("heartbeat") {
		d, err := streamparam.Heartbeat(q.Get("heartbeat"))
		if err != nil {
			return nil, err
		}
		req.heartbeat = d
	}
	if q.Has("connected") {
		b, err := strconv.ParseBool(q.Get("connected"))
		if err != nil {
			return nil, sluice.Errorf(sluice.CodeInvalid, "query parameter connected=%s: want true or false", sluice.Echo(q.Get("connected")))
		}
		req.named = b
	}
	params, release, err := t.readParams(r)
	if err != nil {
		return nil, err
	}
	if err := graph.NoteParams(r.Context(), params); err != nil {
		release()
		return nil, err
	}
	if req.from, err = streamparam.LastEventID(r, params.Extensions); err != nil {
		release()
		return nil, err
	}
	req.params, req.release = params, release
	return req, nil
}

// readParams reads the GraphQL parameters with graph.ReadParams, the
// parser of every transport on the GraphQL URL, and charges them to the
// budget of requests' parameters (graph.ReadChargedParams) until the
// function it returns is called.
func (t *transport) readParams(r *http.Request) (*graphql.RawParams, func(), error) {
	return graph.ReadChargedParams(r, t.opts.MaxBodyBytes)
}

// judgeAgain judges an operation of a connection again, as a new request
// of the connection's credentials would be: r presents them
// (authenticated again: a revoked token or changed password refuses it),
// and ops resolves database org/name for their user now (no access, no
// such database). It returns the error the operation is refused with,
// which is a Forbidden one when the user's role there is now narrower
// than role, the one it was prepared for: it would show what the role
// no longer may read.
func judgeAgain(ctx context.Context, ops Operations, authenticate func(*http.Request) (*sluice.Credential, error), r *http.Request, org, name string, role sluice.Role) error {
	cred, err := authenticate(r.WithContext(ctx))
	if err != nil {
		return err
	}
	_, es, _, err := ops.Operation(auth.WithCredential(ctx, cred), cred.User, org, name)
	if err != nil {
		return err
	}
	if now := es.Role(); now < role {
		return sluice.Errorf(sluice.CodeForbidden, "the role of %s on %s/%s was narrowed to %s while this operation waited its turn", cred.User.Name, org, name, now)
	}
	return nil
}

// gqlError converts err to a GraphQL error with extensions.code, as
// sluice.Show shows it, and logs it at its level.
func gqlError(logger *slog.Logger, err error) *gqlerror.Error {
	sh := sluice.Show(err)
	sh.Log(context.Background(), logger, "graphql stream failed", err)
	return &gqlerror.Error{Message: sh.Message, Extensions: sh.GraphQLExtensions(sh.Code.GraphQLCode())}
}

// errorResult returns the ExecutionResult {"errors":[…]}.
func errorResult(errs gqlerror.List) []byte {
	b, _ := json.Marshal(struct {
		Errors gqlerror.List `json:"errors"`
	}{errs})
	return b
}

// writeHTTPError answers a request that cannot start a stream with a JSON
// GraphQL error response and the status of err, as sluice.Show shows it,
// with the headers the router's answers carry: WWW-Authenticate on a 401
// (a graphql-ws upgrade with wrong credentials; HTTP requires it of a
// 401), Retry-After on an answer that invites a retry.
func writeHTTPError(w http.ResponseWriter, err error) {
	sh := sluice.Show(err)
	if sh.Code == sluice.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Basic realm="sluice", charset="UTF-8"`)
	}
	if sh.RetryAfter != "" {
		w.Header().Set("Retry-After", sh.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(sh.Code.HTTPStatus())
	_, _ = w.Write(append(errorResult(gqlerror.List{{Message: sh.Message, Extensions: sh.GraphQLExtensions(sh.Code.RefusedGraphQLCode())}}), '\n'))
}

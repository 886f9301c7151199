package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/go-chi/chi/v5"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"golang.org/x/sync/singleflight"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/protocol"
)

// Options configure a Handler. Zero values take the documented defaults.
type Options struct {
	Logger *slog.Logger
	// Transports are tried, in order, before the GraphQL-over-HTTP
	// transport (HTTPTransport), which takes every request they leave: an
	// event-stream transport for subscriptions goes here, claiming the
	// requests by their protocol (internal/protocol.Of). Each is called
	// with the request context carrying the Request (RequestFrom) and may
	// use the ExecutableSchema it is built for.
	Transports []func(*ExecutableSchema) graphql.Transport
	// Limits bound each request's document and result; zero fields take
	// the defaults (DefaultLimits).
	Limits Limits
	// MaxBodyBytes bounds a POST body (default 10 MiB).
	MaxBodyBytes int64
	// RequestBytes bounds what the parameters of the plain HTTP requests
	// running at once hold (see paramsBudget); 0: no bound.
	RequestBytes int64
}

// Handler serves GraphQL for every database at /api/graphql/{org}/{db}
// and /api/graphql/_system. Each request is authorized (the read role), then
// served by the gqlgen server of its database's current schema version and
// the reader's role, built on first use. A schema change makes the next
// request build a new server, which replaces the old one; requests in
// flight finish on the one they started with. Safe for concurrent use.
type Handler struct {
	store Store
	opts  Options

	// servers holds the server of each database and role in use, and
	// building builds each once when many requests want it at once;
	// queries, texts and shapes are the servers' query caches
	// (servers.go).
	servers  *serverCache
	building singleflight.Group
	// budget is shared by the servers' HTTP transports.
	budget  *paramsBudget
	queries *sharedCache[*ast.QueryDocument]
	texts   *sharedCache[string]
	shapes  *sharedCache[struct{}]
}

type serverKey struct {
	db   int64
	role sluice.Role
}

// server is a gqlgen server for one schema version. Its query caches hold
// documents validated against that version only, so they go with it.
//
// It is what gqlgen's handler.Server would be, written out: that server
// copies every request (to add StartOperationTrace's start time) and its
// panic handler keeps the copy for a stream's whole life; here the
// request is copied once, and the panic handler keeps only its context.
type server struct {
	version    int
	fields     int // its schema's fields, inherited ones included (servers.go)
	es         *ExecutableSchema
	exec       *executor.Executor
	ops        operations // exec, as the transports run operations with it
	transports []graphql.Transport
}

// serve hands r to the first transport that supports it.
func (srv *server) serve(w http.ResponseWriter, r *http.Request, media string) {
	ctx := r.Context()
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
		var ge *gqlerror.Error
		if err := srv.exec.PresentRecoveredError(ctx, v); !errors.As(err, &ge) {
			ge = gqlerror.Errorf("internal error")
		}
		writeErrors(w, media, http.StatusInternalServerError, gqlerror.List{ge})
	}()
	for _, t := range srv.transports {
		if t.Supports(r) {
			t.Do(w, r, srv.ops)
			return
		}
	}
	writeRequestError(w, media, invalidRequest("transport not supported"))
}

// NewHandler returns a Handler reading and writing through store.
func NewHandler(store Store, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Limits = opts.Limits.withDefaults()
	return &Handler{store: store, opts: opts, budget: newParamsBudget(opts.RequestBytes),
		servers: newServerCache(maxServers, maxServerFields),
		queries: newSharedCache[*ast.QueryDocument](maxCachedQueries, queryCacheWeight,
			func(text string) int { return parsedBytesPerByte*len(text) + entryOverhead }),
		texts:  newSharedCache[string](maxCachedTexts, textCacheWeight, func(text string) int { return 2*len(text) + entryOverhead }),
		shapes: newSharedCache[struct{}](maxCachedShapes, shapeCacheWeight, func(text string) int { return len(text) + entryOverhead }),
	}
}

// ServeHTTP authorizes the request and serves it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	media, ok := responseMedia(protocol.AcceptHeader(r.Header))
	if !ok {
		media = mediaJSON
	}
	u := auth.UserFrom(r.Context())
	if u == nil {
		writeRequestError(w, media, sluice.Errorf(sluice.CodeUnauthenticated, "not authenticated"))
		return
	}
	org, name := DatabaseOf(r)
	// The schema version a request is served with comes from the
	// engine's cache, which may lag a schema change made on another
	// replica a moment ago. A stream reads it afresh: it lives on
	// prepared for that version. A plain request that the version
	// refuses (it does not validate, or a read finds the schema moved)
	// is served once more with the current version.
	key, err := engine.IdempotencyKeyOf(r.Header.Values("Idempotency-Key"))
	if err != nil {
		writeErrors(w, media, http.StatusBadRequest, gqlerror.List{toGQLError(r.Context(), h.opts.Logger, nil, err)})
		return
	}
	var try *attempt
	if protocol.Of(r) == protocol.HTTP {
		// HTTPTransport serves it: what its headers refuse it for is
		// answered before the schema is read and its server built.
		if (HTTPTransport{MaxBodyBytes: h.opts.MaxBodyBytes}).refused(w, r) {
			return
		}
		try = &attempt{}
	} else {
		h.store.ForgetDatabase(org, name)
	}
	for {
		d, s, role, err := h.store.GraphQLDatabase(r.Context(), u, org, name)
		if err != nil {
			ge := toGQLError(r.Context(), h.opts.Logger, nil, err)
			if ra := sluice.RetryAfter(err); ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			writeErrors(w, media, sluice.ErrorCode(err).HTTPStatus(), gqlerror.List{ge})
			return
		}
		srv, err := h.server(d, s, role)
		if err != nil {
			ge := toGQLError(r.Context(), h.opts.Logger, nil, err)
			writeErrors(w, media, http.StatusInternalServerError, gqlerror.List{ge})
			return
		}
		if try != nil {
			try.moved = func(ctx context.Context) bool {
				cur, _, err := h.store.CurrentDatabase(ctx, d)
				return err == nil && cur.SchemaVersion != d.SchemaVersion
			}
		}
		req := &Request{User: u, DB: d, IdempotencyKey: key, try: try, budget: h.budget}
		if try != nil && key != "" && !try.last {
			req.replay = func(w http.ResponseWriter, r *http.Request, media string, p *graphql.RawParams) bool {
				return h.replay(w, r, media, req, p)
			}
		}
		// gqlgen's transports need the operation's start time.
		ctx := graphql.StartOperationTrace(WithRequest(r.Context(), req))
		srv.serve(w, r.WithContext(ctx), media)
		if try == nil || !try.again {
			return
		}
		try.again, try.last = false, true
		h.store.ForgetDatabase(org, name)
	}
}

// DatabaseOf returns the organization and name of the database a GraphQL
// URL names: /api/graphql/{org}/{db}, or the system database for
// /api/graphql/_system.
func DatabaseOf(r *http.Request) (org, name string) {
	org, name = chi.URLParam(r, "org"), chi.URLParam(r, "db")
	if org == "" && name == "" {
		org, name = sluice.SystemOrg, sluice.SystemDB
	}
	return org, name
}

// Operation resolves what one operation of a connection that carries many
// (a graphql-ws socket) runs against, as ServeHTTP does for a request of
// a stream: the current schema of database org/name (read afresh), for
// u's role; authorized as a request is. It returns ctx carrying the
// operation's Request (RequestFrom) and trace start, the executable
// schema and its executor, or the error a request would be answered with
// (no access, no such database, Postgres unavailable).
func (h *Handler) Operation(ctx context.Context, u *sluice.User, org, name string) (context.Context, *ExecutableSchema, graphql.GraphExecutor, error) {
	h.store.ForgetDatabase(org, name)
	d, s, role, err := h.store.GraphQLDatabase(ctx, u, org, name)
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := h.server(d, s, role)
	if err != nil {
		return nil, nil, nil, err
	}
	return graphql.StartOperationTrace(WithRequest(ctx, &Request{User: u, DB: d})), srv.es, srv.ops, nil
}

// replay answers req, a plain HTTP request with an Idempotency-Key whose
// parameters p are read but not parsed, with the answer an earlier
// request of the same user to the same database recorded under the key
// for the same request (the same hash), if the user may still write the
// database (engine.Engine.Replayed: a user who lost the write role gets
// no answer, and the mutation then runs and is refused as theirs would
// be), and reports whether it answered.
// The key is looked up before the operation is parsed and validated, as
// a REST write's is before its body is read: a retry answers the first
// answer on every replica, even when a schema change since would refuse
// the operation now. It keeps the hash for the request's attempts, whose
// mutation records the key with it when no answer is found.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request, media string, req *Request, p *graphql.RawParams) bool {
	hash, err := requestHash(req.DB, p)
	if err == nil {
		req.try.hash = hash
		var resp *graphql.Response
		resp, err = recorded(r.Context(), h.store, req, hash)
		if err == nil && resp == nil {
			return false
		}
		if err == nil {
			writeResponse(w, media, resp, true)
			return true
		}
	}
	if ra := sluice.RetryAfter(err); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	writeErrors(w, media, sluice.ErrorCode(err).HTTPStatus(), gqlerror.List{toGQLError(r.Context(), h.opts.Logger, nil, err)})
	return true
}

// recorded returns the response that an earlier request of req's user
// to req's database recorded under req's IdempotencyKey for a request
// that hashed to hash, marking req replayed; nil when there is none (see
// engine.Engine.Replayed: a user who lost the write role gets none).
func recorded(ctx context.Context, store Store, req *Request, hash []byte) (*graphql.Response, error) {
	c, answer, err := store.Replayed(ctx, req.User, req.DB, req.IdempotencyKey, hash)
	if err != nil || c == nil {
		return nil, err
	}
	// An answer recorded by an older build may not be written as
	// MarshalResponse expects (compact, <, > and & escaped).
	data, err := json.Marshal(json.RawMessage(answer))
	if err != nil {
		return nil, fmt.Errorf("the answer recorded under the idempotency key: %w", err)
	}
	req.replayed = true
	return &graphql.Response{Data: data, Extensions: map[string]any{"position": c.End().String(), "version": c.Version()}}, nil
}

// server returns the gqlgen server for d's current schema version and role.
func (h *Handler) server(d *sluice.Database, s *sluice.Schema, role sluice.Role) (*server, error) {
	key := serverKey{d.ID, role}
	if cur := h.servers.get(key); cur != nil && cur.version == d.SchemaVersion {
		return cur, nil
	}
	// Requests that find no server build it once between them: a
	// schema's server can take a second and hundreds of MB to build, and
	// each request built its own.
	sv := serverVersion{key, d.SchemaVersion}
	v, err, _ := h.building.Do(fmt.Sprintf("%d/%d/%d", d.ID, role, d.SchemaVersion), func() (any, error) {
		if cur := h.servers.get(key); cur != nil && cur.version == d.SchemaVersion {
			return cur, nil // built while this call waited to begin
		}
		next, err := h.build(s, role, sv)
		if err != nil {
			return nil, err
		}
		next.version, next.fields = d.SchemaVersion, schemaFields(s)
		next.es.version, next.es.handler = d.SchemaVersion, h
		h.servers.add(key, next)
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*server), nil
}

// Forget drops the servers of database id (after it is deleted).
func (h *Handler) Forget(id int64) { h.servers.forget(id) }

// build returns a new server for s as role reads it, whose query caches
// are sv's views of the handler's.
func (h *Handler) build(s *sluice.Schema, role sluice.Role, sv serverVersion) (*server, error) {
	es, err := NewExecutableSchema(h.store, s, role, h.opts.Logger)
	if err != nil {
		return nil, err
	}
	es.limits = h.opts.Limits
	srv := &server{es: es, exec: executor.New(es)}
	srv.ops = operations{Executor: srv.exec, schema: es.Schema()}
	for _, t := range h.opts.Transports {
		srv.transports = append(srv.transports, t(es))
	}
	srv.transports = append(srv.transports, HTTPTransport{MaxBodyBytes: h.opts.MaxBodyBytes, budget: h.budget})
	cache := cacheView[*ast.QueryDocument]{h.queries, sv}
	srv.exec.SetDefaultRulesFn(validationRules)
	srv.exec.SetQueryCache(newValidatingCache(cache, cacheView[struct{}]{h.shapes, sv}, es.gql))
	srv.exec.Use(extension.Introspection{})
	// Before the persisted-query cache, which keeps the texts it is sent
	// (see documentBounds).
	srv.exec.Use(documentBounds{limits: h.opts.Limits, cache: cache})
	srv.exec.Use(extension.AutomaticPersistedQuery{Cache: cacheView[string]{h.texts, sv}})
	srv.exec.Use(statementBounds{es: es, max: h.opts.Limits.MaxStatements})
	srv.exec.SetRecoverFunc(func(ctx context.Context, v any) error {
		h.opts.Logger.ErrorContext(ctx, "graphql panic", "panic", v)
		return sluice.Errorf(sluice.CodeInternal, "internal error")
	})
	return srv, nil
}

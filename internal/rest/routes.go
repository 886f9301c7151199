// Package rest serves Sluice's HTTP API. Routes declares every route in one
// place; handlers decode the request, call the engine and map its errors.
package rest

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/inflight"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/webhook"
)

// Deps is what the HTTP API needs.
type Deps struct {
	Engine  *engine.Engine
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Ready reports whether the daemon can serve (Postgres reachable,
	// migrations applied, change feed running).
	Ready func() bool
	// Version is the build's version string for /api/info.
	Version string
	// MaxBodyBytes limits JSON request bodies (NDJSON streams are limited
	// document by document).
	MaxBodyBytes int64
	// BodyIdleTimeout, when not zero, fails a request whose body sends
	// nothing for that long; past it, BodyMinRate (bytes a second, 0:
	// none) is the least average rate a body must keep. MaxRequestBodies
	// (0: no cap) bounds the bodies read at once (see bodies.go).
	BodyIdleTimeout time.Duration
	// WriteTimeout bounds each write of a response: a client that stops
	// reading for this long is cut, and the handler's writes fail, so
	// that it gives back what it holds (see statusWriter). Zero: a
	// minute.
	WriteTimeout     time.Duration
	BodyMinRate      int64
	MaxRequestBodies int64
	// WriteSpoolBytes bounds the bytes of write bodies read ahead, in
	// memory and in files, before their transactions begin (spool.go);
	// 0: bodies are read as they arrive. WriteSpoolDir is where the files
	// go (the daemon checks it can write there).
	WriteSpoolBytes int64
	WriteSpoolDir   string
	// Metrics serves GET /metrics to the super user and to a bearer
	// MetricsToken (when set); with MetricsElsewhere it is not served
	// here (the daemon serves it on a listener of its own).
	MetricsToken     string
	MetricsElsewhere bool
	// PageBytes bounds a page of /api/changes and /api/log in bytes of
	// change images and commit text (history_page_bytes).
	PageBytes int64
	// GraphQL, when set, serves /api/graphql/{org}/{db} and /api/graphql/_system.
	GraphQL http.Handler
	// GraphQLSocket, when set, serves the WebSocket upgrades of the
	// GraphQL URLs (graphql-ws); it authenticates by itself.
	GraphQLSocket http.Handler
	// GraphiQL, when set, serves the GraphiQL page at /api/graphiql/{org}/{db}
	// and /api/graphiql/_system, and GraphiQLAssets the files it loads at
	// /api/graphiql/_assets/{file} (public: the same npm files for everyone).
	GraphiQL       http.Handler
	GraphiQLAssets http.Handler
	// Console, when set, serves the console at /console/ and every path
	// below it (its views and files, public: the page asks the user to
	// sign in, and sends the credential with each API request).
	Console http.Handler
	// Landing, when set, serves the landing page at / (authenticated,
	// as GraphiQL's pages are).
	Landing http.Handler
	// Requests, when set, bounds each user's requests in flight, and
	// every user's together, counted from their authentication until
	// their answers are sent (see authenticate).
	Requests *inflight.Limiter
	// Stream serves the change streams (see subscribe.go).
	Stream StreamDeps
	// CORS is the cross-origin policy of every route.
	CORS *CORS
	// Webhooks, when set, serves /api/webhooks/{org}/{db} (see webhooks.go);
	// without it those routes answer 503.
	Webhooks *webhook.Service
}

type api struct {
	Deps
	spool *spooler
}

// Routes returns the HTTP handler with every route of the API.
func Routes(d Deps) http.Handler {
	if d.WriteTimeout <= 0 {
		d.WriteTimeout = time.Minute
	}
	a := &api{Deps: d}
	var held prometheus.Gauge
	var streamed prometheus.Counter
	if d.Metrics != nil {
		held, streamed = d.Metrics.WriteSpoolBytes, d.Metrics.WriteSpoolFallbacks
	}
	a.spool = newSpooler(d.WriteSpoolDir, d.WriteSpoolBytes, d.Logger, held, streamed)
	r := chi.NewRouter()
	var sockets []string // the routes that accept WebSocket upgrades
	if d.GraphQL != nil && d.GraphQLSocket != nil {
		sockets = []string{"/api/graphql/{org}/{db}", "/api/graphql/_system"}
	}
	// Every answer forbids MIME sniffing (noSniff), whoever writes it.
	// A body where none belongs is refused before anything else answers;
	// then the CORS headers are set, so that every answer after carries
	// them; bodies are bounded before any answer that leaves one unread
	// (bodyLimits bounds how long net/http then reads it), cross-origin
	// writes refused before anything reads one.
	// A HEAD request is served as the GET of its route (its body
	// discarded), as HTTP requires of a server that serves GET.
	r.Use(middleware.GetHead, noSniff, a.recoverer, a.observe, refuseStrayBodies, d.CORS.Middleware,
		newBodyLimits(d.MaxBodyBytes, d.BodyIdleTimeout, d.BodyMinRate, d.MaxRequestBodies).Middleware,
		d.CORS.Protect, refuseUpgrades(r, sockets...), refuseIdempotencyKeys)

	r.Get("/api/ok", a.ok)
	r.Get("/healthz", a.ok)
	r.Get("/readyz", a.readyz)
	if !d.MetricsElsewhere {
		r.With(a.authorizeMetrics).Method(http.MethodGet, "/metrics", d.Metrics.Handler())
	}
	if d.GraphiQLAssets != nil {
		r.Method(http.MethodGet, "/api/graphiql/_assets/{file}", d.GraphiQLAssets)
	}
	if d.Console != nil {
		r.Get("/console", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
		})
		r.Method(http.MethodGet, "/console/*", d.Console)
	}

	// The change streams also take a stream ticket (?ticket=), for
	// browsers' EventSource, which cannot send an Authorization header;
	// every other route refuses one.
	r.With(a.authenticateStream).Get("/api/subscribe/{org}/{db}/{class}", a.subscribe)

	r.Group(func(r chi.Router) {
		r.Use(refuseTickets, a.authenticate)
		// Every route refuses a query parameter it does not take
		// (query): those that take none and call no query of their own
		// have noParams do it, before they read a body or look anything
		// up. They ignored it (TestEveryRouteRefusesUnknownQueryParameters).
		r.With(noParams).Get("/api/info", a.info)

		r.Get("/api/db", a.listDatabases)
		r.Get("/api/db/{org}/{db}", a.getDatabase)
		r.Post("/api/db/{org}/{db}", a.createDatabase)
		r.Patch("/api/db/{org}/{db}", a.patchDatabase)
		r.Delete("/api/db/{org}/{db}", a.deleteDatabase)

		r.Get("/api/schema/{org}/{db}", a.getSchema)
		r.Put("/api/schema/{org}/{db}", a.putSchema)

		r.Get("/api/document/{org}/{db}", a.getDocuments)
		r.Post("/api/document/{org}/{db}", a.insertDocuments)
		r.Put("/api/document/{org}/{db}", a.replaceDocuments)
		r.Patch("/api/document/{org}/{db}", a.patchDocument)
		r.Delete("/api/document/{org}/{db}", a.deleteDocuments)

		r.Get("/api/log/{org}/{db}", a.log)
		r.Get("/api/changes/{org}/{db}", a.changes)
		r.Get("/api/history/{org}/{db}", a.history)
		r.Get("/api/diff/{org}/{db}", a.diff)
		r.Get("/api/asyncapi/{org}/{db}", a.asyncAPI)
		r.Get("/api/admin/subscriptions", a.subscriptions)

		r.With(noParams).Get("/api/organizations", a.listOrganizations)
		r.With(noParams).Post("/api/organizations", a.createOrganization)
		r.With(noParams).Delete("/api/organizations/{name}", a.deleteOrganization)
		r.With(noParams).Get("/api/users", a.listUsers)
		r.With(noParams).Post("/api/users", a.createUser)
		r.With(noParams).Delete("/api/users/{name}", a.deleteUser)
		r.With(noParams).Put("/api/users/{name}/password", a.setPassword)
		r.Get("/api/roles/{org}/{db}", a.listRoles)
		r.With(noParams).Put("/api/roles/{org}/{db}", a.setRole)
		r.With(noParams).Get("/api/tokens", a.listTokens)
		r.With(noParams).Post("/api/tokens", a.createToken)
		r.With(noParams).Delete("/api/tokens/{id}", a.revokeToken)
		r.Post("/api/stream-tickets", a.createTicket)

		r.Get("/api/webhooks/{org}/{db}", a.listWebhooks)
		r.With(noParams).Post("/api/webhooks/{org}/{db}", a.createWebhook)
		r.Get("/api/webhooks/{org}/{db}/{id}", a.getWebhook)
		r.With(noParams).Patch("/api/webhooks/{org}/{db}/{id}", a.updateWebhook)
		r.With(noParams).Delete("/api/webhooks/{org}/{db}/{id}", a.deleteWebhook)
		r.Get("/api/webhooks/{org}/{db}/{id}/attempts", a.webhookAttempts)
		r.With(noParams).Post("/api/webhooks/{org}/{db}/{id}/pause", a.pauseWebhook)
		r.With(noParams).Post("/api/webhooks/{org}/{db}/{id}/resume", a.resumeWebhook)
		r.With(noParams).Post("/api/webhooks/{org}/{db}/{id}/replay", a.replayWebhook)
		r.With(noParams).Post("/api/webhooks/{org}/{db}/{id}/rotate-secret", a.rotateWebhookSecret)

		if d.GraphiQL != nil {
			r.Method(http.MethodGet, "/api/graphiql/{org}/{db}", d.GraphiQL)
			r.Method(http.MethodGet, "/api/graphiql/_system", d.GraphiQL)
		}
		if d.Landing != nil {
			r.Method(http.MethodGet, "/", d.Landing)
		}
	})
	if d.GraphQL != nil {
		// A GraphQL WebSocket's credentials may arrive after the upgrade,
		// in its connection_init message; a GraphQL SSE stream's may be a
		// stream ticket. A browser that opens the URL is sent to GraphiQL.
		// What is refused before the GraphQL handler runs is answered as
		// it answers what it refuses (refuse: writeGraphQLError here).
		gql := upgradeOr(d.GraphQLSocket, a.authenticateStream(d.GraphQL))
		if d.GraphiQL != nil {
			gql = toGraphiQL(gql)
		}
		// GET and POST serve queries and streams, PUT and DELETE single
		// connection mode; the router refuses the others, naming these.
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			r.Method(m, "/api/graphql/{org}/{db}", gql)
			r.Method(m, "/api/graphql/_system", gql)
		}
	}
	// A path under /api/graphql/ that is no GraphQL URL is answered as
	// the GraphQL URLs answer (refuse): a GraphQL client given a wrong
	// URL reads why.
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		refuse(w, r, errNotFoundRoute(r))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowedMethods(r, req.URL.Path))
		refuse(w, req, errMethod(req))
	})
	return r
}

// allowedMethods lists the methods routes serves at path, for the Allow
// header of a 405: HEAD wherever GET is but on the routes whose GET opens
// a stream or runs a GraphQL query (the REST change stream and the
// GraphQL URLs, whose handlers refuse HEAD with this same list), and
// OPTIONS everywhere (CORS).
func allowedMethods(routes chi.Routes, path string) string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if pattern := routes.Find(chi.NewRouteContext(), m, path); pattern != "" {
			out = append(out, m)
			if m == http.MethodGet && !noHead(pattern) {
				out = append(out, http.MethodHead)
			}
		}
	}
	return strings.Join(append(out, http.MethodOptions), ", ")
}

// noHead reports whether the route of pattern refuses HEAD.
func noHead(pattern string) bool {
	switch pattern {
	case "/api/subscribe/{org}/{db}/{class}", "/api/graphql/{org}/{db}", "/api/graphql/_system":
		return true
	}
	return false
}

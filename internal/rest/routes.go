// Package rest serves Sluice's HTTP API. Routes declares every route in one
// place; handlers decode the request, call the engine and map its errors.
package rest

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/metrics"
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
	// BodyIdleTimeout, when not zero, fails a document write whose body
	// sends nothing for that long.
	BodyIdleTimeout time.Duration
	// PageBytes bounds a page of /api/changes and /api/log in bytes of
	// change images and commit text (history_page_bytes).
	PageBytes int64
	// GraphQL, when set, serves /api/graphql/{org}/{db} and /api/graphql/_system.
	GraphQL http.Handler
	// GraphiQL, when set, serves /api/graphiql/{org}/{db}.
	GraphiQL http.Handler
	// Stream serves the change streams (see subscribe.go).
	Stream StreamDeps
}

type api struct {
	Deps
}

// Routes returns the HTTP handler with every route of the API.
func Routes(d Deps) http.Handler {
	a := &api{Deps: d}
	r := chi.NewRouter()
	r.Use(a.recoverer, a.observe)

	r.Get("/api/ok", a.ok)
	r.Get("/healthz", a.ok)
	r.Get("/readyz", a.readyz)
	r.Method(http.MethodGet, "/metrics", d.Metrics.Handler())

	r.Group(func(r chi.Router) {
		r.Use(a.authenticate)
		r.Get("/api/info", a.info)

		r.Get("/api/db", a.listDatabases)
		r.Get("/api/db/{org}/{db}", a.getDatabase)
		r.Post("/api/db/{org}/{db}", a.createDatabase)
		r.Delete("/api/db/{org}/{db}", a.deleteDatabase)

		r.Get("/api/schema/{org}/{db}", a.getSchema)
		r.Put("/api/schema/{org}/{db}", a.putSchema)

		r.Get("/api/document/{org}/{db}", a.getDocuments)
		r.Post("/api/document/{org}/{db}", a.insertDocuments)
		r.Put("/api/document/{org}/{db}", a.replaceDocuments)
		r.Delete("/api/document/{org}/{db}", a.deleteDocuments)

		r.Get("/api/log/{org}/{db}", a.log)
		r.Get("/api/changes/{org}/{db}", a.changes)
		r.Get("/api/asyncapi/{org}/{db}", a.asyncAPI)
		r.Get("/api/admin/subscriptions", a.subscriptions)
		r.HandleFunc("/api/subscribe/{org}/{db}/{class}", a.subscribe)

		r.Get("/api/organizations", a.listOrganizations)
		r.Post("/api/organizations", a.createOrganization)
		r.Get("/api/users", a.listUsers)
		r.Post("/api/users", a.createUser)
		r.Put("/api/roles/{org}/{db}", a.setRole)
		r.Get("/api/tokens", a.listTokens)
		r.Post("/api/tokens", a.createToken)
		r.Delete("/api/tokens/{id}", a.revokeToken)

		if d.GraphQL != nil {
			r.Handle("/api/graphql/{org}/{db}", d.GraphQL)
			r.Handle("/api/graphql/_system", d.GraphQL)
		}
		if d.GraphiQL != nil {
			r.Handle("/api/graphiql/{org}/{db}", d.GraphiQL)
		}
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errNotFoundRoute(r))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errMethod(r))
	})
	return r
}

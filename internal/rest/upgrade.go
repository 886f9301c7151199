package rest

import (
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/protocol"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// What counts as a WebSocket upgrade is protocol.Of's to say, as for every
// other protocol of a request (internal/protocol, a leaf package, so that
// this router does not import the GraphQL packages it routes to).

// refuseUpgrades answers a WebSocket upgrade with a 400 naming where
// WebSockets are served, unless it is for one of the route patterns
// accept (the GraphQL URLs when graphql-ws is served): any other route
// would answer it as a plain request (an event stream, say), which a
// WebSocket client reports only as a failed handshake. The 400 has the
// shape of the request's URL (refuse).
func refuseUpgrades(mux chi.Routes, accept ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if protocol.Of(r) == protocol.WebSocket {
				rctx := chi.NewRouteContext()
				if !mux.Match(rctx, r.Method, r.URL.Path) || !slices.Contains(accept, rctx.RoutePattern()) {
					refuse(w, r, sluice.Errorf(sluice.CodeInvalid, "%s does not accept WebSocket upgrades: GraphQL over WebSocket (graphql-transport-ws) is served at /api/graphql/{org}/{db} and /api/graphql/_system", r.URL.Path))
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// upgradeOr sends WebSocket upgrades to socket (which authenticates by
// itself: a browser's credentials arrive after the upgrade) and every
// other request to plain. A stream ticket is refused on an upgrade: it
// opens an EventSource only, and a socket takes its credentials in
// connection_init. It serves the GraphQL URLs only: what it refuses is
// answered in GraphQL's shape (refuse), as the socket handler answers the
// upgrades it refuses.
func upgradeOr(socket, plain http.Handler) http.Handler {
	if socket == nil {
		return plain
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if protocol.Of(r) == protocol.WebSocket {
			q, err := streamparam.Query(r)
			if err != nil {
				refuse(w, r, err)
				return
			}
			if q.Has(ticketParam) {
				refuse(w, r, errTicketNotStream())
				return
			}
			// A socket's operations carry no key of their own, so a
			// key on its upgrade would be ignored, letting a client
			// believe its retried mutations safe (as
			// refuseIdempotencyKeys says of other requests).
			if r.Header.Get("Idempotency-Key") != "" {
				refuse(w, r, sluice.Errorf(sluice.CodeInvalid, "Idempotency-Key is honoured by a GraphQL mutation sent as an HTTP request of its own (POST); a graphql-ws socket carries many operations and takes none"))
				return
			}
			socket.ServeHTTP(w, r)
			return
		}
		plain.ServeHTTP(w, r)
	})
}

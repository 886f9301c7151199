package rest

import (
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// refuseUpgrades answers a WebSocket upgrade with a 400 naming where
// WebSockets are served, unless it is for one of the route patterns
// accept (the GraphQL URLs when graphql-ws is served): any other route
// would answer it as a plain request (an event stream, say), which a
// WebSocket client reports only as a failed handshake.
func refuseUpgrades(mux chi.Routes, accept ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isUpgrade(r) {
				rctx := chi.NewRouteContext()
				if !mux.Match(rctx, r.Method, r.URL.Path) || !slices.Contains(accept, rctx.RoutePattern()) {
					writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "%s does not accept WebSocket upgrades: GraphQL over WebSocket (graphql-transport-ws) is served at /api/graphql/{org}/{db} and /api/graphql/_system", r.URL.Path))
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
// connection_init.
func upgradeOr(socket, plain http.Handler) http.Handler {
	if socket == nil {
		return plain
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isUpgrade(r) {
			if streamparam.Query(r).Has(ticketParam) {
				writeError(w, r, errTicketNotStream())
				return
			}
			socket.ServeHTTP(w, r)
			return
		}
		plain.ServeHTTP(w, r)
	})
}

// isUpgrade reports whether r asks to upgrade to a WebSocket.
func isUpgrade(r *http.Request) bool {
	return hasToken(r.Header.Values("Connection"), "upgrade") && hasToken(r.Header.Values("Upgrade"), "websocket")
}

func hasToken(values []string, token string) bool {
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Package protocol decides which protocol a request speaks: a WebSocket
// upgrade, graphql-sse single connection mode, an event stream (SSE, NDJSON, Apollo's multipart), or a
// plain HTTP request. Of is the one place that decides it: the REST router
// asks it whether a request is a WebSocket upgrade (rest/upgrade.go), and
// the GraphQL streaming transport whether it claims a request and how it
// serves it (gqltransport/transport.go); the GraphQL-over-HTTP transport
// (graph.HTTPTransport) takes what Of calls HTTP.
//
// It is a leaf package (the standard library only) so that internal/rest,
// graph and internal/gqltransport all import it and none of them imports
// another for it: the router stays independent of the GraphQL layers it
// routes to, which reach it as http.Handlers.
package protocol

import (
	"net/http"
	"strings"
)

// Kind is the protocol of a request.
type Kind int

const (
	// HTTP is a plain request and response: GraphQL over HTTP (JSON), or
	// any REST request. It is what no other rule claims.
	HTTP Kind = iota
	// WebSocket is an upgrade to a WebSocket: Connection names upgrade and
	// Upgrade names websocket, whatever the method, URL or other headers.
	// On the GraphQL URLs the graphql-ws socket handler serves it; every
	// other route refuses it.
	WebSocket
	// SingleConnection is a request of graphql-sse single connection mode:
	// PUT reserves a stream, DELETE stops an operation, and any request
	// carrying a stream token (StreamToken) opens the stream or runs an
	// operation on it.
	SingleConnection
	// SSE, NDJSON and Multipart are the event streams of graphql-sse's
	// distinct connections mode (text/event-stream, application/x-ndjson)
	// and Apollo's multipart subscriptions: a GET or POST whose Accept
	// header prefers their media type.
	SSE
	NDJSON
	Multipart
)

// GraphQLAllow is the Allow header of a 405 of a GraphQL URL, whichever
// layer refuses the method: GET and POST (queries, mutations, event
// streams), PUT and DELETE (single connection mode), OPTIONS (CORS). HEAD
// is not served: a GraphQL GET runs a query or opens a stream.
const GraphQLAllow = "GET, POST, PUT, DELETE, OPTIONS"

// The media types of the event streams.
const (
	MediaSSE    = "text/event-stream"
	MediaNDJSON = "application/x-ndjson"
	// MediaMultipart is Apollo's multipart subscriptions (any
	// multipart/mixed Accept: Apollo sends
	// multipart/mixed;boundary=graphql;subscriptionSpec=1.0).
	MediaMultipart = "multipart/mixed"
)

// TokenHeader carries a single connection mode stream token.
const TokenHeader = "X-Graphql-Event-Stream-Token"

// Of returns the protocol of r. The rules apply in this order, the first
// that matches deciding: a WebSocket upgrade, single connection mode
// (PUT, DELETE, a stream token), then for GET and POST the event stream
// the Accept header prefers (negotiate); anything else is HTTP. Only the
// first means anything outside the GraphQL URLs.
func Of(r *http.Request) Kind {
	switch {
	case hasToken(r.Header.Values("Connection"), "upgrade") && hasToken(r.Header.Values("Upgrade"), "websocket"):
		return WebSocket
	case r.Method == http.MethodPut || r.Method == http.MethodDelete || StreamToken(r) != "":
		return SingleConnection
	case r.Method != http.MethodGet && r.Method != http.MethodPost:
		return HTTP
	}
	return negotiate(AcceptHeader(r.Header))
}

// StreamToken returns the single connection mode stream token of r: the
// TokenHeader header, or ?token= (for EventSource, which cannot set
// headers); "" when it has none.
func StreamToken(r *http.Request) string {
	if t := r.Header.Get(TokenHeader); t != "" {
		return t
	}
	if !strings.Contains(r.URL.RawQuery, "token=") { // most requests: no query to parse
		return ""
	}
	return r.URL.Query().Get("token")
}

// hasToken reports whether one of the comma-separated lists values holds
// token, compared case-insensitively (Connection: keep-alive, Upgrade).
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// negotiate returns the event stream the Accept header prefers, or HTTP
// when it prefers a plain JSON response (or accepts nothing we serve), as
// Negotiate decides: media ranges (text/* takes SSE), q-values, the first
// of equals, and at equal quality a JSON response before a stream (*/*,
// application/*).
func negotiate(accept string) Kind {
	if accept == "" { // most REST requests: nothing to parse
		return HTTP
	}
	switch m, _ := Negotiate(accept, "application/json", "application/graphql-response+json", MediaSSE, MediaNDJSON, MediaMultipart); m {
	case MediaSSE:
		return SSE
	case MediaNDJSON:
		return NDJSON
	case MediaMultipart:
		return Multipart
	}
	return HTTP
}

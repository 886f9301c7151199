package rest

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/protocol"
)

// graphQLPrefix starts the path of every GraphQL URL (/api/graphql/{org}/{db},
// /api/graphql/_system). GraphiQL's pages (/api/graphiql/…) are HTML
// pages, not GraphQL URLs: their refusals are REST's.
const graphQLPrefix = "/api/graphql/"

// refuse answers a request refused with err in the shape of its URL, from
// its path alone: GraphQL's (writeGraphQLError) on the GraphQL URLs,
// REST's (writeError) on every other route. Every refusal made before a
// handler answers (a body where none belongs, a body over max_body_bytes,
// a cross-site write, authentication, no such route or method) is
// answered by it, whichever middleware refuses, so that a client sees the
// errors of its URL one way: a GraphQL client reads
// errors[].extensions.code, never a REST body. The path decides, not the
// route: most of the middleware runs before the router matches one.
func refuse(w http.ResponseWriter, r *http.Request, err error) {
	if strings.HasPrefix(r.URL.Path, graphQLPrefix) {
		writeGraphQLError(w, r, err)
		return
	}
	writeError(w, r, err)
}

// graphQLErrorBody is a GraphQL response of errors and no data.
type graphQLErrorBody struct {
	Errors []graphQLError `json:"errors"`
}

type graphQLError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// writeGraphQLError answers a request to a GraphQL URL refused before it
// runs, as the GraphQL handler answers the ones it refuses (graph's
// writeRequestError: no access, no such database): the status of err's
// code, a body {"errors":[…]} whose error carries the code a refused
// request has in extensions.code (sluice.Code.RefusedGraphQLCode), in
// the media type GraphQL over HTTP gives it: application/graphql-response+json
// when the Accept header prefers it, application/json otherwise (an
// event stream's Accept too: a refused stream has no stream to carry an
// error). The headers are a REST answer's (errorHeaders), and err is
// logged as writeError logs it. The router does not import the GraphQL
// packages (see internal/protocol), so the few lines of the shape are
// written here.
func writeGraphQLError(w http.ResponseWriter, r *http.Request, err error) {
	sh := sluice.Show(err)
	logError(r, sh, "request failed", err)
	writeGraphQLShown(w, r, sh)
}

// refuseBody answers err in the shape of r's URL, as refuse does, without
// logging it: the recoverer logs a panic its own way.
func refuseBody(w http.ResponseWriter, r *http.Request, err error) {
	if strings.HasPrefix(r.URL.Path, graphQLPrefix) {
		writeGraphQLShown(w, r, sluice.Show(err))
		return
	}
	writeErrorBody(w, err)
}

// writeGraphQLShown answers with the status, headers and GraphQL body of
// an error as sh shows it (see writeGraphQLError).
func writeGraphQLShown(w http.ResponseWriter, r *http.Request, sh sluice.Shown) {
	errorHeaders(w, sh)
	media, ok := protocol.Negotiate(protocol.AcceptHeader(r.Header), "application/json", "application/graphql-response+json")
	if !ok {
		media = "application/json"
	}
	b, _ := json.Marshal(graphQLErrorBody{Errors: []graphQLError{{
		Message:    sh.Message,
		Extensions: sh.GraphQLExtensions(sh.Code.RefusedGraphQLCode()),
	}}})
	w.Header().Set("Content-Type", media+"; charset=utf-8")
	w.WriteHeader(sh.Code.HTTPStatus())
	// A final newline, as every JSON answer of Sluice's has.
	_, _ = w.Write(append(b, '\n'))
}

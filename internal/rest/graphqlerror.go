package rest

import (
	"encoding/json"
	"net/http"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/protocol"
)

// errorWriter answers a request refused with err: writeError in the REST
// shape, writeGraphQLError in GraphQL's. The middleware that refuses
// requests on both kinds of route (authentication) is given the one of
// its route, so that a client sees an error the same way whatever
// refuses it.
type errorWriter func(w http.ResponseWriter, r *http.Request, err error)

// graphQLErrorBody is a GraphQL response of errors and no data.
type graphQLErrorBody struct {
	Errors []graphQLError `json:"errors"`
}

type graphQLError struct {
	Message    string            `json:"message"`
	Extensions map[string]string `json:"extensions"`
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
	errorHeaders(w, sh)
	media, ok := protocol.Negotiate(protocol.AcceptHeader(r.Header), "application/json", "application/graphql-response+json")
	if !ok {
		media = "application/json"
	}
	b, _ := json.Marshal(graphQLErrorBody{Errors: []graphQLError{{
		Message:    sh.Message,
		Extensions: map[string]string{"code": sh.Code.RefusedGraphQLCode()},
	}}})
	w.Header().Set("Content-Type", media+"; charset=utf-8")
	w.WriteHeader(sh.Code.HTTPStatus())
	// A final newline, as every JSON answer of Sluice's has.
	_, _ = w.Write(append(b, '\n'))
}

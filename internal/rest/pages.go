package rest

import (
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/internal/protocol"
)

// toGraphiQL sends a browser that opens a GraphQL URL (a GET asking for
// HTML, with no query) to the database's GraphiQL page, with 303 See
// Other; every other request goes to next. A GraphQL client never asks
// for HTML: it accepts JSON (GraphQL over HTTP) or an event stream.
func toGraphiQL(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && !r.URL.Query().Has("query") && protocol.Of(r) == protocol.HTTP && wantsHTML(protocol.AcceptHeader(r.Header)) {
			http.Redirect(w, r, "/api/graphiql/"+strings.TrimPrefix(r.URL.Path, "/api/graphql/"), http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// wantsHTML reports whether an Accept header takes HTML and neither of
// GraphQL's JSON media types: what a browser sends when it opens a page.
func wantsHTML(accept string) bool {
	html := false
	for _, mr := range protocol.MediaRanges(accept) {
		switch mr.Type {
		case "text/html":
			html = mr.Q > 0
		case "application/json", "application/graphql-response+json":
			if mr.Q > 0 {
				return false
			}
		}
	}
	return html
}

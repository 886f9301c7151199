package rest

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// RouteTable lists the method and pattern of every route Routes serves
// without the optional handlers (GraphQL, GraphiQL, the console, the
// landing page, /metrics), for the tests that go through all of them
// on a daemon (rest_test cannot reach the router it builds).
func RouteTable() ([][2]string, error) {
	h := Routes(Deps{CORS: NewCORS(nil), MetricsElsewhere: true})
	var out [][2]string
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, [2]string{method, route})
		return nil
	})
	return out, err
}

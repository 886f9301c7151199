package graph_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/auth"
)

// schemaReads counts the reads of a database's schema for GraphQL, each
// of which the handler follows by finding or building its server.
type schemaReads struct {
	graph.Store
	n atomic.Int64
}

func (s *schemaReads) GraphQLDatabase(ctx context.Context, u *sluice.User, org, name string) (*sluice.Database, *sluice.Schema, sluice.Role, error) {
	s.n.Add(1)
	return s.Store.GraphQLDatabase(ctx, u, org, name)
}

// TestRefusedRequestsBuildNoServer: a plain HTTP request that its
// headers refuse (a POST that is not application/json, one longer than
// the body bound, a method other than GET and POST (PUT and DELETE are streams), an Accept allowing
// neither response media) is answered without reading the database's
// schema, so without building its GraphQL server, which may take a
// second; a request that passes reads it. The server was built first.
func TestRefusedRequestsBuildNoServer(t *testing.T) {
	t.Parallel()
	var reads *schemaReads
	st := newStackWith(t, testSDL, graph.Options{MaxBodyBytes: 1000}, func(s graph.Store) graph.Store {
		reads = &schemaReads{Store: s}
		return reads
	})
	body := `{"query":"{ Person { _id } }"}`
	for _, c := range []struct {
		name, method, contentType, accept, body string
		want                                    int
	}{
		{"text/plain", http.MethodPost, "text/plain", "", body, http.StatusUnsupportedMediaType},
		{"no Content-Type", http.MethodPost, "", "", body, http.StatusUnsupportedMediaType},
		{"Latin-1", http.MethodPost, "application/json; charset=latin1", "", body, http.StatusUnsupportedMediaType},
		{"too long", http.MethodPost, "application/json", "", strings.Repeat(" ", 1001), http.StatusRequestEntityTooLarge},
		{"PATCH", http.MethodPatch, "application/json", "", body, http.StatusMethodNotAllowed},
		{"Accept: text/html", http.MethodPost, "application/json", "text/html", body, http.StatusNotAcceptable},
		{"served", http.MethodPost, "application/json", "", body, http.StatusOK},
	} {
		req := httptest.NewRequest(c.method, "/api/graphql/"+st.db, strings.NewReader(c.body))
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		if c.accept != "" {
			req.Header.Set("Accept", c.accept)
		}
		req = req.WithContext(auth.WithUser(context.Background(), st.admin))
		rec := httptest.NewRecorder()
		before := reads.n.Load()
		st.router.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: status %d, want %d: %s", c.name, rec.Code, c.want, rec.Body)
		}
		if read := reads.n.Load() > before; read != (c.want == http.StatusOK) {
			t.Errorf("%s: the schema read (and its server built): %v", c.name, read)
		}
	}
}

// TestSubscriptionOverPlainHTTP: a subscription sent as a plain request
// is a request error, answered without data: 400 with the GraphQL
// response media type (it was 200 with "data": null), 200 with
// application/json, as GraphQL over HTTP asks of each. The message names
// every Accept that streams, NDJSON's too (it was left out).
func TestSubscriptionOverPlainHTTP(t *testing.T) {
	t.Parallel()
	st := newStack(t, "type P { n: String }")
	for acc, want := range map[string]int{"application/graphql-response+json": 400, "application/json": 200} {
		req := httptest.NewRequest(http.MethodPost, "/api/graphql/admin/db", strings.NewReader(`{"query":"subscription { P { n } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", acc)
		rec := httptest.NewRecorder()
		st.router.ServeHTTP(rec, req.WithContext(auth.WithUser(req.Context(), st.admin)))
		b := rec.Body.String()
		if rec.Code != want || strings.Contains(b, `"data"`) || !strings.Contains(b, "subscriptions need Accept: text/event-stream or application/x-ndjson (graphql-sse), Accept: multipart/mixed") {
			t.Errorf("Accept %s: %d %s, want %d without data", acc, rec.Code, b, want)
		}
	}
}

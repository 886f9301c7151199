package graph_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/auth"
)

// TestRequestParamsBudget: a plain request whose parameters would take
// more than what is left of graphql_request_bytes is answered 503 with
// Retry-After, naming the setting, before it runs; a small one runs.
func TestRequestParamsBudget(t *testing.T) {
	t.Parallel()
	st := newStackWith(t, testSDL, graph.Options{RequestBytes: 3000}, nil)
	send := func(vars map[string]any) *httptest.ResponseRecorder {
		body, _ := json.Marshal(map[string]any{"query": `query($ids: [ID!]) { Person(ids: $ids) { name } }`, "variables": vars})
		req := httptest.NewRequest(http.MethodPost, "/api/graphql/"+st.db, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(auth.WithUser(req.Context(), st.admin))
		rec := httptest.NewRecorder()
		st.router.ServeHTTP(rec, req)
		return rec
	}
	if rec := send(map[string]any{"ids": []string{"Person/a"}}); rec.Code != 200 {
		t.Fatalf("a small request: %d %s", rec.Code, rec.Body)
	}
	ids := make([]string, 50) // 50 values: 4,000 bytes and more as charged
	for i := range ids {
		ids[i] = "Person/a"
	}
	rec := send(map[string]any{"ids": ids})
	b, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || !strings.Contains(string(b), "graphql_request_bytes") {
		t.Fatalf("a request past the budget: %d %s (Retry-After %q)", rec.Code, b, rec.Header().Get("Retry-After"))
	}
}

package graph_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/auth"
)

// TestAutomaticPersistedQueries: a request may name its query by hash
// alone (Apollo's persisted queries): PERSISTED_QUERY_NOT_FOUND until the
// text has been sent with its hash, then the query runs, over POST and
// GET. A request with neither is still refused for its missing query.
func TestAutomaticPersistedQueries(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	st.insert(t, `[{"@type":"Person","@id":"alice","name":"Alice"}]`)
	const query = `{ Person { name } }`
	sum := sha256.Sum256([]byte(query))
	ext := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}
	send := func(req *http.Request) (int, string) {
		t.Helper()
		req = req.WithContext(auth.WithUser(req.Context(), st.admin))
		rec := httptest.NewRecorder()
		st.router.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, strings.TrimSpace(string(b))
	}
	post := func(params map[string]any) (int, string) {
		body, _ := json.Marshal(params)
		req := httptest.NewRequest(http.MethodPost, "/api/graphql/"+st.db, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		return send(req)
	}
	get := func() (int, string) {
		e, _ := json.Marshal(ext)
		return send(httptest.NewRequest(http.MethodGet, "/api/graphql/"+st.db+"?extensions="+url.QueryEscape(string(e))+"&variables=null", nil))
	}
	const data = `"data":{"Person":[{"name":"Alice"}]}`
	if code, body := post(map[string]any{"extensions": ext}); !strings.Contains(body, "PERSISTED_QUERY_NOT_FOUND") {
		t.Fatalf("the hash alone, before the text: %d %s", code, body)
	}
	if code, body := post(map[string]any{"query": query, "extensions": ext}); code != 200 || !strings.Contains(body, data) {
		t.Fatalf("the text and its hash: %d %s", code, body)
	}
	if code, body := post(map[string]any{"extensions": ext}); code != 200 || !strings.Contains(body, data) {
		t.Errorf("the hash alone, over POST: %d %s", code, body)
	}
	if code, body := get(); code != 200 || !strings.Contains(body, data) {
		t.Errorf("the hash alone, over GET: %d %s", code, body)
	}
	if code, body := post(map[string]any{"variables": map[string]any{}}); code != 400 || !strings.Contains(body, "the query parameter is missing") {
		t.Errorf("neither a query nor a hash: %d %s", code, body)
	}
}

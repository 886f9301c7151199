package rest

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A handler's panic is answered 500 in its URL's shape: GraphQL's on a
// GraphQL URL (a client there reads errors[].extensions.code), REST's
// elsewhere.
func TestPanicAnsweredInTheShapeOfItsURL(t *testing.T) {
	a := &api{Deps: Deps{Logger: slog.New(slog.DiscardHandler)}}
	h := a.recoverer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	for _, tc := range []struct {
		path, accept, media string
		graphQL             bool
	}{
		{"/api/graphql/alice/people", "application/graphql-response+json", "application/graphql-response+json", true},
		{"/api/graphql/alice/people", "", "application/json", true},
		{"/api/db/alice/people", "", "application/json", false},
	} {
		req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader("{}"))
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusInternalServerError {
			t.Fatalf("%s: status %d, want 500", tc.path, rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.media) {
			t.Errorf("%s (Accept %q): Content-Type %q, want %s", tc.path, tc.accept, ct, tc.media)
		}
		var body struct {
			Errors []struct {
				Extensions map[string]string `json:"extensions"`
			} `json:"errors"`
			Status string `json:"api:status"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: body %q: %v", tc.path, rec.Body, err)
		}
		if tc.graphQL {
			if len(body.Errors) != 1 || body.Errors[0].Extensions["code"] == "" {
				t.Errorf("%s: body %s, want one GraphQL error with extensions.code", tc.path, rec.Body)
			}
		} else if body.Errors != nil || body.Status == "" {
			t.Errorf("%s: body %s, want REST's error", tc.path, rec.Body)
		}
	}
}

package graph_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/auth"
)

// TestOperationNameErrors: a document of several operations without an
// operationName, or with one naming none of them, is refused saying what
// to do and naming the document's operations. gqlgen said "operation  not
// found", naming nothing.
func TestOperationNameErrors(t *testing.T) {
	t.Parallel()
	st := newStack(t, testSDL)
	const doc = `query A { Person { name } } query B { Person { age } }`
	for _, c := range []struct{ name, want string }{
		{"", "the document holds 2 operations (A, B): name the one to run in operationName"},
		{"C", `operationName "C" names none of the document's operations (A, B)`},
	} {
		body, _ := json.Marshal(map[string]any{"query": doc, "operationName": c.name})
		req := httptest.NewRequest(http.MethodPost, "/api/graphql/"+st.db, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(auth.WithUser(req.Context(), st.admin))
		rec := httptest.NewRecorder()
		st.router.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		var res gqlResult
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("%d %s: %v", rec.Code, b, err)
		}
		if len(res.Errors) != 1 || res.Errors[0].Message != c.want {
			t.Errorf("operationName %q: %d %s, want %q", c.name, rec.Code, b, c.want)
		}
	}
}

package graph_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/daemontest"
)

// fragmentBomb is the document of nested fragment spreads the outside
// tester sent: each of levels fragments spreads the next one twice.
func fragmentBomb(levels int) string {
	var b strings.Builder
	b.WriteString("{ Person { ...F0 } }\n")
	for i := range levels {
		fmt.Fprintf(&b, "fragment F%d on Person { _id ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Person { _id }\n", levels)
	return b.String()
}

// TestFragmentBombRefusedOnEveryTransport sends the 30-level fragment bomb
// (before the limits, 24 levels took 15 s of CPU and 30 did not finish in
// 10 minutes) over GraphQL over HTTP and over the event-stream transport:
// each refuses it with the fields limit before validating it.
func TestFragmentBombRefusedOnEveryTransport(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "bomb", testSDL)
	path := "/api/graphql/admin/bomb"
	q := fragmentBomb(30)
	const want = `{"message":"the query selects 2147483648 fields once its fragments are expanded, more than 1000 (limit graphql_max_fields)","extensions":{"code":"GRAPHQL_VALIDATION_FAILED","limit":"graphql_max_fields"}}`
	body, _ := json.Marshal(map[string]any{"query": q})
	for _, c := range []struct {
		name, method, path, accept string
		body                       any
		status                     int
		has                        []string
	}{
		{"POST json", http.MethodPost, path, "application/json", body, 200, []string{`{"errors":[` + want + `]}`}},
		{"POST graphql-response", http.MethodPost, path, "application/graphql-response+json", body, 400, []string{`{"errors":[` + want + `]}`}},
		{"GET", http.MethodGet, path + "?query=" + url.QueryEscape(q), "", nil, 200, []string{`{"errors":[` + want + `]}`}},
		{"SSE", http.MethodPost, path, "text/event-stream", body, 200, []string{"event: next\ndata: {\"errors\":[" + want + "]}\n", "event: complete\n"}},
		{"NDJSON", http.MethodPost, path, "application/x-ndjson", body, 200, []string{"{\"errors\":[" + want + "]}\n"}},
	} {
		h := []string{"Content-Type", "application/json"}
		if c.accept != "" {
			h = append(h, "Accept", c.accept)
		}
		r := d.Do(t, daemontest.Admin(), c.method, c.path, c.body, h...)
		if r.Status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, r.Status, c.status, r.Body)
		}
		for _, s := range c.has {
			if !strings.Contains(string(r.Body), s) {
				t.Errorf("%s: got %s\nwant it to contain %s", c.name, r.Body, s)
			}
		}
	}
}

// TestIntrospectionWithDefaultLimits runs introspection as graphql-js and
// GraphiQL send it against the default limits.
func TestIntrospectionWithDefaultLimits(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "intro", testSDL)
	files, _ := filepath.Glob("testdata/introspection.*.graphql")
	if len(files) < 2 {
		t.Fatalf("want the introspection queries in testdata, found %v", files)
	}
	for _, f := range files {
		q, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res := gql(t, d, "/api/graphql/admin/intro", string(q), nil)
		if len(res.Errors) > 0 || !strings.Contains(string(res.Data), `"name":"Person"`) {
			t.Errorf("%s: %.500s", f, res.raw)
		}
	}
}

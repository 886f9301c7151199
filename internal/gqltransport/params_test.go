package gqltransport_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// A URL parameter given twice is refused with a 400 naming it, by every
// GraphQL stream transport that reads URL parameters, as by the REST
// change stream: none takes the first and ignores the second (a
// heartbeat of 5s given with junk, a resume from a position given with
// another).
func TestRepeatedStreamParametersAreRefused(t *testing.T) {
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	path := "/api/graphql/admin/zoo"
	q := url.QueryEscape(`subscription { Dog_added { name } }`)
	tok, stop := reserve(t, d, dt.Admin(), "zoo"), reserve(t, d, dt.Admin(), "zoo")
	for _, c := range []struct {
		name, method, target, param string
		header                      []string
	}{
		{"SSE heartbeat", http.MethodGet, "?heartbeat=5s&heartbeat=junk&query=" + q, "heartbeat", []string{"Accept", sse}},
		{"SSE lastEventId", http.MethodGet, "?lastEventId=ep-0-0&lastEventId=junk&query=" + q, "lastEventId", []string{"Accept", sse}},
		{"SSE connected", http.MethodGet, "?connected=true&connected=junk&query=" + q, "connected", []string{"Accept", sse}},
		{"SSE query", http.MethodGet, "?query=" + q + "&query=" + url.QueryEscape(`subscription { Cat_added { name } }`), "query", []string{"Accept", sse}},
		{"NDJSON heartbeat", http.MethodGet, "?heartbeat=5s&heartbeat=10s&query=" + q, "heartbeat", []string{"Accept", ndjson}},
		{"single connection heartbeat", http.MethodGet, "?heartbeat=5s&heartbeat=junk&token=" + tok, "heartbeat", []string{"Accept", sse}},
		{"single connection stop", http.MethodDelete, "?operationId=a&operationId=b", "operationId", []string{"X-GraphQL-Event-Stream-Token", stop}},
	} {
		st, resp := d.OpenStream(t, dt.Admin(), dt.StreamRequest{Method: c.method, Path: path + c.target, Header: c.header})
		if st != nil {
			st.Close()
			t.Errorf("%s: answered 200, want 400 naming %s", c.name, c.param)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		want := `query parameter "` + c.param + `" is given 2 times`
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || len(e.Errors) != 1 ||
			e.Errors[0].Message != want || e.Errors[0].Extensions["code"] != "BAD_REQUEST" {
			t.Errorf("%s: %d %s, want 400 %q", c.name, resp.StatusCode, b, want)
		}
	}
}

package protocol

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestOf is the table of requests and their protocols: every rule of Of,
// and the order in which the rules apply.
func TestOf(t *testing.T) {
	type header = []string // name, value, name, value…
	tests := []struct {
		name   string
		method string
		target string
		header header
		want   Kind
	}{
		{"no Accept", "GET", "/", nil, HTTP},
		{"JSON", "POST", "/", header{"Accept", "application/json"}, HTTP},
		{"GraphQL response", "POST", "/", header{"Accept", "application/graphql-response+json"}, HTTP},
		{"any", "GET", "/", header{"Accept", "*/*"}, HTTP},
		{"nothing we serve", "GET", "/", header{"Accept", "text/html"}, HTTP},
		{"unparseable", "GET", "/", header{"Accept", ";;;"}, HTTP},

		{"SSE", "GET", "/", header{"Accept", "text/event-stream"}, SSE},
		{"SSE by POST", "POST", "/", header{"Accept", "text/event-stream"}, SSE},
		{"NDJSON", "GET", "/", header{"Accept", "application/x-ndjson"}, NDJSON},
		{"Apollo multipart", "POST", "/", header{"Accept", "multipart/mixed;boundary=graphql;subscriptionSpec=1.0, application/json"}, Multipart},
		{"unknown types skipped", "GET", "/", header{"Accept", "text/html, text/event-stream"}, SSE},
		{"two Accept headers: the first", "GET", "/", header{"Accept", "text/event-stream", "Accept", "application/json"}, SSE},

		// Accept negotiation: the highest q wins, the first of equals.
		{"JSON preferred", "GET", "/", header{"Accept", "application/json, text/event-stream;q=0.5"}, HTTP},
		{"SSE preferred", "GET", "/", header{"Accept", "application/json;q=0.4, text/event-stream;q=0.5"}, SSE},
		{"equal q: the first", "GET", "/", header{"Accept", "application/x-ndjson, text/event-stream"}, NDJSON},
		{"equal q: JSON first", "GET", "/", header{"Accept", "*/*;q=0.8, text/event-stream;q=0.8"}, HTTP},
		{"q=0 refuses", "GET", "/", header{"Accept", "text/event-stream;q=0"}, HTTP},
		{"unparseable q counts as 1", "GET", "/", header{"Accept", "application/json;q=0.9, text/event-stream;q=x"}, SSE},

		// Streams are GET and POST only: other methods are plain HTTP
		// (answered 405 by the GraphQL-over-HTTP transport).
		{"PATCH", "PATCH", "/", header{"Accept", "text/event-stream"}, HTTP},
		{"HEAD", "HEAD", "/", header{"Accept", "text/event-stream"}, HTTP},

		// Single connection mode: PUT, DELETE, or a stream token.
		{"PUT reserves", "PUT", "/", nil, SingleConnection},
		{"DELETE stops", "DELETE", "/?operationId=a", nil, SingleConnection},
		{"token header", "POST", "/", header{"X-GraphQL-Event-Stream-Token", "t"}, SingleConnection},
		{"token header with SSE", "GET", "/", header{"Accept", "text/event-stream", "X-GraphQL-Event-Stream-Token", "t"}, SingleConnection},
		{"token parameter", "GET", "/?token=t", header{"Accept", "text/event-stream"}, SingleConnection},
		{"empty token", "GET", "/?token=", header{"Accept", "text/event-stream"}, SSE},
		{"another parameter ending in token", "GET", "/?mytoken=t", header{"Accept", "text/event-stream"}, SSE},
		{"stream ticket is no token", "GET", "/?ticket=t", header{"Accept", "text/event-stream"}, SSE},

		// WebSocket upgrades, whatever else the request says.
		{"upgrade", "GET", "/", header{"Connection", "Upgrade", "Upgrade", "websocket"}, WebSocket},
		{"upgrade in lists, any case", "GET", "/", header{"Connection", "keep-alive, UPGRADE", "Upgrade", "h2c, WebSocket"}, WebSocket},
		{"upgrade in a second header", "GET", "/", header{"Connection", "keep-alive", "Connection", "upgrade", "Upgrade", "websocket"}, WebSocket},
		{"upgrade before a token", "GET", "/?token=t", header{"Connection", "Upgrade", "Upgrade", "websocket"}, WebSocket},
		{"upgrade before SSE", "GET", "/", header{"Connection", "Upgrade", "Upgrade", "websocket", "Accept", "text/event-stream"}, WebSocket},
		{"upgrade by PUT", "PUT", "/", header{"Connection", "Upgrade", "Upgrade", "websocket"}, WebSocket},
		{"Upgrade without Connection", "GET", "/", header{"Upgrade", "websocket"}, HTTP},
		{"Connection without Upgrade", "GET", "/", header{"Connection", "Upgrade"}, HTTP},
		{"upgrade to another protocol", "GET", "/", header{"Connection", "Upgrade", "Upgrade", "h2c"}, HTTP},
		{"token-like substring", "GET", "/", header{"Connection", "upgrades", "Upgrade", "websocket"}, HTTP},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.target, nil)
		for i := 0; i+1 < len(tt.header); i += 2 {
			r.Header.Add(tt.header[i], tt.header[i+1])
		}
		if got := Of(r); got != tt.want {
			t.Errorf("%s: %s %s %q: got %d, want %d", tt.name, tt.method, tt.target, r.Header, got, tt.want)
		}
	}
}

// TestStreamToken: the header first, then ?token=.
func TestStreamToken(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/?token=query", nil)
	if got := StreamToken(r); got != "query" {
		t.Errorf("?token=query: %q", got)
	}
	r.Header.Set(TokenHeader, "header")
	if got := StreamToken(r); got != "header" {
		t.Errorf("header and ?token=: %q, want the header's", got)
	}
	if got := StreamToken(httptest.NewRequest(http.MethodGet, "/?a=b", nil)); got != "" {
		t.Errorf("no token: %q", got)
	}
}

package protocol

import (
	"context"
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
		socket bool // marked WithWebSocketOperation
		want   Kind
	}{
		{"no Accept", "GET", "/", nil, false, HTTP},
		{"JSON", "POST", "/", header{"Accept", "application/json"}, false, HTTP},
		{"GraphQL response", "POST", "/", header{"Accept", "application/graphql-response+json"}, false, HTTP},
		{"any", "GET", "/", header{"Accept", "*/*"}, false, HTTP},
		{"nothing we serve", "GET", "/", header{"Accept", "text/html"}, false, HTTP},
		{"unparseable", "GET", "/", header{"Accept", ";;;"}, false, HTTP},

		{"SSE", "GET", "/", header{"Accept", "text/event-stream"}, false, SSE},
		{"SSE by POST", "POST", "/", header{"Accept", "text/event-stream"}, false, SSE},
		{"NDJSON", "GET", "/", header{"Accept", "application/x-ndjson"}, false, NDJSON},
		{"Apollo multipart", "POST", "/", header{"Accept", "multipart/mixed;boundary=graphql;subscriptionSpec=1.0, application/json"}, false, Multipart},
		{"unknown types skipped", "GET", "/", header{"Accept", "text/html, text/event-stream"}, false, SSE},
		{"two Accept headers: the first", "GET", "/", header{"Accept", "text/event-stream", "Accept", "application/json"}, false, SSE},

		// Accept negotiation: the highest q wins, the first of equals.
		{"JSON preferred", "GET", "/", header{"Accept", "application/json, text/event-stream;q=0.5"}, false, HTTP},
		{"SSE preferred", "GET", "/", header{"Accept", "application/json;q=0.4, text/event-stream;q=0.5"}, false, SSE},
		{"equal q: the first", "GET", "/", header{"Accept", "application/x-ndjson, text/event-stream"}, false, NDJSON},
		{"equal q: JSON first", "GET", "/", header{"Accept", "*/*;q=0.8, text/event-stream;q=0.8"}, false, HTTP},
		{"q=0 refuses", "GET", "/", header{"Accept", "text/event-stream;q=0"}, false, HTTP},
		{"unparseable q counts as 1", "GET", "/", header{"Accept", "application/json;q=0.9, text/event-stream;q=x"}, false, SSE},

		// Streams are GET and POST only: other methods are plain HTTP
		// (answered 405 by the GraphQL-over-HTTP transport).
		{"PATCH", "PATCH", "/", header{"Accept", "text/event-stream"}, false, HTTP},
		{"HEAD", "HEAD", "/", header{"Accept", "text/event-stream"}, false, HTTP},

		// Single connection mode: PUT, DELETE, or a stream token.
		{"PUT reserves", "PUT", "/", nil, false, SingleConnection},
		{"DELETE stops", "DELETE", "/?operationId=a", nil, false, SingleConnection},
		{"token header", "POST", "/", header{"X-GraphQL-Event-Stream-Token", "t"}, false, SingleConnection},
		{"token header with SSE", "GET", "/", header{"Accept", "text/event-stream", "X-GraphQL-Event-Stream-Token", "t"}, false, SingleConnection},
		{"token parameter", "GET", "/?token=t", header{"Accept", "text/event-stream"}, false, SingleConnection},
		{"empty token", "GET", "/?token=", header{"Accept", "text/event-stream"}, false, SSE},
		{"another parameter ending in token", "GET", "/?mytoken=t", header{"Accept", "text/event-stream"}, false, SSE},
		{"stream ticket is no token", "GET", "/?ticket=t", header{"Accept", "text/event-stream"}, false, SSE},

		// WebSocket upgrades, whatever else the request says.
		{"upgrade", "GET", "/", header{"Connection", "Upgrade", "Upgrade", "websocket"}, false, WebSocket},
		{"upgrade in lists, any case", "GET", "/", header{"Connection", "keep-alive, UPGRADE", "Upgrade", "h2c, WebSocket"}, false, WebSocket},
		{"upgrade in a second header", "GET", "/", header{"Connection", "keep-alive", "Connection", "upgrade", "Upgrade", "websocket"}, false, WebSocket},
		{"upgrade before a token", "GET", "/?token=t", header{"Connection", "Upgrade", "Upgrade", "websocket"}, false, WebSocket},
		{"upgrade before SSE", "GET", "/", header{"Connection", "Upgrade", "Upgrade", "websocket", "Accept", "text/event-stream"}, false, WebSocket},
		{"upgrade by PUT", "PUT", "/", header{"Connection", "Upgrade", "Upgrade", "websocket"}, false, WebSocket},
		{"Upgrade without Connection", "GET", "/", header{"Upgrade", "websocket"}, false, HTTP},
		{"Connection without Upgrade", "GET", "/", header{"Connection", "Upgrade"}, false, HTTP},
		{"upgrade to another protocol", "GET", "/", header{"Connection", "Upgrade", "Upgrade", "h2c"}, false, HTTP},
		{"token-like substring", "GET", "/", header{"Connection", "upgrades", "Upgrade", "websocket"}, false, HTTP},

		// A graphql-ws operation: the socket handler's own request, by
		// its context, before every other rule.
		{"WebSocket operation", "POST", "/", nil, true, WebSocketOperation},
		{"WebSocket operation with headers", "PUT", "/?token=t", header{"Connection", "Upgrade", "Upgrade", "websocket"}, true, WebSocketOperation},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.target, nil)
		for i := 0; i+1 < len(tt.header); i += 2 {
			r.Header.Add(tt.header[i], tt.header[i+1])
		}
		if tt.socket {
			r = r.WithContext(WithWebSocketOperation(context.Background()))
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

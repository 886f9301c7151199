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
		{"two Accept lines: the first of equals", "GET", "/", header{"Accept", "text/event-stream", "Accept", "application/json"}, SSE},
		// Field lines mean one list joined by commas (RFC 9110 section
		// 5.3): the second line's higher q wins, its q=0 refuses.
		{"two Accept lines: the second preferred", "GET", "/", header{"Accept", "application/json;q=0.5", "Accept", "text/event-stream"}, SSE},
		{"two Accept lines: the second refuses", "GET", "/", header{"Accept", "text/*", "Accept", "text/event-stream;q=0"}, HTTP},

		// Accept negotiation: the highest q wins, the first of equals.
		{"JSON preferred", "GET", "/", header{"Accept", "application/json, text/event-stream;q=0.5"}, HTTP},
		{"SSE preferred", "GET", "/", header{"Accept", "application/json;q=0.4, text/event-stream;q=0.5"}, SSE},
		{"equal q: the first", "GET", "/", header{"Accept", "application/x-ndjson, text/event-stream"}, NDJSON},
		{"equal q: JSON first", "GET", "/", header{"Accept", "*/*;q=0.8, text/event-stream;q=0.8"}, HTTP},
		{"q=0 refuses", "GET", "/", header{"Accept", "text/event-stream;q=0"}, HTTP},
		{"unparseable q counts as 1", "GET", "/", header{"Accept", "application/json;q=0.9, text/event-stream;q=x"}, SSE},

		// Media ranges (RFC 9110 section 12.5.1): a range matches every
		// type it names, the most specific range decides an offer's q,
		// and at equal q a JSON response comes before a stream.
		{"text/* takes SSE", "GET", "/", header{"Accept", "text/*"}, SSE},
		{"text/* by POST", "POST", "/", header{"Accept", "text/*"}, SSE},
		{"text/* preferred by q", "POST", "/", header{"Accept", "text/*;q=0.5, application/json;q=0.1"}, SSE},
		{"JSON preferred over text/* by q", "POST", "/", header{"Accept", "text/*;q=0.1, application/json;q=0.5"}, HTTP},
		{"*/* with a preferred stream", "GET", "/", header{"Accept", "*/*;q=0.1, application/x-ndjson"}, NDJSON},
		{"multipart/*", "POST", "/", header{"Accept", "multipart/*"}, Multipart},
		{"application/*: JSON before NDJSON", "GET", "/", header{"Accept", "application/*"}, HTTP},
		{"a specific q=0 beats text/*", "GET", "/", header{"Accept", "text/*, text/event-stream;q=0"}, HTTP},
		{"a specific q=0 beats text/* after it", "GET", "/", header{"Accept", "text/event-stream;q=0, text/*"}, HTTP},
		{"a specific q beats */*", "GET", "/", header{"Accept", "*/*;q=0.9, text/event-stream;q=0.1"}, HTTP},
		{"text/*;q=0 refuses", "GET", "/", header{"Accept", "text/*;q=0"}, HTTP},
		{"a browser", "GET", "/", header{"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, HTTP},
		{"types compare in lower case", "GET", "/", header{"Accept", "Text/Event-Stream"}, SSE},
		{"q above 1 is 1", "GET", "/", header{"Accept", "application/json;q=2, text/event-stream"}, HTTP},

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

// TestNegotiate is the table of Accept headers and the offer each
// prefers of GraphQL over HTTP's two response types.
func TestNegotiate(t *testing.T) {
	t.Parallel()
	const jsonType, gqlType = "application/json", "application/graphql-response+json"
	tests := []struct {
		accept string
		want   string // "": none acceptable
	}{
		{"", jsonType},
		{"  ", jsonType},
		{"*/*", jsonType},
		{"application/*", jsonType},
		{gqlType, gqlType},
		{gqlType + ", " + jsonType, gqlType},
		{jsonType + ", " + gqlType, jsonType},
		{jsonType + ";q=0.9, " + gqlType, gqlType},
		{"application/*;q=0.5, " + gqlType, gqlType},
		{"*/*, " + jsonType + ";q=0", gqlType},
		{"*/*;q=0.1, " + jsonType + ";q=0.2", jsonType},
		{"*/*;q=0", ""},
		{"application/*;q=0, */*", ""},
		{jsonType + ";q=0, " + gqlType + ";q=0", ""},
		{"text/html", ""},
		{"text/*", ""},
		{";;;", ""},
		{jsonType + ";q=-1", ""},
		{jsonType + ";q=NaN", jsonType}, // unparseable: 1
	}
	for _, tt := range tests {
		got, ok := Negotiate(tt.accept, jsonType, gqlType)
		if !ok {
			got = ""
		}
		if got != tt.want {
			t.Errorf("Accept %q: got %q (ok %v), want %q", tt.accept, got, ok, tt.want)
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

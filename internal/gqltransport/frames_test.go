package gqltransport_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestFiniteOperationFrames checks the exact bytes of queries, mutations
// and request errors over SSE and NDJSON, and every HTTP error.
func TestFiniteOperationFrames(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, dt.WithCORS("https://app.example"))
	d.CreateDatabase(t, "zoo", zooSDL)
	path := "/api/graphql/admin/zoo"
	post := func(accept, b string, header ...string) dt.Response {
		t.Helper()
		return d.Do(t, dt.Admin(), http.MethodPost, path, b, append([]string{"Content-Type", "application/json", "Accept", accept}, header...)...)
	}
	checkStream := func(name string, r dt.Response, ctype, want string) {
		t.Helper()
		if r.Status != 200 || r.Header.Get("Content-Type") != ctype || withoutPosition(string(r.Body)) != want {
			t.Fatalf("%s: status %d, type %q, body:\n%q\nwant:\n%q", name, r.Status, r.Header.Get("Content-Type"), r.Body, want)
		}
		for k, v := range map[string]string{"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive", "Content-Encoding": ""} {
			if got := r.Header.Get(k); got != v {
				t.Fatalf("%s: header %s = %q, want %q", name, k, got, v)
			}
		}
	}
	const sseType, ndType = "text/event-stream; charset=utf-8", "application/x-ndjson; charset=utf-8"

	// A mutation, then a query, over SSE: one next, then complete.
	r := post(sse, body(`mutation { _insertDocuments(json: "{\"@type\":\"Person\",\"@id\":\"Person/alice\",\"name\":\"Alice\",\"ssn\":\"1\"}") }`))
	checkStream("mutation", r, sseType, "event: next\ndata: {\"data\":{\"_insertDocuments\":[\"Person/alice\"]}}\n\nevent: complete\ndata:\n\n")
	r = post(sse, body(`{ Person { _id name } }`))
	checkStream("query", r, sseType, "event: next\ndata: {\"data\":{\"Person\":[{\"_id\":\"Person/alice\",\"name\":\"Alice\"}]}}\n\nevent: complete\ndata:\n\n")
	r = post(ndjson, body(`{ Person { name } }`))
	checkStream("ndjson query", r, ndType, "{\"data\":{\"Person\":[{\"name\":\"Alice\"}]}}\n\n")
	// GET query over SSE.
	r = d.Do(t, dt.Admin(), http.MethodGet, path+"?query="+url.QueryEscape(`{ Person { name } }`), nil, "Accept", sse)
	checkStream("GET query", r, sseType, "event: next\ndata: {\"data\":{\"Person\":[{\"name\":\"Alice\"}]}}\n\nevent: complete\ndata:\n\n")

	// A request that does not validate: a 200 stream with the errors.
	r = post(sse, body(`subscription { Person_added { nope } }`))
	checkStream("validation", r, sseType, "event: next\ndata: {\"errors\":[{\"message\":\"Cannot query field \\\"nope\\\" on type \\\"Person\\\". Did you mean \\\"name\\\"?\",\"locations\":[{\"line\":1,\"column\":31}],\"extensions\":{\"code\":\"GRAPHQL_VALIDATION_FAILED\"}}]}\n\nevent: complete\ndata:\n\n")
	r = post(ndjson, body(`subscription { Person_added { nope } }`))
	checkStream("ndjson validation", r, ndType, "{\"errors\":[{\"message\":\"Cannot query field \\\"nope\\\" on type \\\"Person\\\". Did you mean \\\"name\\\"?\",\"locations\":[{\"line\":1,\"column\":31}],\"extensions\":{\"code\":\"GRAPHQL_VALIDATION_FAILED\"}}]}\n\n")
	// A protected field does not exist for a reader without the role; the
	// admin sees it. (Field protection itself: TestPerDocumentEvents.)
	r = post(sse, body(`subscription { Person_added(filter: {nope: {eq: "x"}}) { name } }`))
	if r.Status != 200 || !strings.HasPrefix(string(r.Body), "event: next\ndata: {\"errors\":[") || !strings.HasSuffix(string(r.Body), "event: complete\ndata:\n\n") {
		t.Fatalf("bad filter: %d %q", r.Status, r.Body)
	}

	// HTTP errors before any stream: JSON bodies.
	httpErr := func(name string, r dt.Response, status int, code string) {
		t.Helper()
		var e struct {
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		if r.Status != status || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") || json.Unmarshal(r.Body, &e) != nil || len(e.Errors) != 1 || e.Errors[0].Extensions["code"] != code {
			t.Fatalf("%s: status %d (want %d), type %q, body %s", name, r.Status, status, r.Header.Get("Content-Type"), r.Body)
		}
	}
	httpErr("malformed body", post(sse, `{"query":`), 400, "BAD_REQUEST")
	httpErr("no query", post(sse, `{}`), 400, "BAD_REQUEST")
	httpErr("bad heartbeat", d.Do(t, dt.Admin(), http.MethodPost, path+"?heartbeat=soon", body(`subscription { Person_added { name } }`), "Content-Type", "application/json", "Accept", sse), 400, "BAD_REQUEST")
	httpErr("zero heartbeat", d.Do(t, dt.Admin(), http.MethodPost, path+"?heartbeat=0s", body(`subscription { Person_added { name } }`), "Content-Type", "application/json", "Accept", sse), 400, "BAD_REQUEST")
	httpErr("bad connected", d.Do(t, dt.Admin(), http.MethodPost, path+"?connected=yes", body(`subscription { Person_added { name } }`), "Content-Type", "application/json", "Accept", sse), 400, "BAD_REQUEST")
	httpErr("bad position", post(sse, body(`subscription { Person_added { name } }`), "Last-Event-ID", "not-a-position"), 400, "BAD_REQUEST")
	httpErr("bad extensions position", post(sse, body(`subscription { Person_added { name } }`, "extensions", map[string]any{"lastEventId": 7})), 400, "BAD_REQUEST")
	httpErr("wrong content type", d.Do(t, dt.Admin(), http.MethodPost, path, "query=x", "Content-Type", "text/plain", "Accept", sse), 415, "BAD_REQUEST")
	r = d.Do(t, dt.Admin(), http.MethodGet, path+"?query="+url.QueryEscape(`mutation { _deleteDocuments(ids: ["Person/alice"]) }`), nil, "Accept", sse)
	httpErr("GET mutation", r, 405, "METHOD_NOT_ALLOWED")
	if r.Header.Get("Allow") != "POST" {
		t.Fatalf("GET mutation: Allow %q", r.Header.Get("Allow"))
	}
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	r = d.Do(t, dt.Basic("rita", "rita-password"), http.MethodGet, path+"?query="+url.QueryEscape(`subscription { Person_added { name } }`), nil, "Accept", sse)
	if r.Status != 403 {
		t.Fatalf("no access: %d %s", r.Status, r.Body)
	}
	if r = d.Do(t, dt.NoAuth(), http.MethodGet, path, nil, "Accept", sse); r.Status != 401 || r.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no credentials: %d %v", r.Status, r.Header)
	}

	// CORS: preflight 204 without credentials, Origin reflected on streams.
	r = d.Do(t, dt.NoAuth(), http.MethodOptions, path, nil, "Origin", "https://app.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type, accept")
	if r.Status != 204 || r.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || r.Header.Get("Vary") != "Origin" ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") || r.Header.Get("Access-Control-Allow-Headers") != "authorization, content-type, accept" {
		t.Fatalf("preflight: %d %v", r.Status, r.Header)
	}
	r = post(sse, body(`{ Person { name } }`), "Origin", "https://app.example")
	if r.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || r.Header.Get("Vary") != "Origin" || r.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Fatalf("CORS on a stream: %v", r.Header)
	}

	// Without an event-stream Accept the plain JSON transport answers.
	r = post("application/json", body(`{ Person { name } }`))
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/json; charset=utf-8" || withoutPosition(string(r.Body)) != `{"data":{"Person":[{"name":"Alice"}]}}`+"\n" {
		t.Fatalf("plain JSON: %d %q %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
}

// TestSubscriptionFrames checks the exact frames of a subscription over
// SSE (with and without the opt-in connected event, heartbeats) and NDJSON.
func TestSubscriptionFrames(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSDL)
	q := `subscription { Person_added { _id name } }`
	plain := subscribe(t, d, "zoo", q)
	named := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/zoo?connected=true", body(q), nil, "Accept", sse)
	get := mustOpen(t, d, dt.Admin(), http.MethodGet, "/api/graphql/admin/zoo?query="+url.QueryEscape(q), "", nil, "Accept", sse)
	nd := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/zoo", body(q), nil, "Accept", ndjson)
	hb := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/zoo?heartbeat=1s", body(q), nil, "Accept", sse)
	ndhb := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/zoo?heartbeat=1s", body(q), nil, "Accept", ndjson)
	plain.connected()
	get.connected()
	nd.connected()
	named.connected()
	if f := named.Next(); f.String() != "event: connected\ndata: null" {
		t.Fatalf("named connected frame %q", f)
	}
	hb.connected()
	if f := hb.Next(); f.String() != ": ping" {
		t.Fatalf("heartbeat frame %q", f)
	}
	ndhb.connected()
	if f := ndhb.Next(); f.String() != "null" {
		t.Fatalf("NDJSON keep-alive %q", f)
	}

	insert(t, d, "zoo", `{"@type":"Person","@id":"Person/alice","name":"Alice"}`)
	const data = `{"data":{"Person_added":{"_id":"Person/alice","name":"Alice"}}}`
	var id string
	for _, s := range []*stream{plain, named, get, hb} {
		f := s.Event()
		if len(f) != 3 || f[0] != "event: next" || !commitIDRE.MatchString(f[1]) || !strings.HasSuffix(dt.Untag(f.Field("id")), "-1-0") || f[2] != "data: "+data {
			t.Fatalf("event frame %q", f)
		}
		if id != "" && f[1] != id {
			t.Fatalf("ids differ: %s %s", id, f[1])
		}
		id = f[1]
	}
	for {
		if f := nd.Next(); f.String() != "null" {
			// The SSE event id, as extensions.lastEventId.
			if f.String() != strings.TrimSuffix(data, "}")+`,"extensions":{"lastEventId":"`+strings.TrimPrefix(id, "id: ")+`"}}` {
				t.Fatalf("NDJSON event %q", f)
			}
			break
		}
	}
}

package gqltransport

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/graph"
	"github.com/sluice-dev/sluice/internal/protocol"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// FuzzRequestParams feeds arbitrary query strings, POST bodies and
// Last-Event-ID headers to the request parsers: no panic, and every
// refusal is a client error.
func FuzzRequestParams(f *testing.F) {
	f.Add("heartbeat=15s&connected=true", `{"query":"subscription { A_added { _id } }","extensions":{"lastEventId":"abc-1-0"}}`, "")
	f.Add("query=%7B%20A%20%7B%20_id%20%7D%20%7D&variables=%7B%7D&lastEventId=", ``, "x-1-2")
	f.Add("heartbeat=0", `[]`, "")
	f.Fuzz(func(t *testing.T, rawQuery, body, lastEventID string) {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		if q.Has("heartbeat") {
			if _, err := streamparam.Heartbeat(q.Get("heartbeat")); err != nil && sluice.ErrorCode(err) != sluice.CodeInvalid {
				t.Fatalf("heartbeat %q: %v", q.Get("heartbeat"), err)
			}
		}
		for _, r := range []*http.Request{
			httptest.NewRequest(http.MethodGet, "/x?"+q.Encode(), nil),
			httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body)),
		} {
			r.Header.Set("Content-Type", "application/json")
			if _, rerr := graph.ReadParams(r, 1<<20); rerr != nil && sluice.ErrorCode(rerr).HTTPStatus()/100 != 4 {
				t.Fatalf("%s %q %q: %v", r.Method, rawQuery, body, rerr)
			}
		}
		if lastEventID != "" {
			if _, err := sluice.ParsePosition(lastEventID); err != nil && sluice.ErrorCode(err) != sluice.CodeInvalid {
				t.Fatalf("position %q: %v", lastEventID, err)
			}
		}
	})
}

// FuzzFraming checks that a next message always is exactly one SSE event
// (and one NDJSON line) whose data is the payload, whatever text the
// payload's JSON carries: an unescaped line break would split it.
func FuzzFraming(f *testing.F) {
	f.Add("plain", "abc-1-0")
	f.Add("line\nbreak\r\nand\u2028separators", "")
	f.Fuzz(func(t *testing.T, text, id string) {
		if strings.ContainsAny(id, "\r\n") {
			return // ids are positions: [a-z0-9-]
		}
		payload, err := json.Marshal(map[string]any{"data": map[string]string{"text": text}})
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		s := newStream(rec, httptest.NewRequest("GET", "/", nil), protocol.SSE, 0)
		s.next(id, payload)
		frames := strings.Split(strings.TrimSuffix(s.Buf.String(), "\n\n"), "\n\n")
		if len(frames) != 1 {
			t.Fatalf("%d frames for one message: %q", len(frames), s.Buf.String())
		}
		var data []string
		sc := bufio.NewScanner(strings.NewReader(frames[0]))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = append(data, v)
			}
		}
		if len(data) != 1 || data[0] != string(payload) {
			t.Fatalf("data lines %q, want one with %s", data, payload)
		}
		nd := newStream(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), protocol.NDJSON, 0)
		nd.next(id, payload)
		if got := nd.Buf.String(); strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n") {
			t.Fatalf("NDJSON line %q", got)
		}
	})
}

// FuzzRepeatedMember feeds arbitrary connection_init payloads to the
// check for members named twice: no panic; a name it reports is one the
// payload (or its headers) has, and an object it passes decodes with as
// many members as it names.
func FuzzRepeatedMember(f *testing.F) {
	for _, s := range []string{`{"Authorization":"a","Authorization":"b"}`, `{"headers":{"x":1,"x":2}}`, `{"a":1,"b":{"a":2}}`, `{"\u0041":1,"A":2}`, `[1]`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &m) != nil {
			repeatedMember([]byte(s)) // must not panic
			return
		}
		name, repeated := repeatedMember([]byte(s))
		inner, nested := strings.CutPrefix(name, "headers.")
		var h map[string]json.RawMessage
		if repeated && nested {
			if json.Unmarshal(m["headers"], &h) != nil {
				t.Fatalf("%q: %q named in headers that are not an object", s, name)
			}
			if _, ok := h[inner]; !ok {
				t.Fatalf("%q: %q is not a member of its headers", s, name)
			}
			return
		}
		if repeated {
			if _, ok := m[name]; !ok {
				t.Fatalf("%q: %q is not a member", s, name)
			}
			return
		}
		// Passed: as many members as the decoder counts.
		dec := json.NewDecoder(strings.NewReader(s))
		dec.Token()
		n := 0
		for dec.More() {
			dec.Token()
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return
			}
			n++
		}
		if n != len(m) {
			t.Fatalf("%q: %d members, %d distinct, passed", s, n, len(m))
		}
	})
}

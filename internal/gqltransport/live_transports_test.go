package gqltransport_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestLiveQueryTransports: a live query works unchanged over NDJSON,
// graphql-ws (both spellings), Apollo multipart, graphql-sse single
// connection mode and an EventSource GET: its first result, then the
// result of a commit that changes it, each with its position.
func TestLiveQueryTransports(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "tr", staffSDL)
	w := &writer{t: t, d: d, db: "tr"}
	w.insert(person("a", "Ann", "x", ""))
	const sel = `Person(filter: {team: {eq: "x"}}) { name }`
	q := `subscription { ` + sel + ` }`
	const first, second = `{"Person":[{"name":"Ann"}]}`, `{"Person":[{"name":"Ann"},{"name":"Bob"}]}`

	nd := mustOpen(t, d, dt.Admin(), http.MethodPost, "/api/graphql/admin/tr", body(q), nil, "Accept", ndjson)
	nd.connected()
	get := mustOpen(t, d, dt.Admin(), http.MethodGet, "/api/graphql/admin/tr?query="+urlQuery(`query @live { `+sel+` }`), "", nil, "Accept", sse)
	get.connected()
	ws := mustConnect(t, d, "tr")
	ws.send(`{"id":"s","type":"subscribe","payload":{"query":` + jsonString(q) + `}}`)
	ws.send(`{"id":"l","type":"subscribe","payload":{"query":` + jsonString(`query @live { `+sel+` }`) + `}}`)

	tok := reserve(t, d, dt.Admin(), "tr")
	single := mustOpen(t, d, dt.Admin(), http.MethodGet, "/api/graphql/admin/tr?token="+tok, "", nil, "Accept", sse)
	single.connected()
	d.MustDo(t, 202, dt.Admin(), http.MethodPost, "/api/graphql/admin/tr", body(q, "extensions", map[string]any{"operationId": "o"}),
		"Content-Type", "application/json", "X-GraphQL-Event-Stream-Token", tok)

	mp := openLiveMultipart(t, d, "/api/graphql/admin/tr", body(q))

	msg := func(pos, data string) string {
		return `{"data":` + data + `,"extensions":{"position":"` + pos + `","lastEventId":"` + pos + `"}}`
	}
	check := func(seq int64, data string) {
		t.Helper()
		get.expect(seq, data)
		want := msg(get.last, data) // its id: the position, tagged, every transport's
		// The socket's two operations are two shares: either may come first.
		wsMsgs := map[string]string{}
		for range 2 {
			var m struct {
				ID      string
				Payload json.RawMessage
			}
			raw := ws.read()
			if err := json.Unmarshal([]byte(raw), &m); err != nil {
				t.Fatalf("graphql-ws: %v: %s", err, raw)
			}
			wsMsgs[m.ID] = string(m.Payload)
		}
		for name, got := range map[string]string{
			"NDJSON":            nd.Event().String(),
			"graphql-ws":        wsMsgs["s"],
			"graphql-ws @live":  wsMsgs["l"],
			"single connection": strings.TrimSuffix(strings.TrimPrefix(single.Event().String(), "event: next\ndata: {\"id\":\"o\",\"payload\":"), "}"),
			"multipart":         mp.next(),
		} {
			if got != want {
				t.Errorf("%s:\ngot  %s\nwant %s", name, got, want)
			}
		}
	}
	check(1, first)
	check(w.insert(person("b", "Bob", "x", "")), second)
}

// multipartReader reads an Apollo multipart subscription's parts.
type multipartReader struct {
	t  testing.TB
	br *bufio.Reader
	// open is set once the first boundary was read.
	open bool
}

func openLiveMultipart(t testing.TB, d *dt.Daemon, path, reqBody string) *multipartReader {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, d.URL+path, strings.NewReader(reqBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json;q=0.9")
	req.Header.Set("Content-Type", "application/json")
	dt.Admin()(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("multipart: status %d", resp.StatusCode)
	}
	m := &multipartReader{t: t, br: bufio.NewReader(resp.Body)}
	if p := m.part(); p != "{}" {
		t.Fatalf("multipart readiness part %q", p)
	}
	return m
}

// part returns the body of the next part. A part ends where the next
// boundary begins, which the server writes right after it.
func (m *multipartReader) part() string {
	m.t.Helper()
	const boundary = "\r\n--graphql"
	var b strings.Builder
	for {
		c, err := m.br.ReadByte()
		if err != nil {
			m.t.Fatalf("multipart: %v", err)
		}
		b.WriteByte(c)
		if !strings.HasSuffix(b.String(), boundary) {
			continue
		}
		content := strings.TrimSuffix(b.String(), boundary)
		b.Reset()
		if !m.open {
			m.open = true // the preamble
			continue
		}
		_, part, ok := strings.Cut(content, "\r\n\r\n")
		if !ok {
			m.t.Fatalf("multipart: a part without headers: %q", content)
		}
		return part
	}
}

// next returns the payload of the next part that is not a heartbeat.
func (m *multipartReader) next() string {
	m.t.Helper()
	for {
		p := m.part()
		if p == "{}" {
			continue
		}
		var v struct{ Payload json.RawMessage }
		if err := json.Unmarshal([]byte(p), &v); err != nil {
			m.t.Fatalf("multipart part %q: %v", p, err)
		}
		return string(v.Payload)
	}
}

package daemon_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// startNotes starts a daemon with database admin/<name> of Notes, and
// Note/a in it with the text "ok"; it returns the daemon and the
// database's document path.
func startNotes(t *testing.T, name string) (*dt.Daemon, string) {
	d := dt.Start(t)
	d.CreateDatabase(t, name, "type Note { text: String tags: [String] }")
	docs := "/api/document/admin/" + name
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Note","@id":"a","text":"ok"}`)
	return d, docs
}

// TestInvalidUTF8Refused: a body that is not valid UTF-8 is a 400 naming
// the byte where it stops being UTF-8, on every path that writes text (REST
// POST, PUT, PATCH, NDJSON, DELETE; GraphQL variables, a string in the
// query, graphql-ws), and nothing of it is written: encoding/json would
// have stored U+FFFD in place of the bytes. U+FFFD sent as text is text.
func TestInvalidUTF8Refused(t *testing.T) {
	t.Parallel()
	d, docs := startNotes(t, "utf")
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Note","@id":"r","text":"�"}`)

	bad := "x\xffy"
	gqlBody := func(query string, vars string) string {
		q, _ := json.Marshal(query)
		return `{"query":` + string(q[:len(q)-1]) + `","variables":` + vars + `}`
	}
	cases := []struct {
		name, method, path, body, ctype string
	}{
		{"POST flat", "POST", docs, `{"@type":"Note","@id":"a","text":"` + bad + `"}`, ""},
		{"POST nested", "POST", docs, `{"@type":"Note","@id":"b","tags":["` + bad + `"]}`, ""},
		{"POST array, second", "POST", docs, `[{"@type":"Note","@id":"c"},{"@type":"Note","@id":"d","text":"` + bad + `"}]`, ""},
		{"PUT", "PUT", docs + "?create=true", `{"@type":"Note","@id":"a","text":"` + bad + `"}`, ""},
		{"PATCH", "PATCH", docs + "?id=Note/a", `{"text":"` + bad + `"}`, "application/merge-patch+json"},
		{"PATCH, cut short at the end", "PATCH", docs + "?id=Note/a", `{"text":"y"}` + "\xe2\x82", "application/merge-patch+json"},
		{"NDJSON", "POST", docs, `{"@type":"Note","@id":"e"}` + "\n" + `{"@type":"Note","@id":"f","text":"` + bad + `"}`, "application/x-ndjson"},
		{"DELETE", "DELETE", docs, `["Note/a","Note/` + bad + `"]`, ""},
		{"GraphQL variable", "POST", "/api/graphql/admin/utf", gqlBody(`mutation($t: String) { Note_update(documents: [{_id: "Note/a", text: $t}]) }`, `{"t":"`+bad+`"}`), "application/json"},
		{"GraphQL inline string", "POST", "/api/graphql/admin/utf", `{"query":"mutation { Note_update(documents: [{_id: \"Note/a\", text: \"` + bad + `\"}]) }"}`, "application/json"},
		{"GraphQL JSON string", "POST", "/api/graphql/admin/utf", `{"query":"mutation { _insertDocuments(json: \"{\\\"@type\\\":\\\"Note\\\",\\\"@id\\\":\\\"g\\\",\\\"text\\\":\\\"` + bad + `\\\"}\") }"}`, "application/json"},
	}
	for _, c := range cases {
		var header []string
		if c.ctype != "" {
			header = []string{"Content-Type", c.ctype}
		}
		// Where the body stops being UTF-8: its first byte that is not
		// ASCII (the bodies are ASCII but for that).
		i := 0
		for i < len(c.body) && c.body[i] < 0x80 {
			i++
		}
		want := fmt.Sprintf("at byte %d ", i)
		r := d.Do(t, dt.Admin(), c.method, c.path, c.body, header...)
		msg := errorMessage(r.Body)
		if r.Status != 400 || !strings.Contains(msg, "not valid UTF-8 "+want) {
			t.Errorf("%s: %d %s, want a 400 saying the body is not valid UTF-8 %s", c.name, r.Status, r.Body, want)
		}
	}

	// Nothing was written: Note/a keeps its text, no other document.
	r := d.MustDo(t, 200, dt.Admin(), "GET", docs+"?type=Note", nil)
	got := strings.TrimSpace(string(r.Body))
	for _, want := range []string{`"@id":"Note/a"`, `"text":"ok"`, `"@id":"Note/r"`, `"text":"�"`} {
		if !strings.Contains(got, want) {
			t.Errorf("after the refused writes: %s, want %s in it", got, want)
		}
	}
	if n := strings.Count(got, `"@type"`); n != 2 {
		t.Errorf("after the refused writes: %d documents, want 2: %s", n, got)
	}

	// graphql-ws: a message that is not UTF-8 closes the socket with 4400.
	ctx, c := ackedSocket(t, d, "/api/graphql/admin/utf")
	sub := `{"type":"subscribe","id":"1","payload":{"query":"subscription($t: String) { Note_added(filter: {text: {eq: $t}}) { _id } }","variables":{"t":"` + bad + `"}}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(sub)); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.Read(ctx)
	if websocket.CloseStatus(err) != 4400 || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("subscribe with invalid UTF-8: %s %v, want a close 4400 saying so", msg, err)
	}
}

// TestLoneSurrogatesRefused: a \u escape naming half of a UTF-16
// surrogate pair without the other half names no character, and
// encoding/json (as gqlparser, for a GraphQL string) would store U+FFFD in
// its place: it is a 400 naming the escape, on every path that writes
// text, and nothing of it is written. A pair is its character; an escaped
// backslash before "ud800" is text; a schema's block string keeps its
// backslashes.
func TestLoneSurrogatesRefused(t *testing.T) {
	t.Parallel()
	d, docs := startNotes(t, "esc")

	gql := "/api/graphql/admin/esc"
	// want is what the error names: the escape and, for the body's own
	// escapes, where it starts (the first backslash of it in the body).
	at := func(body, esc string) string {
		return fmt.Sprintf("%s at byte %d ", esc, strings.Index(body, esc))
	}
	cases := []struct {
		name, method, path, body, ctype, esc string
		graphql                              bool // a GraphQL error may be a 200
	}{
		{"POST flat", "POST", docs, `{"@type":"Note","@id":"b","text":"x\ud800y"}`, "", `\ud800`, false},
		{"POST, a low half", "POST", docs, `{"@type":"Note","@id":"b","text":"\udc00"}`, "", `\udc00`, false},
		{"POST, a high half before another escape", "POST", docs, `{"@type":"Note","@id":"b","tags":["\ud83d\n"]}`, "", `\ud83d`, false},
		{"POST array, second", "POST", docs, `[{"@type":"Note","@id":"c"},{"@type":"Note","@id":"d","text":"\ud800"}]`, "", `\ud800`, false},
		{"PUT", "PUT", docs + "?create=true", `{"@type":"Note","@id":"a","text":"\ud800"}`, "", `\ud800`, false},
		{"PATCH", "PATCH", docs + "?id=Note/a", `{"text":"\ud800"}`, "application/merge-patch+json", `\ud800`, false},
		{"PATCH, at the very end", "PATCH", docs + "?id=Note/a", `{"text":"\ud800`, "application/merge-patch+json", `\ud800`, false},
		{"NDJSON", "POST", docs, `{"@type":"Note","@id":"e"}` + "\n" + `{"@type":"Note","@id":"f","text":"\ud800"}`, "application/x-ndjson", `\ud800`, false},
		{"DELETE", "DELETE", docs, `["Note/a","Note/\ud800"]`, "", `\ud800`, false},
		{"GraphQL variable", "POST", gql, `{"query":"mutation($t: String) { Note_update(documents: [{_id: \"Note/a\", text: $t}]) }","variables":{"t":"\ud800"}}`, "application/json", `\ud800`, true},
	}
	for i, c := range cases {
		cases[i].esc = at(c.body, c.esc)
	}
	cases = append(cases, []struct {
		name, method, path, body, ctype, esc string
		graphql                              bool
	}{
		{"GraphQL inline string", "POST", gql, `{"query":"mutation { Note_update(documents: [{_id: \"Note/a\", text: \"x\\ud800\"}]) }"}`, "application/json", `the string holds the escape \ud800,`, true},
		{"GraphQL JSON string", "POST", gql, `{"query":"mutation { _insertDocuments(json: \"{\\\"@type\\\":\\\"Note\\\",\\\"@id\\\":\\\"g\\\",\\\"text\\\":\\\"\\\\ud800\\\"}\") }"}`, "application/json", `json: the escape \ud800 at byte 34 `, true},
		{"GraphQL GET variables", "GET", gql + `?query=` + url.QueryEscape(`query($t: String) { Note(filter: {text: {eq: $t}}) { _id } }`) + `&variables=` + url.QueryEscape(`{"t":"\ud800"}`), "", "", `variables: the escape \ud800 at byte 6 `, true},
	}...)
	for _, c := range cases {
		var header []string
		if c.ctype != "" {
			header = []string{"Content-Type", c.ctype}
		}
		var body any
		if c.body != "" {
			body = c.body
		}
		r := d.Do(t, dt.Admin(), c.method, c.path, body, header...)
		msg := errorMessage(r.Body)
		if r.Status != 400 && !(c.graphql && r.Status == 200) || !strings.Contains(msg, c.esc) || !strings.Contains(msg, "half of a UTF-16 surrogate pair") {
			t.Errorf("%s: %d %s, want an error naming %s", c.name, r.Status, r.Body, c.esc)
		}
	}

	// Nothing was written: Note/a keeps its text, no other document.
	r := d.MustDo(t, 200, dt.Admin(), "GET", docs+"?type=Note", nil)
	if got := strings.TrimSpace(string(r.Body)); strings.Count(got, `"@type"`) != 1 || !strings.Contains(got, `"text":"ok"`) {
		t.Errorf("after the refused writes: %s, want Note/a alone, unchanged", got)
	}

	// A pair is its character; an escaped backslash is a backslash.
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Note","@id":"p","text":"\ud83d\ude00 \\ud800"}`)
	r = d.MustDo(t, 200, dt.Admin(), "GET", docs+"?id=Note/p", nil)
	if !strings.Contains(string(r.Body), `"text":"😀 \\ud800"`) {
		t.Errorf("a pair and an escaped backslash read back as %s", r.Body)
	}
	// A schema's block string holds backslashes as they are.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/esc", "\"\"\"A note: \\ud800 stays as written.\"\"\"\ntype Note { text: String tags: [String] }")

	// graphql-ws: a message with one closes the socket with 4400.
	ctx, c := ackedSocket(t, d, gql)
	sub := `{"type":"subscribe","id":"1","payload":{"query":"subscription($t: String) { Note_added(filter: {text: {eq: $t}}) { _id } }","variables":{"t":"\ud800"}}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(sub)); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.Read(ctx)
	if websocket.CloseStatus(err) != 4400 || !strings.Contains(err.Error(), fmt.Sprintf(`\\ud800 at byte %d is half of a UTF-16 surrogate pair`, strings.Index(sub, `\ud800`))) {
		t.Fatalf("subscribe with a lone surrogate: %s %v, want a close 4400 saying so", msg, err)
	}
}

// errorMessage returns the message of a REST error answer, or the first of
// a GraphQL answer's errors.
func errorMessage(body []byte) string {
	var e struct {
		Message string `json:"api:message"`
		Errors  []struct{ Message string }
	}
	_ = json.Unmarshal(body, &e)
	if len(e.Errors) > 0 {
		return e.Errors[0].Message
	}
	return e.Message
}

// ackedSocket opens a graphql-transport-ws socket on path as the admin and
// returns it once acknowledged, with a context for its reads and writes;
// both end with the test.
func ackedSocket(t *testing.T, d *dt.Daemon, path string) (context.Context, *websocket.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+path, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+dt.AdminPassword))
	init, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": auth}})
	if err := c.Write(ctx, websocket.MessageText, init); err != nil {
		t.Fatal(err)
	}
	if _, ack, err := c.Read(ctx); err != nil || !strings.Contains(string(ack), "connection_ack") {
		t.Fatalf("connection_init: %s %v", ack, err)
	}
	return ctx, c
}

package daemon_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestInvalidUTF8Refused: a body that is not valid UTF-8 is a 400 naming
// the byte where it stops being UTF-8, on every path that writes text (REST
// POST, PUT, PATCH, NDJSON, DELETE; GraphQL variables, a string in the
// query, graphql-ws), and nothing of it is written: encoding/json would
// have stored U+FFFD in place of the bytes. U+FFFD sent as text is text.
func TestInvalidUTF8Refused(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "utf", "type Note { text: String tags: [String] }")
	docs := "/api/document/admin/utf"
	d.MustDo(t, 200, dt.Admin(), "POST", docs, `{"@type":"Note","@id":"a","text":"ok"}`)
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
		var e struct {
			Message string `json:"api:message"`
			Errors  []struct{ Message string }
		}
		_ = json.Unmarshal(r.Body, &e)
		msg := e.Message
		if len(e.Errors) > 0 {
			msg = e.Errors[0].Message
		}
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+dt.AdminPassword))
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.URL, "http")+"/api/graphql/admin/utf", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	init, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": auth}})
	if err := c.Write(ctx, websocket.MessageText, init); err != nil {
		t.Fatal(err)
	}
	if _, ack, err := c.Read(ctx); err != nil || !strings.Contains(string(ack), "connection_ack") {
		t.Fatalf("connection_init: %s %v", ack, err)
	}
	sub := `{"type":"subscribe","id":"1","payload":{"query":"subscription($t: String) { Note_added(filter: {text: {eq: $t}}) { _id } }","variables":{"t":"` + bad + `"}}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(sub)); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.Read(ctx)
	if websocket.CloseStatus(err) != 4400 || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("subscribe with invalid UTF-8: %s %v, want a close 4400 saying so", msg, err)
	}
}

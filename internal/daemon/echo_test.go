package daemon_test

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestErrorsEchoAClientsValueCut: an error that repeats a value the
// client sent (a document id, a position, a query parameter's name or
// value, the Last-Event-ID header) repeats at most its first 100 bytes
// and says how long it was: a 5,000-byte id came back whole in the
// error, 5,000 bytes long.
func TestErrorsEchoAClientsValueCut(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "echo", "type Note { text: String }")
	// 5,000 bytes, the 100th the second of é's two: the cut leaves
	// the é out rather than half of it.
	long := strings.Repeat("x", 99) + "é" + strings.Repeat("x", 4899)
	want := `\"` + strings.Repeat("x", 99) + `\"… (5000 bytes)`
	q := url.QueryEscape(long)
	for _, c := range []struct {
		path   string
		header []string
	}{
		{path: "/api/document/admin/echo?id=" + q},
		{path: "/api/document/admin/echo?id=Note/a&as_of=" + q},
		{path: "/api/document/admin/echo?type=Note&skip=" + q},
		{path: "/api/document/admin/echo?" + q + "=1"},
		{path: "/api/subscribe/admin/echo/Note", header: []string{"Last-Event-ID", long}},
	} {
		r := d.Do(t, dt.Admin(), "GET", c.path, nil, c.header...)
		if r.Status != 400 || len(r.Body) > 1000 || !strings.Contains(string(r.Body), want) {
			t.Errorf("%.60s (header %t): %d, %d bytes: %.300s", c.path, c.header != nil, r.Status, len(r.Body), r.Body)
		}
	}
}

// TestBadLastEventIDSaysTheTagIsOptional: a Last-Event-ID that is not a
// position is refused naming both forms a position is accepted in, with
// its commit's tag and without. The error said a tag was wanted
// (<epoch>-<seq>-<index>-<tag>), though a position without one resumes.
func TestBadLastEventIDSaysTheTagIsOptional(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "tags", "type Note { text: String }")
	want := "want <epoch>-<seq>-<index>-<tag> or, without its tag, <epoch>-<seq>-<index>"
	r := d.Do(t, dt.Admin(), "GET", "/api/subscribe/admin/tags/Note", nil, "Last-Event-ID", "yesterday")
	if r.Status != 400 || !strings.Contains(string(r.Body), want) {
		t.Errorf("Last-Event-ID: yesterday: %d %s, want 400 naming %q", r.Status, r.Body, want)
	}
}

// TestWritesNameTheirDocumentsCut: an error about a document of a write
// names it by its @id cut as any echoed value is (at most its first 100
// bytes, and its length), and quoted when it holds a character a quote
// escapes (a right-to-left override); a plain short @id is named as
// sent. A 200,000-byte @id came back whole ahead of the error (and went
// to the log so), and an override reversed the rest of the message
// where a browser showed it, the console's form of a new document
// among them.
func TestWritesNameTheirDocumentsCut(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "echoids", "type Note { text: String }")
	long := "Note/" + strings.Repeat("a", 200000)
	key := "Note/" + strings.Repeat("b", 200) // valid: a key holds up to 255 bytes
	cut := func(s string) string { return `"` + s[:100] + `"… (` + strconv.Itoa(len(s)) + ` bytes)` }
	for _, c := range []struct{ body, want string }{
		{`{"@type":"Note","@id":"` + long + `","text":5}`, "document 0 (" + cut(long) + "): "},
		{`[{"@type":"Note","@id":"` + key + `"},{"@type":"Note","@id":"` + key + `"}]`, "document 1: " + cut(key) + " appears twice in the request"},
		{`{"@type":"Note","@id":"Note/a\u202eb","text":5}`, `document 0 ("Note/a\u202eb"): `},
		{`[{"@type":"Note","@id":"Note/a\u202eb"},{"@type":"Note","@id":"Note/a\u202eb"}]`, `document 1: "Note/a\u202eb" appears twice in the request`},
		{`{"@type":"Note","@id":"Note/gus","text":5}`, "document 0 (Note/gus): "},
	} {
		r := d.Do(t, dt.Admin(), "POST", "/api/document/admin/echoids", c.body)
		var e struct {
			Message string `json:"api:message"`
		}
		_ = json.Unmarshal(r.Body, &e)
		if r.Status != 400 || len(r.Body) > 1000 || !strings.HasPrefix(e.Message, c.want) || strings.ContainsRune(e.Message, '\u202e') {
			t.Errorf("%.60s: %d, %d bytes: %.400s; want 400 starting %q", c.body, r.Status, len(r.Body), e.Message, c.want)
		}
	}
}

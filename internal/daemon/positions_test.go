package daemon_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestOutOfRangePositions: a position whose change index is above
// 2,147,483,647 (no commit has more changes) is a 400 naming the index,
// on /api/changes, a REST change stream, a graphql-sse stream (header,
// parameter and extensions) and a webhook's start, never a 500 or a
// stream that stays silent; the largest index, the end of a commit, is
// answered as before.
func TestOutOfRangePositions(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "pos", "type Note { text: String }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/pos", `{"@type":"Note","@id":"Note/a","text":"a"}`)
	var page struct {
		Position string `json:"position"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/pos", nil).Body, &page); err != nil {
		t.Fatal(err)
	}
	epoch, _, _ := strings.Cut(page.Position, "-")
	bad, end := epoch+"-1-2147483648", epoch+"-1-2147483647"
	sub := `{"query":"subscription { Note_added { text } }"}`
	for _, c := range []struct {
		method, path string
		body         any
		header       []string
	}{
		{"GET", "/api/changes/admin/pos?after=" + bad, nil, nil},
		{"GET", "/api/subscribe/admin/pos/Note", nil, []string{"Last-Event-ID", bad}},
		{"GET", "/api/subscribe/admin/pos/Note?lastEventId=" + bad, nil, nil},
		{"POST", "/api/graphql/admin/pos", sub, []string{"Accept", "text/event-stream", "Content-Type", "application/json", "Last-Event-ID", bad}},
		{"POST", "/api/graphql/admin/pos", `{"query":"subscription { Note_added { text } }","extensions":{"lastEventId":"` + bad + `"}}`,
			[]string{"Accept", "text/event-stream", "Content-Type", "application/json"}},
		{"GET", "/api/graphql/admin/pos?lastEventId=" + bad + "&query=" + url.QueryEscape("subscription { Note_added { text } }"), nil, []string{"Accept", "application/x-ndjson"}},
		{"POST", "/api/webhooks/admin/pos", `{"url":"https://example.com/hook","after":"` + bad + `"}`, nil},
	} {
		r := d.Do(t, dt.Admin(), c.method, c.path, c.body, c.header...)
		if r.Status != 400 || !strings.Contains(string(r.Body), "index 2147483648 is above 2147483647") {
			t.Errorf("%s %s %v: %d %s, want 400 naming the index", c.method, c.path, c.header, r.Status, r.Body)
		}
	}
	// The end of commit 1: nothing after it yet, then commit 2.
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/pos?after="+end, nil); !strings.Contains(string(r.Body), `"commits":[]`) {
		t.Errorf("/api/changes after the end of commit 1: %s", r.Body)
	}
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/pos/Note", Header: []string{"Last-Event-ID", end}})
	st.Next() // : connected
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/pos", `{"@type":"Note","@id":"Note/b","text":"b"}`)
	if e := nextEvent(t, st); e.Subject != "Note/b" {
		t.Errorf("the stream resumed at the end of commit 1: %+v", e)
	}
}

package gqltransport_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestResumePastACommitsEnd: a subscription resumed from a position
// inside a commit past its last change (1-1 and 1-5 of a commit of one
// change, 2-0 of a schema change's commit, which has none) names no
// event: graphql-sse, NDJSON and graphql-ws refuse it before the stream
// starts, with the error /api/changes gives for it (BAD_USER_INPUT),
// never as the end of the commit (which it was taken for: the stream
// resumed after the commit). A change of commit 0 is refused as before;
// the commit's change and the ends of commits resume as before.
func TestResumePastACommitsEnd(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "ends", "type Dog { name: String! }")
	insert(t, d, "ends", dogs("a")) // commit 1: one change
	var change struct{ Commit string }
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/ends", "type Dog { name: String! age: Int }").Body, &change); err != nil || change.Commit != "2" {
		t.Fatalf("the schema change's commit: %q %v", change.Commit, err)
	}
	insert(t, d, "ends", dogs("b")) // commit 3
	read := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/ends?type=Dog", nil).Header.Get("Sluice-Position")
	epoch, _, _ := strings.Cut(read, "-")
	path := "/api/graphql/admin/ends"

	for _, c := range []struct{ pos, why string }{
		{epoch + "-1-1", "commit 1 has 1 changes, at indexes 0 to 0 (the position of its end is " + epoch + "-1-2147483647)"},
		{epoch + "-1-5", "commit 1 has 1 changes, at indexes 0 to 0 (the position of its end is " + epoch + "-1-2147483647)"},
		{epoch + "-2-0", "commit 2 has no changes (the position of its end is " + epoch + "-2-2147483647)"},
		{epoch + "-0-0", "commit 0 is none (the position before the first commit is " + epoch + "-0-2147483647)"},
	} {
		want := "position " + c.pos + " names no event of admin/ends: " + c.why
		// The same error as /api/changes.
		var rest struct {
			Message string `json:"api:message"`
		}
		r := d.Do(t, dt.Admin(), "GET", "/api/changes/admin/ends?after="+c.pos, nil)
		if err := json.Unmarshal(r.Body, &rest); err != nil || r.Status != 400 || rest.Message != want {
			t.Fatalf("/api/changes after %s: %d %s, want 400 %q", c.pos, r.Status, r.Body, want)
		}

		frames := subscribe(t, d, "ends", dogAdded, "Last-Event-ID", c.pos).Ended()
		if len(frames) != 2 || frames[0][0] != "event: next" || frames[1].String() != "event: complete\ndata:" {
			t.Fatalf("graphql-sse from %s: %q, want an error next and complete", c.pos, frames)
		}
		if r := parseResult(t, frames[0].Field("data")); len(r.Errors) != 1 || r.Errors[0].Message != want || !strings.Contains(frames[0].Field("data"), `"code":"BAD_USER_INPUT"`) {
			t.Fatalf("graphql-sse from %s: %s, want %q", c.pos, frames[0].Field("data"), want)
		}

		nd := mustOpen(t, d, dt.Admin(), http.MethodPost, path, body(dogAdded), nil, "Accept", ndjson, "Last-Event-ID", c.pos)
		if got := (sseSub{nd}).End(t); got != want {
			t.Fatalf("NDJSON from %s: %q, want %q", c.pos, got, want)
		}

		ws := mustConnect(t, d, "ends")
		ws.send(`{"id":"s","type":"subscribe","payload":{"query":"` + dogAdded + `","extensions":{"lastEventId":"` + c.pos + `"}}}`)
		if got := ws.read(); !strings.HasPrefix(got, `{"id":"s","type":"error","payload":[{"message":"`+want+`"`) {
			t.Fatalf("graphql-ws from %s: %s, want the error %q", c.pos, got, want)
		}
		_ = ws.c.CloseNow()
	}

	// What names an event resumes after it: the change of commit 1, the
	// end of commit 1 and of the schema change (b next), the position
	// before the first commit (a, then b).
	for pos, want := range map[string]string{
		epoch + "-1-0":          "b",
		epoch + "-1-2147483647": "b",
		epoch + "-2-2147483647": "b",
		epoch + "-0-2147483647": "a b",
	} {
		n := len(strings.Fields(want))
		s := subscribe(t, d, "ends", dogAdded, "Last-Event-ID", pos)
		s.connected()
		if _, data := s.nexts(n); names(data) != want {
			t.Fatalf("graphql-sse from %s: %v, want %s", pos, data, want)
		}
		s.Close()

		ws := mustConnect(t, d, "ends")
		ws.send(`{"id":"s","type":"subscribe","payload":{"query":"` + dogAdded + `","extensions":{"lastEventId":"` + pos + `"}}}`)
		var got []string
		for range n {
			m := ws.read()
			if !strings.HasPrefix(m, `{"id":"s","type":"next"`) {
				t.Fatalf("graphql-ws from %s: %s", pos, m)
			}
			got = append(got, m)
		}
		if names(got) != want {
			t.Fatalf("graphql-ws from %s: %v, want %s", pos, got, want)
		}
		_ = ws.c.CloseNow()
	}
}

// TestLiveQueryResumePastACommitsEnd: a live query resumed from a
// position inside a commit past its last change is refused with the
// error an event stream gives (BAD_USER_INPUT, then complete), as one
// ahead of the log is; before, the commits after it were judged, as from
// the end of the commit. Its change and the commit's end resume.
func TestLiveQueryResumePastACommitsEnd(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "liveends", "type Dog { name: String! }")
	insert(t, d, "liveends", dogs("a")) // commit 1: one change
	insert(t, d, "liveends", dogs("b"))
	read := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/liveends?type=Dog", nil).Header.Get("Sluice-Position")
	epoch, _, _ := strings.Cut(read, "-")
	q := `subscription { Dog { name } }`
	pos := epoch + "-1-1"
	want := "position " + pos + " names no event of admin/liveends: commit 1 has 1 changes, at indexes 0 to 0 (the position of its end is " + epoch + "-1-2147483647)"
	frames := subscribe(t, d, "liveends", q, "Last-Event-ID", pos).Ended()
	if len(frames) != 2 || frames[1].String() != "event: complete\ndata:" || !strings.Contains(frames[0].String(), `"code":"BAD_USER_INPUT"`) || !strings.Contains(frames[0].String(), want) {
		t.Fatalf("live query from %s: %q, want the error %q and complete", pos, frames, want)
	}
	for _, ok := range []string{epoch + "-1-0", epoch + "-1-2147483647"} {
		s := subscribe(t, d, "liveends", q, "Last-Event-ID", ok)
		s.connected()
		if f := s.Event(); !strings.Contains(f.String(), `{"name":"b"}`) {
			t.Fatalf("live query from %s: %q, want the current result", ok, f)
		}
		s.Close()
	}
}

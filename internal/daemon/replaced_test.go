package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// replacedFixture writes two commits to a new database db of d, commit 1
// of two notes and commit 2 of one, and returns their positions as the
// writes answer them (tagged with their commits).
func replacedFixture(t *testing.T, d *dt.Daemon, db string) (w1, w2 sluice.Position) {
	t.Helper()
	d.CreateDatabase(t, db, "type Note { text: String }")
	var ws []sluice.Position
	for _, body := range []string{`[{"@type":"Note","@id":"a","text":"A"},{"@type":"Note","@id":"b","text":"B"}]`, `{"@type":"Note","@id":"c","text":"C"}`} {
		pos := d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/"+db, body).Header.Get("Sluice-Position")
		p, err := sluice.ParsePosition(pos)
		if err != nil || p.Tag == "" {
			t.Fatalf("a write's position %q: %v, want a tagged position", pos, err)
		}
		ws = append(ws, p)
	}
	return ws[0], ws[1]
}

// replaceCommit makes commit seq of database db of d another commit of
// that number, as a failover to a standby that had not received it makes
// it once a new commit takes its number (with a real standby:
// TestFailoverAsynchronousLossRefilledIsExplicit): its stamp changes,
// here its time, as TestReadLogFindsCommitReplaced changes it. The
// counter row's copy of the newest commit's stamp changes with it when
// the commit is the newest, as the new commit's statement sets it.
func replaceCommit(t *testing.T, d *dt.Daemon, db string, seq int64) {
	t.Helper()
	ctx := context.Background()
	pg, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	var n int64
	err = pg.QueryRow(ctx, `WITH c AS (UPDATE sluice.commits SET committed_at = committed_at + interval '1 second'
			WHERE seq = $1 AND db_id = (SELECT id FROM sluice.databases WHERE org = 'admin' AND name = $2)
			RETURNING db_id, seq, uid, committed_at),
		h AS (UPDATE sluice.commit_counters h SET last_committed_at = c.committed_at
			FROM c WHERE h.db_id = c.db_id AND h.last_seq = c.seq AND h.stamped_seq = c.seq AND h.last_uid = c.uid)
		SELECT count(*) FROM c`, seq, db).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("replacing commit %d of %s: %d rows, %v", seq, db, n, err)
	}
}

// replacedText is what the error of a read from position p of
// admin/<db>, given as param, says once its commit was replaced.
func replacedText(param string, p sluice.Position, db string) string {
	return fmt.Sprintf("%s %s names a commit the log of admin/%s no longer holds: commit %d of the log is another commit", param, p, db, p.Seq)
}

// TestChangesPositionsOfAReplacedCommitAreGone: /api/changes and
// /api/log hand out positions tagged with their commits, as event ids
// and writes' positions are; a page of /api/changes after a tagged
// position of a commit whose number another commit took (the client's
// was lost in a failover) is 410 api:Gone naming the position and the
// commit, before any change. Before, the positions were numbers alone,
// and a page after a tagged one read on from the other commit,
// silently. An untagged position (made by older versions) reads on,
// unchecked; one of a commit the log still holds reads on.
func TestChangesPositionsOfAReplacedCommitAreGone(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	w1, w2 := replacedFixture(t, d, "refill")
	inside := sluice.Position{Epoch: w2.Epoch, Seq: 2, Index: 0, Tag: w2.Tag}

	var page changesPage
	r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/refill?after=0", nil)
	if err := json.Unmarshal(r.Body, &page); err != nil || len(page.Commits) != 2 {
		t.Fatalf("the changes: %v: %s", err, r.Body)
	}
	want := []string{
		sluice.Position{Epoch: w1.Epoch, Seq: 1, Index: 0, Tag: w1.Tag}.String(),
		sluice.Position{Epoch: w1.Epoch, Seq: 1, Index: 1, Tag: w1.Tag}.String(),
		inside.String(),
	}
	var got []string
	for _, c := range page.Commits {
		for _, ch := range c.Changes {
			got = append(got, ch.Position)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") || page.Next != w2.String() {
		t.Fatalf("/api/changes positions %v, next %s; want %v, next %s (tagged with their commits)", got, page.Next, want, w2)
	}
	var log []struct {
		Position string `json:"position"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/refill", nil).Body, &log); err != nil || len(log) != 2 || log[0].Position != inside.String() {
		t.Fatalf("/api/log: %v %+v, want the newest commit's last change at %s", err, log, inside)
	}

	replaceCommit(t, d, "refill", 2)
	for _, p := range []sluice.Position{w2, inside} {
		r := d.Do(t, dt.Admin(), "GET", "/api/changes/admin/refill?after="+url.QueryEscape(p.String()), nil)
		if text := replacedText("position", p, "refill"); r.Status != 410 || !bytes.Contains(r.Body, []byte("api:Gone")) || !bytes.Contains(r.Body, []byte(text)) {
			t.Errorf("/api/changes after %s, of the replaced commit 2: %d %s; want 410 api:Gone saying %q", p, r.Status, r.Body, text)
		}
	}
	// Unchecked without a tag: the end of commit 2, of any commit 2.
	if r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/refill?after="+url.QueryEscape(w2.Untagged().String()), nil); !bytes.Contains(r.Body, []byte(`"commits":[]`)) {
		t.Errorf("/api/changes after %s: %s", w2.Untagged(), r.Body)
	}
	// Commit 1 is the log's: the page holds commit 2 as the log has it.
	r = d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/refill?after="+url.QueryEscape(w1.String()), nil)
	if err := json.Unmarshal(r.Body, &page); err != nil || len(page.Commits) != 1 || page.Commits[0].ID != "2" || dt.Untag(page.Next) != w2.Untagged().String() || page.Next == w2.String() {
		t.Errorf("/api/changes after %s: %v %s; want commit 2, tagged anew", w1, err, r.Body)
	}
}

// TestPastPositionsOfAReplacedCommitAreGone: a read as of a tagged
// position of a commit whose number another commit took (REST as_of,
// GraphQL asOf, /api/diff's from, /api/history's before) is 410 api:Gone
// (POSITION_EXPIRED in GraphQL) naming the position and the commit, as a
// resumed stream's is; before, it read the other commit's state as the
// client's. Untagged positions read, unchecked, and so do tagged ones of
// commits the log holds.
func TestPastPositionsOfAReplacedCommitAreGone(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	w1, w2 := replacedFixture(t, d, "pastrefill")
	inside := sluice.Position{Epoch: w2.Epoch, Seq: 2, Index: 0, Tag: w2.Tag}
	replaceCommit(t, d, "pastrefill", 2)

	for _, p := range []sluice.Position{w2, inside} {
		q := url.QueryEscape(p.String())
		for _, c := range []struct{ param, path string }{
			{"as_of", "/api/document/admin/pastrefill?type=Note&as_of=" + q},
			{"as_of", "/api/document/admin/pastrefill?id=Note/a&as_of=" + q},
			{"from", "/api/diff/admin/pastrefill?from=" + q},
			{"before", "/api/history/admin/pastrefill?id=Note/a&before=" + q},
		} {
			r := d.Do(t, dt.Admin(), "GET", c.path, nil)
			if text := replacedText(c.param, p, "pastrefill"); r.Status != 410 || !bytes.Contains(r.Body, []byte("api:Gone")) || !bytes.Contains(r.Body, []byte(text)) {
				t.Errorf("%s: %d %s; want 410 api:Gone saying %q", c.path, r.Status, r.Body, text)
			}
		}
		msg, code := gqlError(t, d, dt.Admin(), "pastrefill", `{ Note(asOf: "`+p.String()+`") { _id } }`)
		if text := replacedText("asOf", p, "pastrefill"); code != "POSITION_EXPIRED" || !strings.Contains(msg, text) {
			t.Errorf("GraphQL asOf %s: %s %s; want POSITION_EXPIRED saying %q", p, code, msg, text)
		}
	}
	for _, p := range []sluice.Position{w2.Untagged(), w1} {
		r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/pastrefill?type=Note&as_list=true&as_of="+url.QueryEscape(p.String()), nil)
		if r.Header.Get("Sluice-Position") != p.String() {
			t.Errorf("as of %s: answers position %s", p, r.Header.Get("Sluice-Position"))
		}
		if got := gqlData(t, d, dt.Admin(), "pastrefill", `{ Note(asOf: "`+p.String()+`") { _id } }`); !strings.Contains(got, "Note/a") {
			t.Errorf("GraphQL as of %s: %s", p, got)
		}
	}
}

// TestWebhookAfterAReplacedCommitIsGone: a webhook made, resumed or
// replayed after a tagged position of a commit whose number another
// commit took is refused with 410 api:Gone naming the position and the
// commit; before, it was accepted, and delivered from the other commit
// on. An untagged position is accepted, unchecked.
func TestWebhookAfterAReplacedCommitIsGone(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	_, w2 := replacedFixture(t, d, "hookrefill")
	inside := sluice.Position{Epoch: w2.Epoch, Seq: 2, Index: 0, Tag: w2.Tag}
	var h struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/hookrefill", `{"url":"https://example.com/hook","after":"`+w2.String()+`"}`).Body, &h); err != nil {
		t.Fatal(err)
	}
	replaceCommit(t, d, "hookrefill", 2)
	for _, p := range []sluice.Position{w2, inside} {
		body := `{"url":"https://example.com/hook","after":"` + p.String() + `"}`
		for _, c := range []struct{ path, body string }{
			{"/api/webhooks/admin/hookrefill", body},
			{fmt.Sprintf("/api/webhooks/admin/hookrefill/%d/resume", h.ID), `{"after":"` + p.String() + `"}`},
			{fmt.Sprintf("/api/webhooks/admin/hookrefill/%d/replay", h.ID), `{"after":"` + p.String() + `"}`},
		} {
			r := d.Do(t, dt.Admin(), "POST", c.path, c.body)
			if text := replacedText("after", p, "hookrefill"); r.Status != 410 || !bytes.Contains(r.Body, []byte("api:Gone")) || !bytes.Contains(r.Body, []byte(text)) {
				t.Errorf("POST %s after %s: %d %s; want 410 api:Gone saying %q", c.path, p, r.Status, r.Body, text)
			}
		}
	}
	d.MustDo(t, 200, dt.Admin(), "POST", fmt.Sprintf("/api/webhooks/admin/hookrefill/%d/replay", h.ID), `{"after":"`+w2.Untagged().String()+`"}`)
}

// TestReadPositionsOfAReplacedCommitAreGone: the position a read
// reflects (Sluice-Position, GraphQL extensions.position, /api/changes'
// "position") is tagged with the newest commit it saw, as the write's
// position of that commit is; a client that reads on from it after a
// failover that lost the commit, a new commit having taken its number,
// is refused with 410 api:Gone naming it, as from an event id, and a
// live query resumed from it sends its current result (at the head: the
// commit read is not the client's). Before, a read's position was
// numbers alone, accepted unchecked, a page from it went on silently
// without the new commit, and a live query resumed from the head sent
// only the position, as if the client's result were current.
func TestReadPositionsOfAReplacedCommitAreGone(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	_, w2 := replacedFixture(t, d, "readrefill")
	var page changesPage
	r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/readrefill?after=2", nil)
	if err := json.Unmarshal(r.Body, &page); err != nil || page.Position != w2.String() || r.Header.Get("Sluice-Position") != w2.String() {
		t.Fatalf("/api/changes reflects %s (header %s), want %s, tagged: %v", page.Position, r.Header.Get("Sluice-Position"), w2, err)
	}
	read := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/readrefill?type=Note", nil).Header.Get("Sluice-Position")
	one := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/readrefill?id=Note/a", nil).Header.Get("Sluice-Position")
	g := gqlQuery(t, d, dt.Admin(), "readrefill", `{ Note { _id } }`)
	if read != w2.String() || one != w2.String() || g.Extensions.Position != w2.String() {
		t.Fatalf("reads reflect %s (listing), %s (by id), %s (GraphQL); want %s, the write's position: tagged", read, one, g.Extensions.Position, w2)
	}

	const live = `query @live { Note { _id } }`
	body, _ := json.Marshal(map[string]string{"query": live})
	resume := func() dt.Frame {
		t.Helper()
		s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/readrefill", Body: string(body),
			Header: []string{"Accept", "text/event-stream", "Last-Event-ID", read}})
		defer s.Close()
		if f := s.Next(); f.String() != ": connected" {
			t.Fatalf("%s: first frame %s", live, f)
		}
		return s.Event()
	}
	if f := resume(); f.String() != "id: "+read {
		t.Fatalf("a live query resumed from the read's position, unchanged: %q, want only its id", f)
	}

	replaceCommit(t, d, "readrefill", 2)
	r = d.Do(t, dt.Admin(), "GET", "/api/changes/admin/readrefill?after="+url.QueryEscape(read), nil)
	if text := replacedText("position", w2, "readrefill"); r.Status != 410 || !bytes.Contains(r.Body, []byte("api:Gone")) || !bytes.Contains(r.Body, []byte(text)) {
		t.Errorf("/api/changes after the read's position %s: %d %s; want 410 api:Gone saying %q", read, r.Status, r.Body, text)
	}
	if f := resume(); f.Field("event") != "next" || !strings.Contains(f.Field("data"), `"Note/c"`) || dt.Untag(f.Field("id")) != w2.Untagged().String() || f.Field("id") == read {
		t.Errorf("a live query resumed from the read's position %s, of the replaced commit: %q, want the current result at commit 2 as the log has it", read, f)
	}
}

// TestLiveQueryFromAReplacedCommitIsRead: a live query resumed from a
// tagged position (a write's, an event's) whose commit, not the newest,
// another commit replaced sends its current result rather than judging
// the new log as if it followed from the client's (changefeed.Hub.Scan
// checks the tag in its first read).
func TestLiveQueryFromAReplacedCommitIsRead(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	w1, w2 := replacedFixture(t, d, "liverefill")
	read := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/liverefill?type=Note", nil).Header.Get("Sluice-Position")
	if read != w2.String() {
		t.Fatalf("a read reflects %s, want %s, the write's position", read, w2)
	}

	// Commit 2 (Note/c, text C) cannot change this result: judged by the
	// log alone, a resume from commit 1 sends only an id.
	const live = `query @live { Note(filter: {text: {eq: "A"}}) { _id } }`
	body, _ := json.Marshal(map[string]string{"query": live})
	resume := func(from sluice.Position) dt.Frame {
		t.Helper()
		s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/liverefill", Body: string(body),
			Header: []string{"Accept", "text/event-stream", "Last-Event-ID", from.String()}})
		defer s.Close()
		if f := s.Next(); f.String() != ": connected" {
			t.Fatalf("%s: first frame %s", live, f)
		}
		return s.Event()
	}
	if f := resume(w2); f.String() != "id: "+read {
		t.Fatalf("a live query resumed from the write's position, unchanged: %q, want only its id", f)
	}
	replaceCommit(t, d, "liverefill", 1)
	if f := resume(w1); f.Field("event") != "next" || !strings.Contains(f.Field("data"), `"Note/a"`) || f.Field("id") != read {
		t.Errorf("a live query resumed from %s, of the replaced commit 1: %q, want the current result at commit 2 as the log has it", w1, f)
	}
}

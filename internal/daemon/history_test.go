package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestChangesPagesSplitALargeCommit reads a commit of 300 documents, far
// larger than the page budget, through /api/changes: pages hold at most
// the budget of images, one ends inside the commit, each next position
// resumes right after the last change returned, the Link header names the
// next page, and the pages together hold every change once, in order.
func TestChangesPagesSplitALargeCommit(t *testing.T) {
	t.Parallel()
	const budget = 4096
	d := dt.Start(t, func(c *config.Config) { c.HistoryPageBytes = budget })
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	var body strings.Builder
	for i := range 300 {
		fmt.Fprintf(&body, `{"@type":"Person","@id":"p%03d","name":"%s"}`+"\n", i, strings.Repeat("n", i%50))
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people", body.String(), "Content-Type", "application/x-ndjson")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people", `{"@type":"Person","@id":"last","name":"L"}`)

	var positions, ids []string
	splitInside := false
	after := "0"
	pages := 0
	for {
		r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/people?limit=1000&after="+url.QueryEscape(after), nil)
		var page changesPage
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatalf("page %d: %v: %s", pages, err, r.Body)
		}
		pages++
		images, n := 0, 0
		for _, c := range page.Commits {
			for _, ch := range c.Changes {
				for _, img := range []json.RawMessage{ch.Before, ch.After} {
					if string(img) != "null" {
						images += len(img)
					}
				}
				n++
				positions = append(positions, ch.Position)
				ids = append(ids, ch.ID)
			}
			if len(c.Changes) < c.ChangesCount && c.Changes[len(c.Changes)-1].Position == page.Next {
				splitInside = true
			}
		}
		if images > budget && n > 1 {
			t.Fatalf("page %d holds %d bytes of images in %d changes; the budget is %d", pages, images, n, budget)
		}
		link := r.Header.Get("Link")
		if page.More != (link != "") {
			t.Fatalf("page %d: more %v but Link %q", pages, page.More, link)
		}
		if !page.More {
			break
		}
		if want := `<` + "/api/changes/admin/people?after=" + url.QueryEscape(page.Next) + `&limit=1000>; rel="next"`; link != want {
			t.Fatalf("page %d: Link %s, want %s", pages, link, want)
		}
		after = page.Next
	}
	if pages < 5 || !splitInside {
		t.Fatalf("%d pages (split inside a commit: %v): the commit was not split by the budget", pages, splitInside)
	}
	if len(ids) != 301 {
		t.Fatalf("%d changes read, want 301", len(ids))
	}
	epoch, _, _ := strings.Cut(positions[0], "-")
	for i := range 300 {
		if dt.Untag(positions[i]) != fmt.Sprintf("%s-1-%d", epoch, i) || ids[i] != fmt.Sprintf("Person/p%03d", i) {
			t.Fatalf("change %d is %s %s", i, positions[i], ids[i])
		}
	}
	if dt.Untag(positions[300]) != epoch+"-2-0" || ids[300] != "Person/last" {
		t.Fatalf("the last change is %s %s", positions[300], ids[300])
	}

	// A stream position (an SSE event id) resumes inside the commit.
	var page changesPage
	r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/people?after="+epoch+"-1-137", nil)
	if err := json.Unmarshal(r.Body, &page); err != nil || len(page.Commits) == 0 || dt.Untag(page.Commits[0].Changes[0].Position) != epoch+"-1-138" {
		t.Fatalf("after change 137: %v %.300s", err, r.Body)
	}
	// At the end, the next position is the one given, and the position
	// read is the end of the newest commit.
	r = d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/people?after=2", nil)
	head := r.Header.Get("Sluice-Position")
	if string(r.Body) != `{"next":"2","more":false,"position":"`+head+`","commits":[]}`+"\n" || dt.Untag(head) != epoch+"-2-2147483647" || head == dt.Untag(head) {
		t.Fatalf("after the last commit: %s", r.Body)
	}
}

// TestLogPagesByBytes: a page of /api/log stops at the page budget of
// commit text, and its Link header names the next page until the oldest.
func TestLogPagesByBytes(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.HistoryPageBytes = 4096 })
	d.CreateDatabase(t, "people", "type Person { name: String! }")
	long := strings.Repeat("m", 3000)
	for i := range 3 {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/people?message="+long, fmt.Sprintf(`{"@type":"Person","@id":"p%d","name":"P"}`, i))
	}
	var ids []string
	path := "/api/log/admin/people?count=10"
	for pages := 1; ; pages++ {
		r := d.MustDo(t, 200, dt.Admin(), "GET", path, nil)
		var log []struct {
			ID      string `json:"id"`
			Message string `json:"message"`
			Changes int    `json:"changes"`
		}
		if err := json.Unmarshal(r.Body, &log); err != nil {
			t.Fatal(err)
		}
		if len(log) != 1 || log[0].Message != long || log[0].Changes != 1 {
			t.Fatalf("page %d holds %d commits: %.200s", pages, len(log), r.Body)
		}
		ids = append(ids, log[0].ID)
		link := r.Header.Get("Link")
		if link == "" {
			break
		}
		next, ok := strings.CutSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		if !ok || next != "/api/log/admin/people?before="+log[0].ID+"&count=10" {
			t.Fatalf("page %d: Link %s", pages, link)
		}
		path = next
	}
	if strings.Join(ids, ",") != "3,2,1" {
		t.Fatalf("commits %v, want 3,2,1", ids)
	}
}

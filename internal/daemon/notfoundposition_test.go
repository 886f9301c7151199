package daemon_test

import (
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestNotFoundReadAnswersPosition: a REST read of a document that does
// not exist (404) is a read like any, and answers the position it
// reflects in Sluice-Position, as a listing and GraphQL's
// Note(id: …) answering [] do: a client that finds no document, then
// follows from that position, receives the document's creation made in
// between. Without it the 404 answered no position, and a client
// following from the present would miss that creation. A read as of a
// position before the document answers that position.
func TestNotFoundReadAnswersPosition(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "nfpos", "type Note { text: String }")
	before := d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/nfpos", `{"@type":"Note","@id":"Note/a","text":"a"}`).Header.Get("Sluice-Position")
	listed := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/nfpos?type=Note", nil).Header.Get("Sluice-Position")
	missing := d.MustDo(t, 404, dt.Admin(), "GET", "/api/document/admin/nfpos?id=Note/b", nil).Header.Get("Sluice-Position")
	if missing == "" || missing != listed {
		t.Fatalf("404 of Note/b: Sluice-Position %q, want the listing's %q", missing, listed)
	}
	// Note/b is created after the read and before the stream opens.
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/nfpos", `{"@type":"Note","@id":"Note/b","text":"b"}`)
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/nfpos/Note", Header: []string{"Last-Event-ID", missing}})
	st.Next() // : connected
	if e := nextEvent(t, st); e.Subject != "Note/b" || e.Kind != "entity.create" {
		t.Errorf("the stream resumed from the 404's position: %+v, want Note/b's creation", e)
	}
	if got := d.MustDo(t, 404, dt.Admin(), "GET", "/api/document/admin/nfpos?id=Note/b&as_of="+before, nil).Header.Get("Sluice-Position"); got != before {
		t.Errorf("404 of Note/b as of %s: Sluice-Position %q, want that position", before, got)
	}
}

package daemon_test

import (
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestPositionOfAnotherDatabase: a position of another database given to
// /api/changes is refused naming what it can be, as a read as_of one is:
// another database's, or an earlier database's of that name (a position
// carries only its database's epoch, and a deleted database's is not
// kept, so the two cannot be told apart). It was answered as "from
// another incarnation" of the database asked, which it is not.
func TestPositionOfAnotherDatabase(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "left", "type Note { text: String! }")
	d.CreateDatabase(t, "right", "type Note { text: String! }")
	pos := d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/right", `{"@type":"Note","text":"x"}`).Header.Get("Sluice-Position")
	if pos == "" {
		t.Fatal("no Sluice-Position")
	}
	r := d.Do(t, dt.Admin(), "GET", "/api/changes/admin/left?after="+pos, nil)
	if r.Status != 410 {
		t.Fatalf("status %d, want 410; body %s", r.Status, r.Body)
	}
	typ, msg := errBody(t, r)
	want := "position " + pos + " is not a position of admin/left: it is another database's, or an earlier database's of that name; re-read the current state"
	if typ != "api:Gone" || msg != want {
		t.Fatalf("error %s %q, want api:Gone %q", typ, msg, want)
	}
}

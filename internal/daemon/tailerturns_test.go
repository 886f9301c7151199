package daemon_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestLargeLogOfOneDatabaseHoldsUpNoOther: a role granted SQL writes on
// one database commits 100,000 changes at once (as it may, and as often
// as it likes), and a commit of another database is made while a
// replica's change feed hands the large one to the hub. The other
// database's subscriber gets its event before the feed is done with the
// large commit: the feed takes the databases with new commits in turns,
// a read of each (at most 256 commits, about 64 KiB of changes) a turn.
// It read a database's log until it found no more, and every other
// database's streams waited meanwhile, for as long as the role kept
// committing.
func TestLargeLogOfOneDatabaseHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "flood", "type Note { n: Int }")
	d.CreateDatabase(t, "other", "type Note { n: Int }")
	w := newSQLWriter(t, d, "flood")
	published := func() float64 {
		m := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
		return dt.MetricValue(m, "sluice_stream_events_published_total", `database="`+strconv.FormatInt(dbID(t, d, "flood"), 10)+`"`)
	}
	// A subscriber of the flooded database (of its deletes: it is sent
	// nothing here), so that the feed reads its log.
	floodStream := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/flood/Note?ops=delete"})
	floodStream.Next() // : connected
	otherStream := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/other/Note"})
	otherStream.Next()

	const n = 100000
	sqlExec(t, w.url, fmt.Sprintf("INSERT INTO %s (n) SELECT g FROM generate_series(1, %d) g", w.table("Note"), n))
	eventually.True(t, time.Minute, "the feed hands the large commit on", func() bool { return published() > 0 })
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/other", `{"@type":"Note","@id":"Note/b","n":1}`)
	if e := nextEvent(t, otherStream); e.Subject != "Note/b" {
		t.Fatalf("the other database's event: %+v", e)
	}
	if p := published(); p >= n {
		t.Errorf("the other database's event came once the feed had handed on all %.0f changes of the large commit: it waited for them", p)
	}
}

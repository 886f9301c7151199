package gqltransport_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestLiveBoundaryHoldsNoLongSortKey: a live query listing the first
// documents in the order of a field keeps its result's last row's sort
// keys between results (graph.Boundary), and the order field is read for
// them even when the query does not select it. 20 live queries of an
// ordinary user, `{ bN: Note(orderBy: {text: ASC}, limit: 1) { _id } }`,
// over one Note whose text is 3 MB, hold about what the same ones with
// limit 2 hold, which read the same and whose result is not full (it has
// no boundary): a sort key that long is not kept (found by review: the
// whole last row was kept, about 60 MB more of heap here, while
// live_bytes_per_user, 4 MiB, counted 20 results of a few dozen bytes).
// Not parallel: it measures the process's heap.
func TestLiveBoundaryHoldsNoLongSortKey(t *testing.T) {
	d := dt.Start(t, func(c *config.Config) { c.LiveBytesPerUser = 4 << 20 })
	d.CreateDatabase(t, "lb", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/lb", `{"user":"rita","role":"read"}`)
	rita := dt.Basic("rita", "rita-password")
	insert(t, d, "lb", fmt.Sprintf(`{"@type":"Note","@id":"n","text":%q}`, strings.Repeat("x", 3<<20)))

	const n = 20
	// open opens the n live queries query names (with %d), each once
	// its first result came, and returns them and the heap they took.
	open := func(query string) (int64, []*stream) {
		before := heapNow().heap
		var streams []*stream
		for i := range n {
			s := mustOpen(t, d, rita, http.MethodPost, "/api/graphql/admin/lb",
				body(fmt.Sprintf(query, i)), nil, "Accept", sse)
			s.connected()
			s.nexts(1)
			streams = append(streams, s)
		}
		return heapNow().heap - before, streams
	}
	closeAll := func(streams []*stream) {
		for _, s := range streams {
			s.Close()
		}
	}
	// Each of the others warms the server's caches and pools as the
	// next one needs them: the measures are of what stays.
	_, warm := open(`query @live { w%d: Note(orderBy: {text: ASC}, limit: 1) { _id } }`)
	closeAll(warm)
	control, notFull := open(`query @live { a%d: Note(orderBy: {text: ASC}, limit: 2) { _id } }`)
	closeAll(notFull)
	held, full := open(`query @live { b%d: Note(orderBy: {text: ASC}, limit: 1) { _id } }`)
	defer closeAll(full)
	t.Logf("%d live queries hold %d KiB of heap with limit 1 (full), %d KiB with limit 2", n, held>>10, control>>10)
	// Keeping the row (or its sort key) would be 60 MB more; 20 MB
	// leaves the noise of a loaded machine room.
	if held-control > 20<<20 {
		t.Errorf("%d live queries whose results are a few dozen bytes each, ordered by a 3 MB text, hold %d MiB more full (limit 1) than not (limit 2): the result's last row, or its sort key, is kept, past live_bytes_per_user (4 MiB)", n, (held-control)>>20)
	}
}

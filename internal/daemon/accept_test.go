package daemon_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestLongAcceptHeadersCostLittle: anonymous requests whose Accept header
// lists as many media ranges as max_header_bytes (16 KiB) holds are
// answered 401 having cost little. Found by review: every range was
// parsed, each into a map of its parameters, several times a request
// (which protocol it asks for, the shape of its answer): 1 MB of garbage
// and a millisecond of a core each time, about 2 MB a request, sent by
// anyone. What the process allocated while the daemon answered them is
// counted, not weighed after a GC: the cost was garbage. Not parallel:
// the process's allocations are the daemon's and this test's alone.
func TestLongAcceptHeadersCostLittle(t *testing.T) {
	d := dt.Start(t)
	accept := "application/json, " + strings.Repeat("a/b;q=0, ", 1800)
	const requests = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range requests {
		for _, path := range []string{"/api/graphql/admin/any", "/api/document/admin/any"} {
			if r := d.Do(t, dt.NoAuth(), "GET", path, nil, "Accept", accept); r.Status != http.StatusUnauthorized {
				t.Fatalf("GET %s: %d %s, want 401", path, r.Status, r.Body)
			}
		}
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d anonymous requests with an Accept header of %d bytes: %d KiB allocated", 2*requests, len(accept), allocated>>10)
	if allocated > 2*requests*256<<10 {
		t.Errorf("%d anonymous requests with an Accept header of %d bytes allocated %d KiB, want under 256 KiB each", 2*requests, len(accept), allocated>>10)
	}
}

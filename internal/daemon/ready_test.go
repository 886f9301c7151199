package daemon_test

import (
	"net/http"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestReadyOnceServing: once the daemon serves (Started, the log line
// "sluice is serving"), /readyz answers 200 at once. A probe that came
// while Sluice was starting waited in the listen queue and was answered
// 503 "not ready" as serving began, the change feed's first read of the
// log still under way: a readiness probe or `sluice healthcheck` made
// during a start failed although nothing was wrong.
func TestReadyOnceServing(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	if r := d.Do(t, dt.NoAuth(), http.MethodGet, "/readyz", nil); r.Status != http.StatusOK {
		t.Fatalf("GET /readyz as serving began: %d %s, want 200", r.Status, r.Body)
	}
}

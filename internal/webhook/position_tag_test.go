package webhook_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestWebhookPositionIsTagged: a webhook's position carries its commit's
// tag, as the position of a write, a read or an event does, so that a
// client that takes it elsewhere (a stream's Last-Event-ID, an as_of
// read, a resume) keeps the check for a commit lost in a failover. It
// was shown as <epoch>-<seq>-<index> alone, made, read, listed and
// moved.
func TestWebhookPositionIsTagged(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "tagged", personSchema)
	var wrote struct {
		Position string `json:"position"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/tagged", `{"@type":"Person","name":"Ann"}`).Body, &wrote); err != nil {
		t.Fatal(err)
	}
	var made struct {
		ID       int64  `json:"id"`
		Position string `json:"position"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/tagged", `{"url":"https://example.com/hook"}`).Body, &made); err != nil {
		t.Fatal(err)
	}
	if made.Position != wrote.Position {
		t.Errorf("made: position %s, want the newest commit's %s", made.Position, wrote.Position)
	}
	if got := status(t, d, "tagged", made.ID)["position"]; got != wrote.Position {
		t.Errorf("read: position %v, want %s", got, wrote.Position)
	}
	var list []struct {
		Position string `json:"position"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/webhooks/admin/tagged", nil).Body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Position != wrote.Position {
		t.Errorf("listed: %+v, want position %s", list, wrote.Position)
	}
	// Moved back to commit 0, which has no stamp: untagged.
	epoch, _, _ := strings.Cut(wrote.Position, "-")
	zero := epoch + "-0-2147483647"
	d.MustDo(t, 200, dt.Admin(), "POST", hookPath("tagged", made.ID, "/pause"), nil)
	d.MustDo(t, 200, dt.Admin(), "POST", hookPath("tagged", made.ID, "/replay"), fmt.Sprintf(`{"after":%q}`, zero))
	if got := status(t, d, "tagged", made.ID)["position"]; got != zero {
		t.Errorf("replayed from commit 0: position %v", got)
	}
}

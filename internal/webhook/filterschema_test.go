package webhook_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestFilterThatNoLongerFitsPausesARunningWebhook: a forced schema change
// that drops the field a webhook's filter tests pauses the webhook
// failing before the first commit the filter would judge by the new
// schema, whether its loop was running at the change or started after
// it. A running loop went on with the filter of the old schema: the
// events after the change matched nothing, and its position moved past
// them, active, without a word.
func TestFilterThatNoLongerFitsPausesARunningWebhook(t *testing.T) {
	t.Parallel()
	r := startGoReceiver(t)
	d := dt.Start(t, func(c *config.Config) { c.WebhookAllowNetworks = loopback })
	d.CreateDatabase(t, "adults", personSchema)
	h := createHook(t, d, nil, "adults", "", fmt.Sprintf(`{"url":%q,"classes":["Person"],"filter":{"age":{"ge":18}}}`, r.srv.URL+"/hook"))
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/adults", `{"@type":"Person","@id":"a","name":"a","age":30}`)
	if b := r.next(t); !strings.Contains(b, `"Person/a"`) {
		t.Fatalf("the event of a: %s", b)
	}
	// Recorded after the receiver answered.
	delivered := waitStatus(t, d, "adults", h.ID, 30*time.Second, func(m map[string]any) bool { return m["delivered"] == 1.0 })["position"].(string)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/adults?force=true", "type Person { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/adults", `{"@type":"Person","@id":"b","name":"b"}`)
	m := waitStatus(t, d, "adults", h.ID, 30*time.Second, func(m map[string]any) bool { return m["state"] != "active" })
	if m["state"] != "failing" || !strings.Contains(m["status_message"].(string), "no longer fit the schema") {
		t.Fatalf("after the filter's field was dropped: state %v, message %q", m["state"], m["status_message"])
	}
	if m["position"] != delivered {
		t.Fatalf("paused at %v, want %s: the last event delivered (nothing after it may be passed)", m["position"], delivered)
	}
}

package webhook_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestNullSettingsSetTheDefault: null for a setting in a change sets it
// back to what a creation without it has, as null does for filter:
// classes null is every class again, ops all three, batch event,
// description empty; url, which has no default, is refused (400 naming
// it). Each null was taken as the setting left out: the change answered
// 200 and kept it, and a webhook of some classes could be made to
// deliver every class again only by making a new one.
func TestNullSettingsSetTheDefault(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "nulls", "type Person { name: String! } type Pet { name: String! }")
	h := createHook(t, d, nil, "nulls", "", `{"url":"https://example.com/hook","classes":["Person"],"ops":["create"],"batch":"commit","description":"people"}`)
	one := fmt.Sprintf("/api/webhooks/admin/nulls/%d", h.ID)
	res := d.MustDo(t, 200, dt.Admin(), "PATCH", one, `{"classes":null,"ops":null,"batch":null,"description":null}`)
	var got map[string]any
	if err := json.Unmarshal(res.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got["classes"] != nil || fmt.Sprint(got["ops"]) != "[create update delete]" || got["batch"] != "event" || got["description"] != "" {
		t.Errorf("after a change of classes, ops, batch and description to null: %s; want the defaults (every class, every operation, event, no description)", res.Body)
	}
	res = d.Do(t, dt.Admin(), "PATCH", one, `{"url":null}`)
	if res.Status != 400 || !strings.Contains(string(res.Body), "url") {
		t.Errorf("a change of url to null: %d %s, want 400 naming url", res.Status, res.Body)
	}
	if res := d.Do(t, dt.Admin(), "POST", "/api/webhooks/admin/nulls", `{"url":null}`); res.Status != 400 || !strings.Contains(string(res.Body), "url is required") {
		t.Errorf("a webhook made with url null: %d %s, want 400 saying url is required", res.Status, res.Body)
	}
}

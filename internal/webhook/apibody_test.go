package webhook_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestWebhookRequestsRefuseWhatTheyDoNotTake: a pause or a deletion of a
// webhook with a body other than none or {} is a 400 naming what it
// carries, and changes nothing; an operation given twice in ops is a 400
// naming it, as a class given twice is (found by review: the pause and
// the deletion took any body and ignored it, so a client that sent
// {"after": …} to a pause believed it applied, and ops given twice were
// dropped without a word).
func TestWebhookRequestsRefuseWhatTheyDoNotTake(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, func(c *config.Config) { c.WebhookAllowNetworks = loopback })
	d.CreateDatabase(t, "bodies", personSchema)
	h := createHook(t, d, nil, "bodies", "", `{"url":"http://127.0.0.1:9/hook"}`)
	one := fmt.Sprintf("/api/webhooks/admin/bodies/%d", h.ID)
	refused := func(method, path, body, want string) {
		t.Helper()
		res := d.Do(t, dt.Admin(), method, path, body)
		var e struct {
			Message string `json:"api:message"`
		}
		_ = json.Unmarshal(res.Body, &e)
		if res.Status != 400 || !strings.Contains(e.Message, want) {
			t.Errorf("%s %s %s: %d %s, want 400 naming %q", method, path, body, res.Status, res.Body, want)
		}
	}
	refused("POST", one+"/pause", `{"after":"0"}`, `pausing a webhook takes no options: send no body, or {} (unknown field "after")`)
	refused("POST", one+"/pause", `pause`, "pausing a webhook takes no options")
	refused("POST", one+"/pause", `{} {}`, "unexpected data after the JSON body")
	refused("DELETE", one, `{"force":true}`, `deleting a webhook takes no options: send no body, or {} (unknown field "force")`)
	if st := status(t, d, "bodies", h.ID); st["state"] != "active" {
		t.Fatalf("after refused requests: state %v, want active", st["state"])
	}
	refused("POST", "/api/webhooks/admin/bodies", `{"url":"http://127.0.0.1:9/hook","ops":["create","update","create"]}`, `ops[2]: "create" is given twice`)
	refused("PATCH", one, `{"ops":["delete","delete"]}`, `ops[1]: "delete" is given twice`)
	refused("POST", "/api/webhooks/admin/bodies", `{"url":"http://127.0.0.1:9/hook","classes":["Person","Person"]}`, `classes[1]: "Person" is given twice`)
	if st := status(t, d, "bodies", h.ID); fmt.Sprint(st["ops"]) != "[create update delete]" {
		t.Errorf("after a refused change: ops %v", st["ops"])
	}
	// No body, and {}, are no options.
	d.MustDo(t, 200, dt.Admin(), "POST", one+"/pause", `{}`)
	if st := status(t, d, "bodies", h.ID); st["state"] != "paused" {
		t.Errorf("paused with {}: state %v", st["state"])
	}
	d.MustDo(t, 200, dt.Admin(), "DELETE", one, " {} ")
	d.MustDo(t, 404, dt.Admin(), "GET", one, nil)
}

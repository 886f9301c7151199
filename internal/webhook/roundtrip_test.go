package webhook_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestSettingsAsShownCanBeSentBack: a webhook's settings as GET shows
// them, sent back in a PATCH, are taken and change nothing, for a
// webhook of every class as for one of some. A webhook of every class
// showed classes as [], which a change refuses (an empty list names no
// class): a client that edited one setting and sent the rest back as
// read got a 400.
func TestSettingsAsShownCanBeSentBack(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "trip", "type Person { name: String! age: Int } type Pet { name: String! }")
	for _, tc := range []struct {
		body  string
		every bool // of every class
	}{
		{`{"url":"https://example.com/all"}`, true},
		{`{"url":"https://example.com/all-null","classes":null}`, true},
		{`{"url":"https://example.com/some","classes":["Person"],"ops":["create"],"filter":{"age":{"ge":18}},"batch":"commit","description":"adults"}`, false},
	} {
		body := tc.body
		h := createHook(t, d, nil, "trip", "", body)
		shown := status(t, d, "trip", h.ID)
		settings := map[string]any{}
		for _, k := range []string{"url", "description", "classes", "ops", "filter", "batch"} {
			settings[k] = shown[k]
		}
		back, _ := json.Marshal(settings)
		res := d.Do(t, dt.Admin(), "PATCH", fmt.Sprintf("/api/webhooks/admin/trip/%d", h.ID), back)
		if res.Status != 200 {
			t.Errorf("made with %s, sent back as shown (%s): %d %s, want 200", body, back, res.Status, res.Body)
			continue
		}
		again := status(t, d, "trip", h.ID)
		for k, v := range settings {
			if fmt.Sprint(again[k]) != fmt.Sprint(v) {
				t.Errorf("made with %s, sent back as shown: %s is %v, was %v", body, k, again[k], v)
			}
		}
		if tc.every && shown["classes"] != nil {
			t.Errorf("made with %s: classes shows %v, want null (every class)", body, shown["classes"])
		}
	}
}

// TestWebhookOfEveryClassDeliversEveryClass: a webhook made without
// classes, or with classes null, delivers the events of every class;
// one of some classes only theirs (docs/webhooks.md, What is
// delivered). An empty list is refused with a 400 (TestWebhookAPI).
func TestWebhookOfEveryClassDeliversEveryClass(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	d := dt.Start(t, fastRetries)
	d.CreateDatabase(t, "every", "type Person { name: String! } type Pet { name: String! }")
	createHook(t, d, r, "every", "/left-out", fmt.Sprintf(`{"url":%q}`, r.url("/left-out")))
	createHook(t, d, r, "every", "/null", fmt.Sprintf(`{"url":%q,"classes":null}`, r.url("/null")))
	createHook(t, d, r, "every", "/pets", fmt.Sprintf(`{"url":%q,"classes":["Pet"]}`, r.url("/pets")))
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/every", `[{"@type":"Person","@id":"ann","name":"Ann"},{"@type":"Pet","@id":"rex","name":"Rex"}]`)
	// The last commit, which every webhook delivers: once each has
	// delivered it, each has delivered all it will of the first.
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/every", `{"@type":"Pet","@id":"end","name":"End"}`)
	got := map[string][]string{}
	seen := map[string]bool{} // path and delivery id: the webhooks' ids of one commit's events are the same
	done := map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(done) < 3 {
		dl := r.next(time.Until(deadline))
		if seen[dl.Path+" "+dl.ID] {
			continue // a retry of a delivery taken
		}
		seen[dl.Path+" "+dl.ID] = true
		checkVerified(t, dl)
		for _, ev := range dl.Events {
			got[dl.Path] = append(got[dl.Path], ev.Subject)
			if ev.Subject == "Pet/end" {
				done[dl.Path] = true
			}
		}
	}
	want := map[string]string{"/left-out": "[Person/ann Pet/rex Pet/end]", "/null": "[Person/ann Pet/rex Pet/end]", "/pets": "[Pet/rex Pet/end]"}
	for path, w := range want {
		if fmt.Sprint(got[path]) != w {
			t.Errorf("webhook %s delivered %v, want %s", path, got[path], w)
		}
	}
}

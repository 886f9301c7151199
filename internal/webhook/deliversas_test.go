package webhook_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// The tests of this file check that a webhook delivers as whoever last
// chose where, what or from where it delivers, not only as whoever made
// it. A review found that an admin of a database could PATCH another
// user's webhook (the super user's) to its own URL and keep receiving the
// database's commits, @private fields included, with the maker's access,
// after its own role was taken away; and that a leaked API token could do
// the same and keep the feed after the token was revoked.

// hookPath returns the URL path of webhook id of admin/<db>, with tail.
func hookPath(db string, id int64, tail string) string {
	return fmt.Sprintf("/api/webhooks/admin/%s/%d%s", db, id, tail)
}

// drained fails the test if r holds a request whose body contains s: r's
// requests are all in (a request is handed over before it is answered,
// and the webhook moves on only once it is).
func drained(t *testing.T, r *goReceiver, s string) {
	t.Helper()
	for {
		select {
		case req := <-r.got:
			if strings.Contains(req.body, s) {
				t.Fatalf("delivered after the access was taken away: %s", req.body)
			}
		default:
			return
		}
	}
}

// TestRepointedWebhookDeliversAsWhoRepointedIt: Rita, an admin of the
// database, points the super user's webhook at her own receiver: it then
// delivers with her access, not the super user's. Narrowed to read, she
// is sent no @private field; with no role, the webhook is paused as
// revoked, naming her, and sends nothing more.
func TestRepointedWebhookDeliversAsWhoRepointedIt(t *testing.T) {
	t.Parallel()
	r := startGoReceiver(t)
	d := dt.Start(t, fastRetries)
	d.CreateDatabase(t, "guarded", "type Person { name: String! ssn: String @private }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/guarded", `{"user":"rita","role":"admin"}`)
	rita := dt.Basic("rita", "rita-password")
	res := d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/guarded", fmt.Sprintf(`{"url":%q}`, r.srv.URL+"/owner"))
	var h hook
	if err := json.Unmarshal(res.Body, &h); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, 200, rita, "PATCH", hookPath("guarded", h.ID, ""), fmt.Sprintf(`{"url":%q}`, r.srv.URL+"/rita"))
	person := func(name string) string {
		return fmt.Sprintf(`{"@type":"Person","@id":%q,"name":%q,"ssn":"secret-%s"}`, name, name, name)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/guarded", `{"user":"rita","role":"read"}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/guarded", person("read"))
	var ev struct {
		Data map[string]any `json:"data"`
	}
	b := r.next(t)
	if err := json.Unmarshal([]byte(b), &ev); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	// The document, not the whole event: the event's id is random and
	// may hold "ssn".
	if _, hasSSN := ev.Data["ssn"]; ev.Data["@id"] != "Person/read" || hasSSN || strings.Contains(b, "secret") {
		t.Fatalf("rita, narrowed to read, is sent: %s", b)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/guarded", `{"user":"rita","role":"none"}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/guarded", person("none"))
	st := waitStatus(t, d, "guarded", h.ID, 30*time.Second, func(m map[string]any) bool { return m["state"] == "revoked" })
	if msg := st["status_message"].(string); !strings.Contains(msg, "rita lost the read access") {
		t.Fatalf("revoked status message %q", msg)
	}
	drained(t, r, "Person/none")
	if st["creator"] != "rita" {
		t.Fatalf("creator %v, want rita, whom it delivers as", st["creator"])
	}
}

// TestRepointedWebhookStopsWithTheTokenThatRepointedIt: a webhook made
// with a password and re-pointed with an API token delivers as that
// token: revoking the token pauses it as revoked, and nothing more is
// sent.
func TestRepointedWebhookStopsWithTheTokenThatRepointedIt(t *testing.T) {
	t.Parallel()
	r := startGoReceiver(t)
	d := dt.Start(t, fastRetries)
	d.CreateDatabase(t, "guarded", personSchema)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/guarded", `{"user":"rita","role":"admin"}`)
	rita := dt.Basic("rita", "rita-password")
	res := d.MustDo(t, 201, rita, "POST", "/api/webhooks/admin/guarded", fmt.Sprintf(`{"url":%q}`, r.srv.URL+"/rita"))
	var h hook
	if err := json.Unmarshal(res.Body, &h); err != nil {
		t.Fatal(err)
	}
	res = d.MustDo(t, 201, rita, "POST", "/api/tokens", `{"name":"ci"}`)
	var tok struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(res.Body, &tok); err != nil {
		t.Fatal(err)
	}
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok.Token) }
	d.MustDo(t, 200, bearer, "PATCH", hookPath("guarded", h.ID, ""), fmt.Sprintf(`{"url":%q}`, r.srv.URL+"/thief"))
	insert(t, d, "guarded", "before")
	if b := r.next(t); !strings.Contains(b, "Person/before") {
		t.Fatalf("before the token's revocation: %s", b)
	}
	d.MustDo(t, 200, rita, "DELETE", fmt.Sprintf("/api/tokens/%d", tok.ID), nil)
	insert(t, d, "guarded", "after")
	st := waitStatus(t, d, "guarded", h.ID, 30*time.Second, func(m map[string]any) bool { return m["state"] == "revoked" })
	if msg := st["status_message"].(string); !strings.Contains(msg, "API token") {
		t.Fatalf("revoked status message %q, want it to name the API token", msg)
	}
	drained(t, r, "Person/after")
}

// TestWebhookChangesBindWhoMadeThem: each change of where, what or from
// where a webhook delivers (its URL, classes, ops, filter or batching;
// its secret; its position, by a replay or a resume from a position)
// makes it deliver as whoever made the change, shown as its creator; a
// change of its description, a pause and a plain resume do not.
func TestWebhookChangesBindWhoMadeThem(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, fastRetries)
	d.CreateDatabase(t, "bound", personSchema)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/bound", `{"user":"rita","role":"admin"}`)
	rita := dt.Basic("rita", "rita-password")
	res := d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/bound", `{"url":"https://example.com/hook"}`)
	var h struct {
		ID       int64  `json:"id"`
		Position string `json:"position"`
	}
	if err := json.Unmarshal(res.Body, &h); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		who          dt.Auth
		method, tail string
		body         string
		want         string
	}{
		{rita, "PATCH", "", `{"description":"a note"}`, "admin"},
		{rita, "POST", "/rotate-secret", `{"grace":"0s"}`, "rita"},
		{dt.Admin(), "PATCH", "", `{"url":"https://example.com/other"}`, "admin"},
		{rita, "PATCH", "", `{"classes":["Person"]}`, "rita"},
		{dt.Admin(), "PATCH", "", `{"ops":["create"]}`, "admin"},
		{rita, "PATCH", "", `{"filter":{"name":{"eq":"x"}}}`, "rita"},
		{dt.Admin(), "PATCH", "", `{"batch":"commit"}`, "admin"},
		{rita, "POST", "/pause", ``, "admin"},
		{rita, "POST", "/resume", ``, "admin"},
		{rita, "POST", "/replay", fmt.Sprintf(`{"after":%q}`, h.Position), "rita"},
		{dt.Admin(), "POST", "/pause", ``, "rita"},
		{dt.Admin(), "POST", "/resume", fmt.Sprintf(`{"after":%q}`, h.Position), "admin"},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		d.MustDo(t, 200, c.who, c.method, hookPath("bound", h.ID, c.tail), body)
		if got := status(t, d, "bound", h.ID)["creator"]; got != c.want {
			t.Fatalf("after %s %s %s: creator %v, want %s", c.method, c.tail, c.body, got, c.want)
		}
	}
}

// TestTakingOverAWebhookCountsAgainstTheCap: a webhook that comes to
// deliver as a user counts against that user's max_webhooks_per_user as
// one it made: rita, who made her one webhook, cannot take over the
// super user's by any change that would make it deliver as her (409
// naming the setting, nothing changed), may still change her own and
// the other's description, and once hers delivers as the super user
// (who re-pointed it) may take the other over.
// The super user takes any over. Found by review: a takeover was not
// counted, so a user at the cap could come to hold any number.
func TestTakingOverAWebhookCountsAgainstTheCap(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, fastRetries, func(c *config.Config) { c.MaxWebhooksPerUser = 1 })
	d.CreateDatabase(t, "capped", personSchema)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/capped", `{"user":"rita","role":"admin"}`)
	rita := dt.Basic("rita", "rita-password")
	var hers, theirs struct {
		ID       int64  `json:"id"`
		Position string `json:"position"`
	}
	if err := json.Unmarshal(d.MustDo(t, 201, rita, "POST", "/api/webhooks/admin/capped", `{"url":"https://example.com/rita"}`).Body, &hers); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/capped", `{"url":"https://example.com/admin"}`).Body, &theirs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, tail, body string }{
		{"PATCH", "", `{"url":"https://example.com/taken"}`},
		{"POST", "/rotate-secret", `{"grace":"0s"}`},
		{"POST", "/replay", fmt.Sprintf(`{"after":%q}`, theirs.Position)},
	} {
		r := d.Do(t, rita, c.method, hookPath("capped", theirs.ID, c.tail), c.body)
		if r.Status != 409 || !strings.Contains(string(r.Body), "max_webhooks_per_user") {
			t.Fatalf("rita's %s %s of the super user's webhook: %d %s, want 409 naming max_webhooks_per_user", c.method, c.tail, r.Status, r.Body)
		}
		if st := status(t, d, "capped", theirs.ID); st["creator"] != "admin" || st["url"] != "https://example.com/admin" {
			t.Fatalf("after the refused %s %s: creator %v, url %v", c.method, c.tail, st["creator"], st["url"])
		}
	}
	d.MustDo(t, 200, rita, "PATCH", hookPath("capped", theirs.ID, ""), `{"description":"a note"}`)
	d.MustDo(t, 200, rita, "PATCH", hookPath("capped", hers.ID, ""), `{"url":"https://example.com/rita2"}`)
	d.MustDo(t, 200, dt.Admin(), "PATCH", hookPath("capped", hers.ID, ""), `{"url":"https://example.com/admin2"}`)
	d.MustDo(t, 200, rita, "PATCH", hookPath("capped", theirs.ID, ""), `{"url":"https://example.com/taken"}`)
	if got := status(t, d, "capped", theirs.ID)["creator"]; got != "rita" {
		t.Fatalf("creator %v, want rita once hers delivers as the super user", got)
	}
}

// TestFilterOnAFieldTheCreatorCannotReadPauses: Rita makes a webhook as
// an admin with a filter on a @private field; narrowed to read, she may
// no longer read that field, and the filter, matched against the
// document as she may see it, would silently select otherwise (here:
// nothing). The webhook is paused failing before the next event instead,
// its message naming the field, as for a filter a schema change broke.
func TestFilterOnAFieldTheCreatorCannotReadPauses(t *testing.T) {
	t.Parallel()
	r := startGoReceiver(t)
	d := dt.Start(t, fastRetries)
	d.CreateDatabase(t, "guarded", "type Person { name: String! ssn: String @private }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/guarded", `{"user":"rita","role":"admin"}`)
	rita := dt.Basic("rita", "rita-password")
	res := d.MustDo(t, 201, rita, "POST", "/api/webhooks/admin/guarded",
		fmt.Sprintf(`{"url":%q,"classes":["Person"],"filter":{"ssn":{"startsWith":"secret"}}}`, r.srv.URL+"/rita"))
	var h hook
	if err := json.Unmarshal(res.Body, &h); err != nil {
		t.Fatal(err)
	}
	person := func(name string) string {
		return fmt.Sprintf(`{"@type":"Person","@id":%q,"name":%q,"ssn":"secret-%s"}`, name, name, name)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/guarded", person("admin"))
	if b := r.next(t); !strings.Contains(b, "Person/admin") {
		t.Fatalf("delivered %s", b)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/guarded", `{"user":"rita","role":"read"}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/guarded", person("read"))
	st := waitStatus(t, d, "guarded", h.ID, 30*time.Second, func(m map[string]any) bool { return m["state"] == "failing" })
	if msg := st["status_message"].(string); !strings.Contains(msg, "ssn") || !strings.Contains(msg, "rita") {
		t.Fatalf("failing status message %q, want it to name ssn and rita", msg)
	}
	if pos, _ := st["position"].(string); pos == "" {
		t.Fatalf("no position: %v", st)
	}
	drained(t, r, "Person/read")
}

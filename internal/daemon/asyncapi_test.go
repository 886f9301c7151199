package daemon_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestAsyncAPIDescribesTheStreams checks the AsyncAPI document against what
// the REST change stream really sends.
func TestAsyncAPIDescribesTheStreams(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", `interface Animal { name: String! }
type Dog implements Animal { breed: String chip: String @private }
type Keeper @subdocument { name: String }
type Cage { number: Int! keeper: Keeper }`)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"vera","organization":"admin","password":"vera-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/zoo", `{"user":"vera","role":"read"}`)

	var doc struct {
		AsyncAPI string `json:"asyncapi"`
		Channels map[string]struct {
			Address  string                     `json:"address"`
			Messages map[string]json.RawMessage `json:"messages"`
		} `json:"channels"`
		Operations map[string]struct {
			Action string `json:"action"`
		} `json:"operations"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	r := d.MustDo(t, 200, dt.Basic("vera", "vera-password"), "GET", "/api/asyncapi/admin/zoo", nil)
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.AsyncAPI != "3.0.0" {
		t.Fatalf("asyncapi %q", doc.AsyncAPI)
	}
	for _, class := range []string{"Animal", "Dog", "Cage"} {
		ch, ok := doc.Channels[class]
		if !ok || ch.Address != "/api/subscribe/admin/zoo/"+class || len(ch.Messages) != 4 {
			t.Fatalf("channel %s: %+v", class, ch)
		}
		if doc.Operations["receive"+class+"Changes"].Action != "receive" {
			t.Fatalf("no receive operation for %s", class)
		}
	}
	if _, ok := doc.Channels["Keeper"]; ok {
		t.Fatal("a subdocument has no stream of its own")
	}
	if g := doc.Channels["graphql"]; g.Address != "/api/graphql/admin/zoo" || g.Messages["next"] == nil || g.Messages["complete"] == nil {
		t.Fatalf("graphql channel: %+v", g)
	}
	dog := doc.Components.Schemas["Dog"]
	if _, ok := dog.Properties["chip"]; ok {
		t.Fatal("the reader's document shows a field it cannot read")
	}
	admin := d.MustDo(t, 200, dt.Admin(), "GET", "/api/asyncapi/admin/zoo", nil)
	if !strings.Contains(string(admin.Body), `"chip"`) {
		t.Fatal("the admin's document lacks the private field")
	}

	// What the stream sends matches the document.
	req, _ := http.NewRequest("GET", d.URL+"/api/subscribe/admin/zoo/Animal", nil)
	req.SetBasicAuth("vera", "vera-password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := lineReader(resp)
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended")
			}
			return l
		case <-time.After(20 * time.Second):
			t.Fatal("no frame within 20s")
		}
		return ""
	}
	for !strings.HasPrefix(next(), ": connected") {
	}
	// frame returns the event and data of the next frame that has data.
	frame := func() (event, data string) {
		for data == "" {
			l := next()
			if strings.HasPrefix(l, "event: ") {
				event = strings.TrimPrefix(l, "event: ")
			}
			if strings.HasPrefix(l, "data: ") {
				data = strings.TrimPrefix(l, "data: ")
			}
		}
		return event, data
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Dog","@id":"rex","name":"Rex","chip":"c1"}`)
	event, data := frame()
	if doc.Channels["Animal"].Messages[event] == nil {
		t.Fatalf("event %q is not a message of the Animal channel", event)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &env); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"specversion", "id", "type", "source", "subject", "time", "entity", "operation", "tenant", "user_id", "data"} {
		if env[k] == nil {
			t.Fatalf("envelope lacks %s: %s", k, data)
		}
	}
	var payload map[string]any
	if err := json.Unmarshal(env["data"], &payload); err != nil {
		t.Fatal(err)
	}
	for k := range payload {
		if _, ok := dog.Properties[k]; !ok {
			t.Fatalf("data field %s is not in the Dog schema", k)
		}
	}
	for _, k := range dog.Required {
		if _, ok := payload[k]; !ok {
			t.Fatalf("data lacks required %s", k)
		}
	}

	// A stream that an error ends (here: the reader's access taken away)
	// sends event: error, a message of the channel too; it was not one.
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/zoo", `{"user":"vera","role":"none"}`)
	event, data = frame()
	if event != "error" || doc.Channels["Animal"].Messages[event] == nil {
		t.Fatalf("event %q (%s) is not a message of the Animal channel", event, data)
	}
	var failure map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &failure); err != nil {
		t.Fatal(err)
	}
	errSchema := doc.Components.Schemas["Error"]
	if len(errSchema.Required) == 0 {
		t.Fatal("no Error schema")
	}
	for _, k := range errSchema.Required {
		if failure[k] == nil {
			t.Fatalf("the error lacks required %s: %s", k, data)
		}
	}
}

// TestAdminListsSubscriptions opens a REST stream and finds it, with its
// counters, in the super user's listing.
func TestAdminListsSubscriptions(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "subs", "type Note { text: String! }")
	req, _ := http.NewRequest("GET", d.URL+"/api/subscribe/admin/subs/Note", nil)
	req.SetBasicAuth("admin", dt.AdminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	readLine := func() string {
		l, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := readLine(); !strings.HasPrefix(l, ": connected sub=") {
		t.Fatalf("first frame %q", l)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/subs", `{"@type":"Note","text":"x"}`)
	for !strings.HasPrefix(readLine(), "data: ") {
	}
	type sub struct {
		ID        uint64 `json:"id"`
		Database  string `json:"database"`
		Transport string `json:"transport"`
		Commits   int64  `json:"commits"`
		Live      bool   `json:"live"`
	}
	// A stream opened before the change feed first saw its (new) database
	// reads the log itself and turns live at its next look: wait for it.
	// The commit count, too, may lag the event on the wire by a moment (it
	// is counted once the commit is handed to the stream).
	eventually.True(t, 60*time.Second, "the subscription live with its one commit counted", func() bool {
		var subs []sub
		if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/admin/subscriptions", nil).Body, &subs); err != nil {
			t.Fatal(err)
		}
		if len(subs) != 1 || subs[0].Database != "admin/subs" || subs[0].Transport != "rest" || subs[0].Commits > 1 {
			t.Fatalf("subscriptions: %+v", subs)
		}
		return subs[0].Live && subs[0].Commits == 1
	})
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"nosy","organization":"admin","password":"nosy-password"}`)
	d.MustDo(t, 403, dt.Basic("nosy", "nosy-password"), "GET", "/api/admin/subscriptions", nil)
}

// TestStreamEndsWhenAccessIsRevoked revokes a reader's role while its REST
// stream is open: the stream must end with a Forbidden error event.
func TestStreamEndsWhenAccessIsRevoked(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "rev", "type Note { text: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rex","organization":"admin","password":"rex-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/rev", `{"user":"rex","role":"read"}`)
	req, _ := http.NewRequest("GET", d.URL+"/api/subscribe/admin/rev/Note?heartbeat=1", nil)
	req.SetBasicAuth("rex", "rex-password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := lineReader(resp)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/rev", `{"user":"rex","role":"none"}`)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended without an error event")
			}
			if strings.HasPrefix(l, "data: ") && strings.Contains(l, "api:Forbidden") {
				return
			}
		case <-deadline:
			t.Fatal("the stream of a revoked reader was still open after 30s")
		}
	}
}

// TestGraphQLStreamEndsWhenAccessIsRevoked is the GraphQL subscription
// counterpart: an error next (FORBIDDEN), then complete.
func TestGraphQLStreamEndsWhenAccessIsRevoked(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "grev", "type Note { text: String! }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"gus","organization":"admin","password":"gus-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/grev", `{"user":"gus","role":"read"}`)
	req, _ := http.NewRequest("POST", d.URL+"/api/graphql/admin/grev?heartbeat=1", strings.NewReader(`{"query":"subscription { Note_added { text } }"}`))
	req.SetBasicAuth("gus", "gus-password")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := lineReader(resp)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/grev", `{"user":"gus","role":"none"}`)
	deadline := time.After(30 * time.Second)
	forbidden := false
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				if !forbidden {
					t.Fatal("the stream ended without a FORBIDDEN error")
				}
				return
			}
			if strings.HasPrefix(l, "data: ") && strings.Contains(l, `"FORBIDDEN"`) {
				forbidden = true
			}
			if l == "event: complete" && !forbidden {
				t.Fatal("complete before the FORBIDDEN error")
			}
		case <-deadline:
			t.Fatal("the subscription of a revoked reader was still open after 30s")
		}
	}
}

// lineReader returns the lines of a streamed response body as they come;
// the channel is closed when the body ends.
func lineReader(resp *http.Response) <-chan string {
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

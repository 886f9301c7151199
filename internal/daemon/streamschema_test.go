package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// A stream judges a commit by the classes as they were when it was made,
// whatever schema it reads through: a stream resumed from before a
// forced schema change, a member of a share gone on alone, a webhook's
// delivery loop. It sends the events a stream that kept up sent, or ends
// with an error naming the change; it never goes on past one silently.

const (
	zooSchema       = "interface Animal { name: String! }\ntype Cat implements Animal { name: String! }\ntype Dog implements Animal { name: String! }"
	zooCatNotAnimal = "interface Animal { name: String! }\ntype Cat { name: String! }\ntype Dog implements Animal { name: String! }"
)

// TestResumeAcrossClassDropEnds: a stream open while its class is dropped
// (forced) ends with a Conflict; one resumed from before the drop, once
// the class was made again, ends at the drop too (REST and GraphQL): the
// documents the drop deleted made no event, and it used to go straight
// through, so its client kept them for good.
func TestResumeAcrossClassDropEnds(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", "type Cat { name: String! }\ntype Dog { name: String! }")
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Cat","@id":"tom","name":"Tom"}`)
	var w struct{ Position string }
	if err := json.Unmarshal(r.Body, &w); err != nil || w.Position == "" {
		t.Fatalf("write: %s", r.Body)
	}

	live := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/zoo/Cat"})
	if f := live.Event(); !strings.HasPrefix(f.String(), ": connected") {
		t.Fatalf("first frame: %s", f)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/zoo?force=true", "type Dog { name: String! }")
	if f := live.Event(); f.Field("event") != "error" || !strings.Contains(f.String(), "api:Conflict") {
		t.Fatalf("live stream at the drop: %s", f)
	}

	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/zoo", "type Cat { name: String! }\ntype Dog { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Cat","@id":"felix","name":"Felix"}`)

	s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/zoo/Cat", Header: []string{"Last-Event-ID", w.Position}})
	if f := s.Event(); !strings.HasPrefix(f.String(), ": connected") {
		t.Fatalf("first frame: %s", f)
	}
	if f := s.Event(); f.Field("event") != "error" || !strings.Contains(f.String(), "api:Conflict") || !strings.Contains(f.String(), "which dropped class Cat") {
		t.Errorf("REST stream resumed from %s, before Cat was dropped (Cat/tom deleted without an event): %s; want the Conflict the live stream got", w.Position, f)
	}

	g := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/zoo",
		Body:   `{"query":"subscription { Cat_added { _id } }"}`,
		Header: []string{"Accept", "text/event-stream", "Last-Event-ID", w.Position}})
	if f := g.Event(); !strings.HasPrefix(f.String(), ": connected") {
		t.Fatalf("first frame: %s", f)
	}
	if f := g.Event(); !strings.Contains(f.String(), `"CONFLICT"`) || !strings.Contains(f.String(), "which dropped class Cat") {
		t.Errorf("GraphQL subscription resumed from %s, before Cat was dropped: %s; want a CONFLICT naming the drop", w.Position, f)
	}

	// A stream of a class resumed from before the class was made goes on
	// through the schema changes that had not made it yet: none took it
	// away.
	d.CreateDatabase(t, "aviary", "type Dog { name: String! }")
	a0 := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/aviary?type=Dog", nil).Header.Get("Sluice-Position")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/aviary?force=true", "type Dog { name: String! age: Int }")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/aviary", "type Dog { name: String! age: Int }\ntype Bird { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/aviary", `{"@type":"Bird","@id":"tweety","name":"Tweety"}`)
	b := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/aviary/Bird", Header: []string{"Last-Event-ID", a0}})
	b.Event() // connected
	if f := b.Event(); !strings.Contains(f.String(), `"subject":"Bird/tweety"`) {
		t.Errorf("REST stream of Bird resumed from %s, before Bird was made: %s; want Bird/tweety", a0, f)
	}
	bg := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/aviary",
		Body:   `{"query":"subscription { Bird_added { _id } }"}`,
		Header: []string{"Accept", "text/event-stream", "Last-Event-ID", a0}})
	bg.Event() // connected
	if f := bg.Event(); !strings.Contains(f.String(), `"Bird/tweety"`) {
		t.Errorf("GraphQL subscription of Bird resumed from %s, before Bird was made: %s; want Bird/tweety", a0, f)
	}
}

// TestResumeAcrossInterfaceChange: a forced change makes Cat stop
// implementing Animal after Cat/tom was written. A live stream of Animal
// got Cat/tom, then ends at the change with a Conflict naming it (every
// Cat left the Animals without an event: see
// TestInterfaceStreamsEndWhenMembershipChanges). A REST stream resumed
// from before Cat/tom gets Cat/tom too (it silently skipped it), then the
// same Conflict; a GraphQL subscription of Animal, which cannot show a
// Cat as an Animal any more, ends with a CONFLICT naming Cat, Animal and
// the change at Cat/tom's event, as _ChangeSet(commit:) answers it with
// an error (both left it out silently).
func TestResumeAcrossInterfaceChange(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooSchema)
	p0 := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/zoo?type=Cat", nil).Header.Get("Sluice-Position")
	if p0 == "" {
		t.Fatal("no Sluice-Position")
	}
	live := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/zoo/Animal"})
	live.Event() // connected
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Cat","@id":"tom","name":"Tom"}`)
	first := live.Event()
	if !strings.Contains(first.String(), `"subject":"Cat/tom"`) {
		t.Fatalf("live stream: %s", first)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/zoo?force=true", zooCatNotAnimal)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Dog","@id":"rex","name":"Rex"}`)
	second := live.Event()
	if second.Field("event") != "error" || !strings.Contains(second.String(), "api:Conflict") || !strings.Contains(second.String(), "made Cat stop implementing Animal") {
		t.Fatalf("live stream at the change: %s", second)
	}

	s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/zoo/Animal", Header: []string{"Last-Event-ID", p0}})
	s.Event() // connected
	for _, want := range []dt.Frame{first, second} {
		if f := s.Event(); f.Field("id") != want.Field("id") || f.Field("data") != want.Field("data") {
			t.Errorf("REST stream resumed from %s: %s; the live stream got %s", p0, f, want)
		}
	}

	g := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/zoo",
		Body:   `{"query":"subscription { Animal_added { _id name } }"}`,
		Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
	g.Event() // connected
	f := g.Event()
	for _, want := range []string{`"CONFLICT"`, first.Field("id"), "Cat stop implementing Animal"} {
		if !strings.Contains(f.String(), want) {
			t.Errorf("GraphQL subscription of Animal resumed from %s: %s; want a CONFLICT naming Cat/tom's event (%s), Cat and Animal", p0, f, first.Field("id"))
			break
		}
	}
	seq := strings.Split(first.Field("id"), "-")[1]
	q, _ := json.Marshal(map[string]string{"query": fmt.Sprintf("{ _ChangeSet(commit: %q) { Animal_added { _id } } }", seq)})
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/zoo", string(q), "Content-Type", "application/json")
	if !strings.Contains(string(r.Body), "Cat stop implementing Animal") {
		t.Errorf("_ChangeSet(commit: %s) of Animal_added after the change: %s; want an error naming Cat and Animal", seq, r.Body)
	}
}

// TestResumeAcrossInterfaceAddedLater: the reverse. Cat/tom is written
// when Cat is no Animal; a change then makes Cat implement Animal. No
// live stream of Animal got Cat/tom, so a resumed one must not either
// (REST and GraphQL replayed it): it ends at the change, which brought
// Cat/tom among the Animals without an event, as the live streams did
// (see TestInterfaceStreamsEndWhenMembershipChanges).
func TestResumeAcrossInterfaceAddedLater(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", zooCatNotAnimal)
	p0 := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/zoo?type=Cat", nil).Header.Get("Sluice-Position")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Cat","@id":"tom","name":"Tom"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/zoo", zooSchema)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Dog","@id":"rex","name":"Rex"}`)

	s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/zoo/Animal", Header: []string{"Last-Event-ID", p0}})
	s.Event() // connected
	if f := s.Event(); f.Field("event") != "error" || !strings.Contains(f.String(), "made Cat implement Animal") {
		t.Errorf("REST stream of Animal resumed from %s: %s; want the Conflict naming the change first (Cat/tom was no Animal when written)", p0, f)
	}
	g := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/zoo",
		Body:   `{"query":"subscription { Animal_added { _id } }"}`,
		Header: []string{"Accept", "text/event-stream", "Last-Event-ID", p0}})
	g.Event() // connected
	if f := g.Event(); !strings.Contains(f.String(), `"CONFLICT"`) || !strings.Contains(f.String(), "made Cat implement Animal") {
		t.Errorf("GraphQL subscription of Animal resumed from %s: %s; want the CONFLICT naming the change first (Cat/tom was no Animal when written)", p0, f)
	}
}

// TestWebhookAcrossInterfaceChange: a webhook of Animal replayed from
// before Cat/tom, made when Cat was an Animal, delivers it (it skipped it
// silently, as it did after a restart across the change), then is paused
// failing at the change that made Cat stop implementing Animal, as a
// stream of Animal ends there (every Cat left the Animals without an
// event); one replayed across a change that dropped Cat since is paused
// failing, naming the change, before the event it cannot show. A webhook
// of every class is paused at a change that drops a class (its documents
// went without an event), one of Dog alone goes on past it.
func TestWebhookAcrossInterfaceChange(t *testing.T) {
	t.Parallel()
	got := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev struct{ ID, Subject string }
		_ = json.Unmarshal(b, &ev)
		got <- r.URL.Path + " " + ev.Subject
		w.WriteHeader(204)
	}))
	defer srv.Close()
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookAllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	deliveries := func(db string, want ...string) {
		t.Helper()
		for _, w := range want {
			select {
			case g := <-got:
				if g != w {
					t.Errorf("webhooks of %s: delivered %q, want %q", db, g, w)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("webhooks of %s: no delivery; want %q", db, w)
			}
		}
	}
	create := func(db, body string) int {
		t.Helper()
		r := d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/"+db, body)
		var h struct{ ID int }
		if err := json.Unmarshal(r.Body, &h); err != nil || h.ID == 0 {
			t.Fatalf("webhook: %s", r.Body)
		}
		return h.ID
	}
	// paused waits for webhook id of db to leave the active state, and
	// returns its state, position (tagged, as a read's) and
	// status message.
	paused := func(db string, id int) (state, pos, msg string) {
		t.Helper()
		var st map[string]any
		eventually.True(t, 60*time.Second, "the webhook of "+db+" paused", func() bool {
			st = nil
			_ = json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", fmt.Sprintf("/api/webhooks/admin/%s/%d", db, id), nil).Body, &st)
			return st["state"] != "active"
		})
		state, _ = st["state"].(string)
		pos, _ = st["position"].(string)
		msg, _ = st["status_message"].(string)
		return state, pos, msg
	}

	d.CreateDatabase(t, "zoo", zooSchema)
	p0 := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/zoo?type=Cat", nil).Header.Get("Sluice-Position")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Cat","@id":"tom","name":"Tom"}`)
	tom := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/zoo?type=Cat", nil).Header.Get("Sluice-Position")
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/zoo?force=true", zooCatNotAnimal)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Dog","@id":"rex","name":"Rex"}`)
	id := create("zoo", fmt.Sprintf(`{"url":%q,"classes":["Animal"],"after":%q}`, srv.URL+"/a", p0))
	deliveries("zoo", "/a Cat/tom") // Cat/tom was an Animal when written, as live delivery sent it
	if state, pos, msg := paused("zoo", id); state != "failing" || pos != tom || !strings.Contains(msg, "made Cat stop implementing Animal") {
		t.Errorf("webhook of Animal from %s, across the change that made Cat stop implementing Animal: state %v, position %v, status_message %q; want failing at %s naming the change", p0, state, pos, msg, tom)
	}

	d.CreateDatabase(t, "zoo2", zooSchema)
	q0 := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/zoo2?type=Cat", nil).Header.Get("Sluice-Position")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo2", `{"@type":"Cat","@id":"tom","name":"Tom"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/zoo2?force=true", "interface Animal { name: String! }\ntype Dog implements Animal { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo2", `{"@type":"Dog","@id":"rex","name":"Rex"}`)
	id = create("zoo2", fmt.Sprintf(`{"url":%q,"classes":["Animal"],"after":%q}`, srv.URL+"/b", q0))
	if state, pos, msg := paused("zoo2", id); state != "failing" || pos != q0 || !strings.Contains(msg, "dropped class Cat") {
		t.Errorf("webhook of Animal from %s, across the drop of Cat: state %v, position %v, status_message %q; want failing at %s naming the drop", q0, state, pos, msg, q0)
	}

	d.CreateDatabase(t, "zoo3", zooSchema)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo3", `{"@type":"Cat","@id":"tom","name":"Tom"}`)
	r0 := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/zoo3?type=Cat", nil).Header.Get("Sluice-Position")
	every := create("zoo3", fmt.Sprintf(`{"url":%q,"after":%q}`, srv.URL+"/every", r0))
	create("zoo3", fmt.Sprintf(`{"url":%q,"classes":["Dog"],"after":%q}`, srv.URL+"/dog", r0))
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/zoo3?force=true", "interface Animal { name: String! }\ntype Dog implements Animal { name: String! }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo3", `{"@type":"Dog","@id":"rex","name":"Rex"}`)
	deliveries("zoo3", "/dog Dog/rex")
	if state, pos, msg := paused("zoo3", every); state != "failing" || pos != r0 || !strings.Contains(msg, "dropped class Cat") {
		t.Errorf("webhook of every class from %s, across the drop of Cat: state %v, position %v, status_message %q; want failing at %s naming the drop", r0, state, pos, msg, r0)
	}
	select {
	case g := <-got:
		t.Errorf("delivered %q past a change that a webhook ends at, or an event it cannot show", g)
	default:
	}
}

// TestSubscriptionAcrossARetypeOpenAndResumed: a forced change retypes
// Person.age, which the subscription selects. One open at the change
// ends there with a CONFLICT naming it; one resumed from before the
// change ends at the same commit with the same error (after Person/a's
// event, whose Int age the new type shows as null). Before, the
// resumed one went on past the change, with the values it dropped.
func TestSubscriptionAcrossARetypeOpenAndResumed(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "retype", "type Person { name: String age: Int }")
	p0 := dbPosition(t, d, "retype")
	subscribe := func(header ...string) *dt.Stream {
		s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/retype",
			Body:   `{"query":"subscription { Person_added { _id age } }"}`,
			Header: append([]string{"Accept", "text/event-stream"}, header...)})
		if f := s.Event(); !strings.HasPrefix(f.String(), ": connected") {
			t.Fatalf("first frame: %s", f)
		}
		return s
	}
	open := subscribe()
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/retype", `{"@type":"Person","@id":"a","name":"A","age":30}`)
	if f := open.Event(); f.Field("data") != `{"data":{"Person_added":{"_id":"Person/a","age":30}}}` {
		t.Fatalf("open subscription, Person/a: %s", f)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/retype?force=true", "type Person { name: String age: String }")
	ended := open.Event()
	if !strings.Contains(ended.String(), `"CONFLICT"`) || !strings.Contains(ended.String(), "Person.age, now of type String (was Int)") {
		t.Fatalf("open subscription at the retype: %s", ended)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/retype", `{"@type":"Person","@id":"b","name":"B","age":"x"}`)

	resumed := subscribe("Last-Event-ID", p0)
	if f := resumed.Event(); f.Field("data") != `{"data":{"Person_added":{"_id":"Person/a","age":null}}}` {
		t.Fatalf("resumed subscription, Person/a: %s", f)
	}
	if f := resumed.Event(); f.Field("data") != ended.Field("data") {
		t.Errorf("resumed from %s, before the retype: %s; want what the open one ended with: %s", p0, f, ended)
	}
	// Resumed from after the change, it goes on.
	after := subscribe("Last-Event-ID", dbPosition(t, d, "retype"))
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/retype", `{"@type":"Person","@id":"c","name":"C","age":"y"}`)
	if f := after.Event(); f.Field("data") != `{"data":{"Person_added":{"_id":"Person/c","age":"y"}}}` {
		t.Errorf("resumed from after the retype: %s", f)
	}
}

// TestStreamsAcrossAWidenedReference: a reference widened (Note.owner
// from Person to Named, every class it may point to a Named) keeps its
// values, and a stream whose operation still validates against the new
// schema and reads the same of them goes on across the change: a
// subscription selecting owner { name } (a field of Named), one
// selecting owner { _id ... on Person { age } }, one filtering on
// owner's name, and a live query selecting owner { name }; each shows a
// Pet as owner after it. One selecting owner { age }, a field of Person
// only, ends at the change with a CONFLICT naming it. Resumed from
// before the change, each does as the open one did. Before, every
// stream selecting Note.owner ended with a CONFLICT ("selects
// Note.owner, now of type Named (was Person)").
func TestStreamsAcrossAWidenedReference(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	const named = "interface Named { name: String }\ntype Person implements Named { name: String age: Int }\ntype Pet implements Named { name: String }\n"
	d.CreateDatabase(t, "widen", named+"type Note { text: String owner: Person }")
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/widen", `[{"@type":"Person","@id":"alice","name":"Alice","age":30},{"@type":"Pet","@id":"rex","name":"Rex"}]`)
	p0 := dbPosition(t, d, "widen")
	open := func(q string, header ...string) *dt.Stream {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"query": q})
		s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Method: "POST", Path: "/api/graphql/admin/widen", Body: string(body),
			Header: append([]string{"Accept", "text/event-stream"}, header...)})
		if f := s.Event(); !strings.HasPrefix(f.String(), ": connected") {
			t.Fatalf("%s: first frame %s", q, f)
		}
		return s
	}
	const (
		byName   = `subscription { Note_added { _id owner { name } } }`
		byPerson = `subscription { Note_added { _id owner { _id ... on Person { age } } } }`
		filtered = `subscription { Note_added(filter: {owner: {name: {eq: "Rex"}}}) { _id } }`
		byAge    = `subscription { Note_added { _id owner { age } } }`
		live     = `query @live { Note(orderBy: {text: ASC}) { _id owner { name } } }`
	)
	subs := map[string]*dt.Stream{byName: open(byName), byPerson: open(byPerson), filtered: open(filtered), byAge: open(byAge)}
	lq := open(live)
	next := func(s *dt.Stream, what, want string) dt.Frame {
		t.Helper()
		f := s.Event()
		if got := f.Field("data"); got != want {
			t.Fatalf("%s: %s, want data %s", what, f, want)
		}
		return f
	}
	// result checks the live query's next result's data (its
	// extensions carry its position).
	result := func(what, want string) {
		t.Helper()
		f := lq.Event()
		var ans struct{ Data json.RawMessage }
		if err := json.Unmarshal([]byte(f.Field("data")), &ans); err != nil || string(ans.Data) != want {
			t.Fatalf("live query, %s: %s, want data %s", what, f, want)
		}
	}
	result("at first", `{"Note":[]}`)

	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/widen", `{"@type":"Note","@id":"n1","text":"1","owner":"Person/alice"}`)
	before := map[string]string{
		byName:   `{"data":{"Note_added":{"_id":"Note/n1","owner":{"name":"Alice"}}}}`,
		byPerson: `{"data":{"Note_added":{"_id":"Note/n1","owner":{"_id":"Person/alice","age":30}}}}`,
		byAge:    `{"data":{"Note_added":{"_id":"Note/n1","owner":{"age":30}}}}`,
	}
	for q, want := range before {
		next(subs[q], q+", Note/n1", want)
	}
	result("Note/n1", `{"Note":[{"_id":"Note/n1","owner":{"name":"Alice"}}]}`)

	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/widen", named+"type Note { text: String owner: Named }")
	ended := subs[byAge].Event()
	if !strings.Contains(ended.String(), `"CONFLICT"`) || !strings.Contains(ended.String(), `Cannot query field \"age\" on type \"Named\"`) {
		t.Fatalf("%s at the widening: %s, want a CONFLICT naming age", byAge, ended)
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/widen", `{"@type":"Note","@id":"n2","text":"2","owner":"Pet/rex"}`)
	after := map[string]string{
		byName:   `{"data":{"Note_added":{"_id":"Note/n2","owner":{"name":"Rex"}}}}`,
		byPerson: `{"data":{"Note_added":{"_id":"Note/n2","owner":{"_id":"Pet/rex"}}}}`,
		filtered: `{"data":{"Note_added":{"_id":"Note/n2"}}}`,
	}
	for q, want := range after {
		next(subs[q], q+", Note/n2 after the widening", want)
	}
	result("Note/n2 after the widening", `{"Note":[{"_id":"Note/n1","owner":{"name":"Alice"}},{"_id":"Note/n2","owner":{"name":"Rex"}}]}`)

	// Resumed from before the change, each does as the open one did
	// (one selecting owner { age } no longer validates: it is refused).
	for q, want := range after {
		resumed := open(q, "Last-Event-ID", p0)
		if q != filtered {
			next(resumed, "resumed "+q+", Note/n1", before[q])
		}
		next(resumed, "resumed "+q+", Note/n2", want)
	}
}

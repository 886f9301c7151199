package gqltransport_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// animalsSDL and animalsBirdSDL are a schema and its next version, which
// adds an implementation of the interface.
const (
	animalsSDL = `
interface Animal { name: String! }
type Dog implements Animal { name: String! }
`
	animalsBirdSDL = animalsSDL + `type Bird implements Animal { name: String! }
`
)

// A subscription open while a class is added to the schema goes on
// prepared for the new version: it gets the new class's events, live
// exactly as a resume from before the change replays them. Its change
// feed subscription (of its own, its share's or its connection's) skipped
// commits that touch none of the classes the operation had when it
// opened: a commit of the new class alone was lost to a live stream
// (b1), not to a resumed one.
func TestSubscriptionGetsAClassAddedWhileOpen(t *testing.T) {
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", animalsSDL)
	const q = `subscription { Animal_added { name } }`
	s := subscribe(t, d, "zoo", q)
	s.connected()
	ws := mustConnect(t, d, "zoo") // the connection's feed takes every commit and filters per share
	ws.send(`{"id":"s","type":"subscribe","payload":` + body(q) + `}`)
	ws.barrier("b")
	insert(t, d, "zoo", `{"@type":"Dog","@id":"Dog/d0","name":"d0"}`)
	ids, _ := s.nexts(1)
	ws.expectNext("s", `{"data":{"Animal_added":{"name":"d0"}},"extensions":{"lastEventId":"POS"}}`)

	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/zoo", animalsBirdSDL)
	insert(t, d, "zoo", `{"@type":"Bird","@id":"Bird/b1","name":"b1"}`) // the new class alone
	insert(t, d, "zoo", `[{"@type":"Bird","@id":"Bird/b2","name":"b2"},{"@type":"Dog","@id":"Dog/d2","name":"d2"}]`)
	insert(t, d, "zoo", `{"@type":"Dog","@id":"Dog/d3","name":"d3"}`)
	insert(t, d, "zoo", `{"@type":"Dog","@id":"Dog/end","name":"end"}`)

	want := []string{"b1", "b2", "d2", "d3", "end"}
	live := untilEnd(t, s)
	if got := animalNames(t, live); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the open stream got %v, want %v", got, want)
	}
	var overWS []string
	for len(overWS) == 0 || overWS[len(overWS)-1] != "end" {
		var m wsMessage
		if err := json.Unmarshal([]byte(ws.read()), &m); err != nil || m.ID != "s" || m.Type != "next" {
			t.Fatalf("not a next of s: %+v (%v)", m, err)
		}
		overWS = append(overWS, animalNames(t, []string{"x " + string(m.Payload)})...)
	}
	if strings.Join(overWS, " ") != strings.Join(want, " ") {
		t.Errorf("the open graphql-ws subscription got %v, want %v", overWS, want)
	}
	r := subscribe(t, d, "zoo", q, "Last-Event-ID", ids[0])
	r.connected()
	if resumed := untilEnd(t, r); strings.Join(resumed, "\n") != strings.Join(live, "\n") {
		t.Errorf("resumed from %s:\n%s\nlive:\n%s", ids[0], strings.Join(resumed, "\n"), strings.Join(live, "\n"))
	}
}

// A live query open while a class is added to the schema reads its
// result again after a commit of that class alone.
func TestLiveQueryFollowsAClassAddedWhileOpen(t *testing.T) {
	d := dt.Start(t)
	d.CreateDatabase(t, "zoo", animalsSDL)
	w := &writer{t: t, d: d, db: "zoo"}
	w.insert(`{"@type":"Dog","@id":"Dog/d0","name":"d0"}`)
	s := subscribe(t, d, "zoo", `subscription { Animal(orderBy: {name: ASC}) { name } }`)
	s.connected()
	s.expect(w.seq, `{"Animal":[{"name":"d0"}]}`)
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/zoo", animalsBirdSDL)
	w.seq++ // the schema change's commit: the same result, nothing sent
	w.insert(`{"@type":"Bird","@id":"Bird/b1","name":"b1"}`)
	s.expect(w.seq, `{"Animal":[{"name":"b1"},{"name":"d0"}]}`)
	w.insert(`{"@type":"Bird","@id":"Bird/b2","name":"b2"}`)
	s.expect(w.seq, `{"Animal":[{"name":"b1"},{"name":"b2"},{"name":"d0"}]}`)
}

// untilEnd reads next events up to the one of the document named end,
// each as its id and data.
func untilEnd(t *testing.T, s *stream) []string {
	t.Helper()
	var out []string
	for {
		ids, data := s.nexts(1)
		out = append(out, ids[0]+" "+data[0])
		if strings.Contains(data[0], `"name":"end"`) {
			return out
		}
	}
}

// animalNames returns the names of the Animal_added events read by untilEnd.
func animalNames(t *testing.T, events []string) []string {
	t.Helper()
	var out []string
	for _, e := range events {
		var m struct {
			Data struct {
				Added struct{ Name string } `json:"Animal_added"`
			} `json:"data"`
		}
		_, data, _ := strings.Cut(e, " ")
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		out = append(out, m.Data.Added.Name)
	}
	return out
}

// After a schema change, a live query cohort's change feed subscription
// is narrowed again to its live queries' classes, as a subscription's
// is, once they were revised. Before, it passed every commit of the new
// version for good (each judged and dropped by class): it took the 20
// Cat commits below too, 23 commits.
func TestLiveQueryCohortFeedNarrowedAfterSchemaChange(t *testing.T) {
	d := dt.Start(t)
	const catSDL = animalsSDL + "type Cat { name: String! }\n"
	d.CreateDatabase(t, "zoo", catSDL)
	w := &writer{t: t, d: d, db: "zoo"}
	w.insert(`{"@type":"Dog","@id":"Dog/d0","name":"d0"}`)
	live := subscribe(t, d, "zoo", `subscription { Dog(orderBy: {name: ASC}) { name } }`)
	live.connected()
	live.expect(w.seq, `{"Dog":[{"name":"d0"}]}`)
	plain := subscribe(t, d, "zoo", `subscription { Dog_added { name } }`)
	plain.connected()

	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPut, "/api/schema/admin/zoo", catSDL+"type Fish { name: String! }\n")
	w.seq++ // the schema change's commit: every feed takes it
	// Once both streams saw d1, both feeds evaluated the schema change's
	// commit, and their queries were revised to its version.
	w.insert(`{"@type":"Dog","@id":"Dog/d1","name":"d1"}`)
	live.expect(w.seq, `{"Dog":[{"name":"d0"},{"name":"d1"}]}`)
	plain.nexts(1)
	for i := range 20 {
		w.insert(fmt.Sprintf(`{"@type":"Cat","@id":"Cat/c%d","name":"c"}`, i))
	}
	w.insert(`{"@type":"Dog","@id":"Dog/end","name":"end"}`)
	live.expect(w.seq, `{"Dog":[{"name":"d0"},{"name":"d1"},{"name":"end"}]}`)
	plain.nexts(1)

	var subs []struct {
		ID      uint64 `json:"id"`
		Commits int64  `json:"commits"`
	}
	if err := json.Unmarshal(d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodGet, "/api/admin/subscriptions", nil).Body, &subs); err != nil {
		t.Fatal(err)
	}
	if len(subs) != 2 {
		t.Fatalf("%d subscriptions listed, want 2 (the cohort's, the subscription's): %+v", len(subs), subs)
	}
	for _, s := range subs {
		// The schema change's commit, d1 and end: no Cat.
		if s.Commits != 3 {
			t.Errorf("subscription %d took %d commits, want 3 (the cohort's is the first): %+v", s.ID, s.Commits, subs)
		}
	}
}

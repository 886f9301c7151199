package daemon_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestRESTReadsCarryTheirPosition: a document read, a listing, /api/log
// and /api/changes answer the position they reflect in Sluice-Position
// (and /api/changes in its body), readable by a page of a listed origin.
func TestRESTReadsCarryTheirPosition(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, dt.WithCORS("https://app.example"))
	d.CreateDatabase(t, "rpos", "type Note { text: String }")
	empty := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/rpos?type=Note", nil)
	epoch, rest, _ := strings.Cut(empty.Header.Get("Sluice-Position"), "-")
	if rest != "0-2147483647" {
		t.Fatalf("an empty listing's position %q", empty.Header.Get("Sluice-Position"))
	}
	// The position of a database without commits resumes like any other:
	// the stream gets every commit.
	st := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/rpos/Note", Header: []string{"Last-Event-ID", empty.Header.Get("Sluice-Position")}})
	st.Next() // : connected
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/rpos", `{"@type":"Note","@id":"Note/a","text":"x"}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/rpos", `{"@type":"Note","@id":"Note/b","text":"y"}`)
	for _, id := range []string{"Note/a", "Note/b"} {
		if e := nextEvent(t, st); e.Subject != id || e.Kind != "entity.create" {
			t.Fatalf("resumed from an empty database's position: event %+v, want the creation of %s", e, id)
		}
	}
	want := epoch + "-2-2147483647"
	for _, path := range []string{"/api/document/admin/rpos?id=Note/a", "/api/document/admin/rpos?type=Note", "/api/document/admin/rpos",
		"/api/log/admin/rpos", "/api/changes/admin/rpos?after=1"} {
		r := d.MustDo(t, 200, dt.Admin(), "GET", path, nil, "Origin", "https://app.example")
		if got := r.Header.Get("Sluice-Position"); got != want || !strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "Sluice-Position") {
			t.Errorf("GET %s: Sluice-Position %q (exposed: %q), want %q", path, got, r.Header.Get("Access-Control-Expose-Headers"), want)
		}
		if strings.HasPrefix(path, "/api/changes") && !strings.Contains(string(r.Body), `"position":"`+want+`"`) {
			t.Errorf("GET %s: body %s holds no position %s", path, r.Body, want)
		}
	}
}

// noteState is what a client knows of a database: text by document id.
type noteState map[string]string

// readNotes reads every Note with a GraphQL query and returns them and
// the position the query carries.
func readNotes(t *testing.T, d *dt.Daemon, db string) (noteState, string) {
	t.Helper()
	r := d.MustDo(t, 200, dt.Admin(), "POST", "/api/graphql/admin/"+db, `{"query":"{ Note(limit: 100000) { _id text } }"}`, "Content-Type", "application/json")
	var res struct {
		Data struct {
			Note []struct {
				ID   string `json:"_id"`
				Text string `json:"text"`
			}
		}
		Extensions struct {
			Position string `json:"position"`
		}
	}
	if err := json.Unmarshal(r.Body, &res); err != nil || res.Extensions.Position == "" {
		t.Fatalf("query: %v %s", err, r.Body)
	}
	s := noteState{}
	for _, n := range res.Data.Note {
		s[n.ID] = n.Text
	}
	return s, res.Extensions.Position
}

// apply applies a REST change stream event to s; it fails t on an event
// the state contradicts (a duplicate: the read already held it).
func (s noteState) apply(t *testing.T, e restEvent) {
	t.Helper()
	switch e.Kind {
	case "entity.create":
		if _, ok := s[e.Subject]; ok {
			t.Fatalf("event %s creates %s, which the read already held: a duplicate", e.ID, e.Subject)
		}
		fallthrough
	case "entity.update":
		var doc struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(e.Data, &doc); err != nil {
			t.Fatal(err)
		}
		s[e.Subject] = doc.Text
	case "entity.delete":
		if _, ok := s[e.Subject]; !ok {
			t.Fatalf("event %s deletes %s, which the read did not hold", e.ID, e.Subject)
		}
		delete(s, e.Subject)
	}
}

// TestReadThenSubscribe: the first thing a realtime client does, load
// then follow. A query answers its position; a subscription started from
// it, on the other replica, receives exactly the commits after the read,
// while an API writer and a SQL writer keep committing through the read
// and the subscribe: the read plus the events equal the state at any later
// read, with no duplicate and no gap. Five rounds, alternating replicas.
func TestReadThenSubscribe(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	a.CreateDatabase(t, "follow", "type Note { text: String }")
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	w := newSQLWriter(t, a, "follow")
	stop := make(chan struct{})
	var writers sync.WaitGroup
	// Each writer's commit is announced here, when nobody waits dropped.
	committed := make(chan struct{}, 1024)
	announce := func() {
		select {
		case committed <- struct{}{}:
		default:
		}
	}
	// commitsLand waits until k more commits landed.
	commitsLand := func(k int) {
		t.Helper()
		for range len(committed) {
			<-committed // what landed before counts not
		}
		deadline := time.After(time.Minute)
		for range k {
			select {
			case <-committed:
			case <-deadline:
				t.Fatal("the writers made no progress")
			}
		}
	}
	writers.Go(func() { // the API writer: inserts and updates
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body := fmt.Sprintf(`{"@type":"Note","@id":"Note/api%d","text":"v%d"}`, i, i)
			if i%3 == 2 {
				a.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/follow", fmt.Sprintf(`{"@type":"Note","@id":"Note/api%d","text":"u%d"}`, i-1, i))
			}
			a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/follow", body)
			announce()
		}
	})
	writers.Go(func() { // the SQL writer: inserts, updates and deletes
		tbl := w.table("Note")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			stmts := []string{fmt.Sprintf("INSERT INTO %s (_id, text) VALUES ('Note/sql%d', 's%d')", tbl, i, i)}
			if i > 0 {
				stmts = append(stmts, fmt.Sprintf("UPDATE %s SET text = text || '+' WHERE _id = 'Note/sql%d'", tbl, i-1))
			}
			if i%4 == 3 {
				stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE _id = 'Note/sql%d'", tbl, i-2))
			}
			if err := sqlTx(w.url, stmts...); err != nil {
				t.Errorf("SQL writer: %v", err)
				return
			}
			announce()
		}
	})
	defer func() { close(stop); writers.Wait() }()

	for round := range 5 {
		reader, follower := a, b
		if round%2 == 1 {
			reader, follower = b, a
		}
		commitsLand(3)
		state, pos := readNotes(t, reader, "follow")
		st := follower.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/follow/Note", Header: []string{"Last-Event-ID", pos}})
		st.Next() // : connected
		// More commits land after the subscribe; then the state at a
		// later read, on the reader. The events up to it are those before
		// the first of a later commit (the writers go on).
		commitsLand(5)
		later, laterPos := readNotes(t, reader, "follow")
		target, _ := sluice.ParsePosition(laterPos)
		for {
			e := nextEvent(t, st)
			p, err := sluice.ParsePosition(e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if p.Seq > target.Seq {
				break
			}
			state.apply(t, e)
		}
		if fmt.Sprint(state) != fmt.Sprint(later) {
			t.Fatalf("round %d: the read at %s plus the events up to %s give\n%v\nand the read at %s\n%v", round, pos, laterPos, state, laterPos, later)
		}
		st.Close()
	}
}

package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// wait bounds every wait for an asynchronous event.
const wait = 60 * time.Second

const shopSDL = `
interface Animal @concrete { name: String! }
type Dog implements Animal { name: String! breed: String }
type Cat implements Animal { name: String! }
type Customer { name: String! ssn: String @private }
`

// stream is an open change stream (see dt.Stream).
type stream struct {
	*dt.Stream
	t    testing.TB
	last string // the id of the last event ids read, with its tag
}

// open starts GET path as a stream and fails the test unless it answers
// 200. Close it (it is closed at the end of the test anyway).
func open(t testing.TB, d *dt.Daemon, auth dt.Auth, path string, header ...string) *stream {
	t.Helper()
	return &stream{Stream: d.MustOpenStream(t, auth, dt.StreamRequest{Path: path, Header: header}), t: t}
}

// connected reads the first frame and checks it is ": connected sub=<n>".
func (s *stream) connected() {
	s.t.Helper()
	f := s.Next()
	if len(f) != 1 || !strings.HasPrefix(f[0], ": connected sub=") {
		s.t.Fatalf("first frame %q, want : connected sub=<n>", f)
	}
}

type envelope struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	Source          string          `json:"source"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Entity          string          `json:"entity"`
	Operation       string          `json:"operation"`
	Tenant          string          `json:"tenant"`
	UserID          string          `json:"user_id"`
	Version         string          `json:"version"`
	Data            json.RawMessage `json:"data"`
}

// writeVersion returns the version a write answered.
func writeVersion(t testing.TB, r dt.Response) string {
	t.Helper()
	var res struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(r.Body, &res); err != nil || res.Version == "" {
		t.Fatalf("write answered no version: %s", r.Body)
	}
	return res.Version
}

// decode checks an event frame's shape and returns its envelope.
func decode(t testing.TB, f dt.Frame) envelope {
	t.Helper()
	if len(f) != 3 || !strings.HasPrefix(f[0], "id: ") || !strings.HasPrefix(f[1], "event: entity.") || !strings.HasPrefix(f[2], "data: ") {
		t.Fatalf("not an event frame: %q", f)
	}
	var e envelope
	if err := json.Unmarshal([]byte(f.Field("data")), &e); err != nil {
		t.Fatalf("event data: %v: %s", err, f.Field("data"))
	}
	if e.ID != f.Field("id") || "entity."+e.Operation != f.Field("event") || e.Type != f.Field("event") {
		t.Fatalf("event frame and envelope disagree: %q", f)
	}
	return e
}

// insert inserts docs (a JSON value) into admin/<db> in one commit.
func insert(t testing.TB, d *dt.Daemon, db, docs string) {
	t.Helper()
	d.MustDo(t, http.StatusOK, dt.Admin(), http.MethodPost, "/api/document/admin/"+db, docs)
}

func TestSubscribeFramesAndEnvelope(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, dt.WithCORS("https://app.example"))
	d.CreateDatabase(t, "shop", shopSDL)

	s := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Animal", "Origin", "https://app.example")
	h := s.Header()
	for k, want := range map[string]string{
		"Content-Type":                "text/event-stream; charset=utf-8",
		"Cache-Control":               "no-cache",
		"X-Accel-Buffering":           "no",
		"Connection":                  "keep-alive",
		"Access-Control-Allow-Origin": "https://app.example",
		"Vary":                        "Origin",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	s.connected()

	insert(t, d, "shop", `{"@type":"Dog","@id":"rex","name":"Rex","breed":"lab"}`)
	f := s.Event()
	e := decode(t, f)
	if f[1] != "event: entity.create" {
		t.Fatalf("event line %q", f[1])
	}
	if e.SpecVersion != "1.0" || e.Type != "entity.create" || e.Source != "/api/db/admin/shop" ||
		e.Subject != "Dog/rex" || e.Entity != "Dog" || e.Operation != "create" || e.Tenant != "admin" ||
		e.UserID != "admin" || e.DataContentType != "application/json" {
		t.Fatalf("envelope %+v", e)
	}
	if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil {
		t.Fatalf("time %q: %v", e.Time, err)
	}
	if string(e.Data) != `{"@id":"Dog/rex","@type":"Dog","name":"Rex","breed":"lab"}` {
		t.Fatalf("data %s", e.Data)
	}
	if !strings.HasSuffix(dt.Untag(e.ID), "-1-0") {
		t.Fatalf("id %q, want <epoch>-1-0", e.ID)
	}

	// Exact frames of an update and a delete; a Customer change (not an
	// Animal) sends nothing, so the next frame is the Cat's. Each carries
	// the version its write answered.
	put := d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/shop", `{"@type":"Dog","@id":"Dog/rex","name":"Rex II"}`)
	epoch := strings.Split(e.ID, "-")[0]
	// The event id carries the tag of its commit, as the write's position.
	wrote, err := sluice.ParsePosition(put.Header.Get("Sluice-Position"))
	if err != nil || wrote.Tag == "" {
		t.Fatalf("the write's position %q: %v", put.Header.Get("Sluice-Position"), err)
	}
	want := fmt.Sprintf("id: %s-2-0-%[4]s\nevent: entity.update\ndata: "+
		`{"specversion":"1.0","id":"%[1]s-2-0-%[4]s","type":"entity.update","source":"/api/db/admin/shop","subject":"Dog/rex",`+
		`"time":"%[2]s","datacontenttype":"application/json","entity":"Dog","operation":"update","tenant":"admin","user_id":"admin",`+
		`"version":"%[3]s","data":{"@id":"Dog/rex","@type":"Dog","name":"Rex II"}}`, epoch, "%s", writeVersion(t, put), wrote.Tag)
	f = s.Event()
	e = decode(t, f)
	if got := f.String(); got != fmt.Sprintf(want, e.Time) {
		t.Fatalf("update frame:\n got %s\nwant %s", got, fmt.Sprintf(want, e.Time))
	}
	insert(t, d, "shop", `{"@type":"Customer","@id":"c1","name":"Ann"}`)
	del := d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/shop?id=Dog/rex", nil)
	f = s.Event()
	e = decode(t, f)
	if dt.Untag(f.Field("id")) != epoch+"-4-0" || f[1] != "event: entity.delete" || e.Operation != "delete" || e.Version != writeVersion(t, del) ||
		string(e.Data) != `{"@id":"Dog/rex","@type":"Dog","name":"Rex II"}` {
		t.Fatalf("delete frame %q", f)
	}

	// Bulk insert: one commit, one event per document, in request order;
	// the Customer in the middle is not an Animal.
	insert(t, d, "shop", `[{"@type":"Cat","@id":"tom","name":"Tom"},{"@type":"Customer","@id":"c2","name":"Bo"},
		{"@type":"Animal","@id":"a1","name":"Generic"},{"@type":"Dog","@id":"fido","name":"Fido"}]`)
	for _, w := range []struct{ id, subject string }{{"-5-0", "Cat/tom"}, {"-5-2", "Animal/a1"}, {"-5-3", "Dog/fido"}} {
		e := decode(t, s.Event())
		if dt.Untag(e.ID) != epoch+w.id || e.Subject != w.subject {
			t.Fatalf("bulk event %s %s, want %s %s", e.ID, e.Subject, epoch+w.id, w.subject)
		}
	}
}

func TestSubscribeHeartbeat(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "shop", shopSDL)
	for _, hb := range []string{"1s", "1"} {
		s := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog?heartbeat="+hb)
		s.connected()
		if f := s.Next(); f.String() != ": ping" {
			t.Fatalf("heartbeat=%s: frame %q, want : ping", hb, f)
		}
		s.Close()
	}
}

func TestSubscribeBadRequests(t *testing.T) {
	t.Parallel()
	d := dt.Start(t, dt.WithCORS("https://x.example"))
	d.CreateDatabase(t, "shop", shopSDL)
	for _, c := range []struct {
		path, header string
		status       int
		typ, msg     string
	}{
		{"/api/subscribe/admin/shop/Dog?ops=create,upsert", "", 400, "api:BadRequest", `unknown operation "upsert"`},
		{"/api/subscribe/admin/shop/Dog?ops=read", "", 400, "api:BadRequest", `unknown operation "read"`},
		{"/api/subscribe/admin/shop/Dog?ops=", "", 400, "api:BadRequest", `ops=""`},
		{"/api/subscribe/admin/shop/Dog?ops=create,", "", 400, "api:BadRequest", "empty operation"},
		{"/api/subscribe/admin/shop/Dog?heartbeat=soon", "", 400, "api:BadRequest", `heartbeat="soon"`},
		{"/api/subscribe/admin/shop/Dog?heartbeat=0", "", 400, "api:BadRequest", `heartbeat="0"`},
		{"/api/subscribe/admin/shop/Dog?heartbeat=-5s", "", 400, "api:BadRequest", `heartbeat="-5s"`},
		{"/api/subscribe/admin/shop/Dog?heartbeat=", "", 400, "api:BadRequest", `heartbeat=""`},
		{"/api/subscribe/admin/shop/Dog?topic=x", "", 400, "api:BadRequest", `"topic"`},
		{"/api/subscribe/admin/shop/Dog?ops=create&ops=update", "", 400, "api:BadRequest", `"ops" is given 2 times`},
		{"/api/subscribe/admin/shop/Dog?lastEventId=nope", "", 400, "api:BadRequest", "lastEventId"},
		{"/api/subscribe/admin/shop/Dog?lastEventId=", "", 400, "api:BadRequest", "lastEventId is empty"},
		{"/api/subscribe/admin/shop/Dog", "x-1", 400, "api:BadRequest", "Last-Event-ID"},
		{"/api/subscribe/admin/shop/Unicorn", "", 404, "api:NotFound", `"Unicorn"`},
		{"/api/subscribe/admin/nope/Dog", "", 404, "api:NotFound", "nope"},
	} {
		var hdr []string
		if c.header != "" {
			hdr = []string{"Last-Event-ID", c.header}
		}
		r := d.Do(t, dt.Admin(), "GET", c.path, nil, hdr...)
		var b struct {
			Error map[string]string `json:"api:error"`
			Msg   string            `json:"api:message"`
		}
		_ = json.Unmarshal(r.Body, &b)
		if r.Status != c.status || b.Error["@type"] != c.typ || !strings.Contains(b.Msg, c.msg) {
			t.Errorf("GET %s: %d %s, want %d %s containing %s", c.path, r.Status, r.Body, c.status, c.typ, c.msg)
		}
	}
	if r := d.Do(t, dt.NoAuth(), "GET", "/api/subscribe/admin/shop/Dog", nil); r.Status != 401 {
		t.Errorf("no credentials: %d", r.Status)
	}
	if r := d.Do(t, dt.Admin(), "POST", "/api/subscribe/admin/shop/Dog", nil); r.Status != 405 {
		t.Errorf("POST: %d", r.Status)
	}
	r := d.Do(t, dt.NoAuth(), "OPTIONS", "/api/subscribe/admin/shop/Dog", nil, "Origin", "https://x.example", "Access-Control-Request-Method", "GET")
	if r.Status != 204 || r.Header.Get("Access-Control-Allow-Origin") != "https://x.example" {
		t.Errorf("preflight: %d %v", r.Status, r.Header)
	}
}

func TestSubscribeOpsAndProtection(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "shop", shopSDL)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"reader","organization":"admin","password":"reader-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/shop", `{"user":"reader","role":"read"}`)

	admin := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Customer?ops=update,delete&heartbeat=30")
	reader := open(t, d, dt.Basic("reader", "reader-password"), "/api/subscribe/admin/shop/Customer?heartbeat=1m")
	admin.connected()
	reader.connected()

	insert(t, d, "shop", `{"@type":"Customer","@id":"ann","name":"Ann","ssn":"123-45"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/document/admin/shop", `{"@type":"Customer","@id":"Customer/ann","name":"Ann B","ssn":"999"}`)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/shop?id=Customer/ann", nil)

	// The reader lacks the role for ssn: it never sees it, after or before.
	for _, want := range []string{
		`create {"@id":"Customer/ann","@type":"Customer","name":"Ann"}`,
		`update {"@id":"Customer/ann","@type":"Customer","name":"Ann B"}`,
		`delete {"@id":"Customer/ann","@type":"Customer","name":"Ann B"}`,
	} {
		e := decode(t, reader.Event())
		if got := e.Operation + " " + string(e.Data); got != want {
			t.Errorf("reader got %s, want %s", got, want)
		}
	}
	// The admin asked for updates and deletes only, and sees ssn.
	for _, want := range []string{
		`update {"@id":"Customer/ann","@type":"Customer","name":"Ann B","ssn":"999"}`,
		`delete {"@id":"Customer/ann","@type":"Customer","name":"Ann B","ssn":"999"}`,
	} {
		e := decode(t, admin.Event())
		if got := e.Operation + " " + string(e.Data); got != want {
			t.Errorf("admin got %s, want %s", got, want)
		}
	}
}

// ids reads n events and returns their ids without their tags (the
// tests resume from them, unchecked, and compare them with positions
// written from numbers; TestSubscribeResume resumes from a tagged one,
// last),
// checking they are tagged and increase.
func (s *stream) ids(n int) []string {
	s.t.Helper()
	out := make([]string, 0, n)
	var last sluice.Position
	for len(out) < n {
		e := decode(s.t, s.Event())
		p, err := sluice.ParsePosition(e.ID)
		if err != nil {
			s.t.Fatal(err)
		}
		if p.Tag == "" {
			s.t.Fatalf("event id %s without the tag of its commit", e.ID)
		}
		if len(out) > 0 && !last.Less(p) {
			s.t.Fatalf("event %s after %s: out of order or repeated", e.ID, last)
		}
		last = p
		out = append(out, p.Untagged().String())
		s.last = e.ID
	}
	return out
}

func TestSubscribeResume(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "shop", shopSDL)

	s := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog")
	s.connected()
	insert(t, d, "shop", `{"@type":"Dog","@id":"a","name":"A"}`)
	insert(t, d, "shop", `[{"@type":"Dog","@id":"b","name":"B"},{"@type":"Dog","@id":"c","name":"C"},{"@type":"Dog","@id":"d","name":"D"}]`)
	got := s.ids(3) // a, b, and c: the client stops in the middle of commit 2
	s.Close()
	last := s.last // c's id as the client has it, tagged
	epoch := strings.Split(got[0], "-")[0]
	if want := []string{epoch + "-1-0", epoch + "-2-0", epoch + "-2-1"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ids %v, want %v", got, want)
	}

	// Missed while disconnected: the rest of commit 2, then commit 3.
	insert(t, d, "shop", `{"@type":"Dog","@id":"e","name":"E"}`)
	for _, how := range []struct{ path, header string }{
		{"/api/subscribe/admin/shop/Dog", "Last-Event-ID"},
		{"/api/subscribe/admin/shop/Dog?lastEventId=" + last, ""},
		// The header wins over a stale query parameter.
		{"/api/subscribe/admin/shop/Dog?lastEventId=" + got[0], "Last-Event-ID"},
	} {
		var hdr []string
		if how.header != "" {
			hdr = []string{how.header, last}
		}
		r := open(t, d, dt.Admin(), how.path, hdr...)
		r.connected()
		if ids := r.ids(2); strings.Join(ids, " ") != epoch+"-2-2 "+epoch+"-3-0" {
			t.Fatalf("%s %s: replayed %v", how.path, how.header, ids)
		}
		r.Close()
	}

	// Replay, then live without a gap or a duplicate.
	r := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog", "Last-Event-ID", got[0])
	r.connected()
	insert(t, d, "shop", `{"@type":"Dog","@id":"f","name":"F"}`)
	ids := r.ids(5)
	want := []string{epoch + "-2-0", epoch + "-2-1", epoch + "-2-2", epoch + "-3-0", epoch + "-4-0"}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Fatalf("replay then live: %v, want %v", ids, want)
	}
}

func TestSubscribeResumeAfterRestart(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t) // outlives daemon A
	var last string
	var s *stream
	// Daemon A lives in a subtest: its cleanup stops it (daemontest.Stop
	// must run once), and the check registered before it runs after it.
	t.Run("daemon A", func(st *testing.T) {
		st.Cleanup(func() {
			// Shutdown sends the final comment, then closes.
			frames := s.Ended()
			if len(frames) != 1 || frames[0].String() != ": server shutting down" {
				t.Errorf("frames at shutdown: %q", frames)
			}
		})
		a := dt.Start(st, dt.WithDatabaseURL(dbURL))
		a.CreateDatabase(st, "shop", shopSDL)
		s = open(t, a, dt.Admin(), "/api/subscribe/admin/shop/Dog")
		s.connected()
		insert(st, a, "shop", `{"@type":"Dog","@id":"a","name":"A"}`)
		last = s.ids(1)[0]
	})
	if t.Failed() {
		return
	}

	b := dt.Start(t, dt.WithDatabaseURL(dbURL))
	insert(t, b, "shop", `[{"@type":"Dog","@id":"b","name":"B"},{"@type":"Dog","@id":"c","name":"C"}]`)
	r := open(t, b, dt.Admin(), "/api/subscribe/admin/shop/Dog", "Last-Event-ID", last)
	r.connected()
	insert(t, b, "shop", `{"@type":"Dog","@id":"d","name":"D"}`)
	epoch := strings.Split(last, "-")[0]
	if ids := r.ids(3); strings.Join(ids, " ") != epoch+"-2-0 "+epoch+"-2-1 "+epoch+"-3-0" {
		t.Fatalf("after restart: %v", ids)
	}
}

func TestSubscribeExpiredPosition(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "shop", shopSDL)
	for i := range 3 {
		insert(t, d, "shop", fmt.Sprintf(`{"@type":"Dog","@id":"d%d","name":"D"}`, i))
	}
	var hist []struct {
		Position string `json:"position"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/shop", nil).Body, &hist); err != nil || len(hist) != 3 {
		t.Fatalf("log: %v %v", hist, err)
	}
	first := hist[2].Position // commit 1

	// Prune everything but the newest commit.
	ctx := context.Background()
	store, err := postgres.Open(ctx, d.DatabaseURL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Prune(ctx, time.Now().Add(time.Hour), 0, nil); err != nil {
		t.Fatal(err)
	}

	epoch := strings.Split(first, "-")[0]
	for _, c := range []struct{ pos, code, msg string }{
		{first, "api:Gone", "older than the retained history"},
		{"zzzzzzzzzz-1-0", "api:Gone", "is not a position of admin/shop: it is another database's, or an earlier database's of that name"},
		// Commit 2 itself is pruned: whether the client had all of it
		// cannot be known, so this is refused too.
		{hist[1].Position, "api:Gone", "older than the retained history"},
	} {
		s := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog", "Last-Event-ID", c.pos)
		frames := s.Ended()
		if len(frames) != 1 || len(frames[0]) != 2 || frames[0][0] != "event: error" {
			t.Fatalf("resume from %s: frames %q, want one error event", c.pos, frames)
		}
		var body struct {
			Error map[string]string `json:"api:error"`
			Msg   string            `json:"api:message"`
		}
		if err := json.Unmarshal([]byte(frames[0].Field("data")), &body); err != nil || body.Error["@type"] != c.code || !strings.Contains(body.Msg, c.msg) {
			t.Fatalf("resume from %s: error %q", c.pos, frames[0])
		}
	}
	// Ahead of the log is bad input.
	r := d.Do(t, dt.Admin(), "GET", "/api/subscribe/admin/shop/Dog", nil, "Last-Event-ID", epoch+"-99-0")
	if r.Status != 400 {
		t.Fatalf("position ahead: %d %s", r.Status, r.Body)
	}
	// Resuming from the newest, retained commit works: live follows.
	s := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog", "Last-Event-ID", hist[0].Position)
	s.connected()
	insert(t, d, "shop", `{"@type":"Dog","@id":"late","name":"L"}`)
	if ids := s.ids(1); ids[0] != epoch+"-4-0" {
		t.Fatalf("resume from retained history: %v", ids)
	}
}

func TestSubscribeTwoDaemons(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "shop", shopSDL)
	sa := open(t, a, dt.Admin(), "/api/subscribe/admin/shop/Dog")
	sb := open(t, b, dt.Admin(), "/api/subscribe/admin/shop/Dog")
	sa.connected()
	sb.connected()
	const n = 40
	var wg sync.WaitGroup
	for _, d := range []*dt.Daemon{a, b} {
		wg.Go(func() {
			for i := range n / 2 {
				r := d.Do(t, dt.Admin(), "POST", "/api/document/admin/shop", fmt.Sprintf(`{"@type":"Dog","name":"dog %d"}`, i))
				if r.Status != 200 {
					t.Errorf("insert: %d %s", r.Status, r.Body)
				}
			}
		})
	}
	wg.Wait()
	ia, ib := sa.ids(n), sb.ids(n)
	if strings.Join(ia, " ") != strings.Join(ib, " ") {
		t.Fatalf("daemons delivered different streams:\n%v\n%v", ia, ib)
	}
	epoch := strings.Split(ia[0], "-")[0]
	for i, id := range ia {
		if id != fmt.Sprintf("%s-%d-0", epoch, i+1) {
			t.Fatalf("event %d is %s", i, id)
		}
	}
}

// TestSubscribeAfterUnwatchedWritesOnTwoDaemons: two daemons write to a
// database nobody subscribes to (each daemon's change feed then only moves
// its head, to its own commits or to what a notification says), and then
// a subscriber on one of them resumes from the middle: it gets exactly the
// commits after its position, then the live ones from both daemons.
func TestSubscribeAfterUnwatchedWritesOnTwoDaemons(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "shop", shopSDL)
	for i := range 20 {
		insert(t, []*dt.Daemon{a, b}[i%2], "shop", fmt.Sprintf(`{"@type":"Dog","name":"dog %d"}`, i))
	}
	var hist []struct {
		Position string `json:"position"`
	}
	if err := json.Unmarshal(a.MustDo(t, 200, dt.Admin(), "GET", "/api/log/admin/shop", nil).Body, &hist); err != nil || len(hist) != 20 {
		t.Fatalf("log: %v %v", hist, err)
	}
	epoch := strings.Split(hist[0].Position, "-")[0]
	s := open(t, a, dt.Admin(), "/api/subscribe/admin/shop/Dog", "Last-Event-ID", epoch+"-10-0")
	s.connected()
	insert(t, b, "shop", `{"@type":"Dog","name":"dog 20"}`)
	insert(t, a, "shop", `{"@type":"Dog","name":"dog 21"}`)
	ids := s.ids(12)
	for k, id := range ids {
		if want := fmt.Sprintf("%s-%d-0", epoch, 11+k); id != want {
			t.Fatalf("event %d is %s, want %s (all: %v)", k, id, want, ids)
		}
	}
}

func TestSubscribeMetrics(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "shop", shopSDL)
	metrics := func() string { return string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body) }
	value := func(m, name string, labels ...string) float64 { return dt.MetricValue(m, name, labels...) }
	rest := `transport="rest"`

	before := metrics()
	s := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog")
	s.connected()
	m := metrics()
	if got := value(m, "sluice_stream_subscribers", rest) - value(before, "sluice_stream_subscribers", rest); got != 1 {
		t.Fatalf("subscribers moved by %v, want 1", got)
	}
	// The shop's label: the database of the only stream subscriber.
	var shop string
	for _, l := range strings.Split(m, "\n") {
		if strings.HasPrefix(l, "sluice_stream_subscribers{") && strings.HasSuffix(l, " 1") {
			i := strings.Index(l, `database="`)
			shop = l[i : i+strings.Index(l[i+10:], `"`)+11]
		}
	}
	// The change feed follows a database from its head as it was when the
	// feed first saw it: commits made before that reach subscribers from
	// the log, and are not counted as published. Count from when the
	// stream's subscription is live (which it is only once the feed
	// follows the database).
	eventually.True(t, wait, "the stream's subscription is live", func() bool {
		var subs []struct {
			Database string `json:"database"`
			Live     bool   `json:"live"`
		}
		if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/admin/subscriptions", nil).Body, &subs); err != nil {
			t.Fatal(err)
		}
		return len(subs) == 1 && subs[0].Database == "admin/shop" && subs[0].Live
	})
	counted := metrics()
	// 3 commits: 2 Dogs + 1 Customer, 1 Dog, 1 Customer: 5 changes
	// published, 3 delivered to this Dog stream.
	insert(t, d, "shop", `[{"@type":"Dog","name":"a"},{"@type":"Dog","name":"b"},{"@type":"Customer","name":"c"}]`)
	insert(t, d, "shop", `{"@type":"Dog","name":"d"}`)
	insert(t, d, "shop", `{"@type":"Customer","name":"e"}`)
	ids := s.ids(3)
	// Published is counted when the tailer hands over, delivered after the
	// write, the latency after that: wait for all three (bounded) rather
	// than sleeping.
	eventually.Nil(t, wait, "published and delivered events counted, latency observed", func() error {
		m = metrics()
		published := value(m, "sluice_stream_events_published_total", shop) - value(counted, "sluice_stream_events_published_total", shop)
		delivered := value(m, "sluice_stream_events_delivered_total", rest) - value(counted, "sluice_stream_events_delivered_total", rest)
		observed := value(m, "sluice_stream_delivery_latency_seconds_count", rest)
		if published >= 5 && delivered >= 3 && observed >= 1 {
			return nil
		}
		// All of the stream and change feed series, to tell which part
		// did not count.
		var series []string
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, "sluice_stream") || strings.HasPrefix(l, "sluice_changefeed") {
				series = append(series, l)
			}
		}
		return fmt.Errorf("published %v of 5 (%s), delivered %v of 3, latency observations %v; the series:\n%s",
			published, shop, delivered, observed, strings.Join(series, "\n"))
	})
	if got := value(m, "sluice_stream_events_published_total", shop) - value(counted, "sluice_stream_events_published_total", shop); got != 5 {
		t.Errorf("published moved by %v, want 5", got)
	}
	if got := value(m, "sluice_stream_events_delivered_total", rest) - value(counted, "sluice_stream_events_delivered_total", rest); got != 3 {
		t.Errorf("delivered moved by %v, want 3", got)
	}
	if got := value(m, "sluice_stream_delivery_latency_seconds_count", rest); got < 1 {
		t.Errorf("latency observations: %v", got)
	}
	if got := value(m, "sluice_changefeed_running"); got != 1 {
		t.Errorf("changefeed running = %v", got)
	}

	// A resume is a replay; a resume from another epoch is a failure.
	r := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog", "Last-Event-ID", ids[0])
	r.connected()
	if got := r.ids(2); got[0] != ids[1] {
		t.Fatalf("replayed %v", got)
	}
	open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog", "Last-Event-ID", "zzzzzzzzzz-1-0").Ended()
	s.Close()
	r.Close()
	eventually.True(t, wait, "the subscribers gauge back after the disconnects", func() bool {
		m = metrics()
		return value(m, "sluice_stream_subscribers", rest) == value(before, "sluice_stream_subscribers", rest)
	})
	if got := value(m, "sluice_stream_replays_total") - value(before, "sluice_stream_replays_total"); got != 1 {
		t.Errorf("replays moved by %v, want 1", got)
	}
	if got := value(m, "sluice_stream_resume_failures_total") - value(before, "sluice_stream_resume_failures_total"); got != 1 {
		t.Errorf("resume failures moved by %v, want 1", got)
	}
}

// TestSubscribeDisconnectLeavesNoGoroutine is not parallel: goleak looks
// at every goroutine of the process, and parallel tests only start once
// the sequential ones are done.
func TestSubscribeDisconnectLeavesNoGoroutine(t *testing.T) {
	d := dt.Start(t)
	d.CreateDatabase(t, "shop", shopSDL)
	cycle := func() {
		s := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog?heartbeat=1h")
		s.connected()
		s.Close()
	}
	cycle()
	base := goleak.IgnoreCurrent()
	for range 1000 {
		cycle()
	}
	// A commit after the disconnects reaches no one and must not block.
	insert(t, d, "shop", `{"@type":"Dog","name":"after"}`)
	http.DefaultClient.CloseIdleConnections()
	// Goroutines of closed connections end asynchronously: Find retries
	// for about half a second, this loop bounds the whole wait.
	eventually.Nil(t, wait, "no goroutine left behind", func() error { return dt.GoroutinesSince(base) })
}

// TestSubscribeListenReconnect cuts every LISTEN connection; the tailers
// reconnect and a commit made on the other daemon still arrives.
func TestSubscribeListenReconnect(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "shop", shopSDL)
	s := open(t, a, dt.Admin(), "/api/subscribe/admin/shop/Dog")
	s.connected()
	insert(t, b, "shop", `{"@type":"Dog","@id":"one","name":"1"}`)
	first := s.ids(1)[0]

	ctx := context.Background()
	store, err := postgres.Open(ctx, a.DatabaseURL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if n, err := store.TerminateListeners(ctx); err != nil || n != 2 {
		t.Fatalf("terminated %d listeners: %v", n, err)
	}
	eventually.True(t, wait, "daemon A's tailer reconnected", func() bool {
		return dt.MetricValue(string(a.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_changefeed_listen_reconnects_total") >= 1
	})
	insert(t, b, "shop", `{"@type":"Dog","@id":"two","name":"2"}`)
	if got := s.ids(1)[0]; got != strings.Replace(first, "-1-", "-2-", 1) {
		t.Fatalf("after reconnect: %s", got)
	}
	if r := a.Do(t, dt.NoAuth(), "GET", "/readyz", nil); r.Status != 200 {
		t.Fatalf("readyz %d", r.Status)
	}
}

// TestSubscribeSchemaChange: a stream opened before an additive schema
// change matches a new subclass and never leaks a new protected field.
func TestSubscribeSchemaChange(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "shop", shopSDL)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"reader","organization":"admin","password":"reader-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/shop", `{"user":"reader","role":"read"}`)
	s := open(t, d, dt.Basic("reader", "reader-password"), "/api/subscribe/admin/shop/Animal")
	s.connected()

	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/shop", shopSDL+`
type Bird implements Animal { name: String! ring: String @private }
`)
	insert(t, d, "shop", `{"@type":"Bird","@id":"tweety","name":"Tweety","ring":"R-1"}`)
	e := decode(t, s.Event())
	if e.Entity != "Bird" || string(e.Data) != `{"@id":"Bird/tweety","@type":"Bird","name":"Tweety"}` {
		t.Fatalf("event %s %s", e.Entity, e.Data)
	}
}

// TestSubscribeSharesEvaluation: REST streams of one class, operations and
// role share one hub subscription (one evaluation and one framing per
// commit); a stream with other operations has its own; each gets exactly
// its events.
func TestSubscribeSharesEvaluation(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "shop", shopSDL)
	a := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog")
	b := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog")
	c := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog?ops=delete")
	for _, s := range []*stream{a, b, c} {
		s.connected()
	}
	var subs []struct {
		Transport string `json:"transport"`
	}
	if err := json.Unmarshal(d.MustDo(t, 200, dt.Admin(), "GET", "/api/admin/subscriptions", nil).Body, &subs); err != nil {
		t.Fatal(err)
	}
	if len(subs) != 2 {
		t.Fatalf("%d change feed subscriptions for 2 kinds of REST stream: %+v", len(subs), subs)
	}
	insert(t, d, "shop", `{"@type":"Dog","@id":"rex","name":"Rex"}`)
	d.MustDo(t, 200, dt.Admin(), "DELETE", "/api/document/admin/shop?id=Dog/rex", nil)
	for _, s := range []*stream{a, b} {
		if e := decode(t, s.Event()); e.Operation != "create" {
			t.Fatalf("first event %+v", e)
		}
		if e := decode(t, s.Event()); e.Operation != "delete" {
			t.Fatalf("second event %+v", e)
		}
	}
	if e := decode(t, c.Event()); e.Operation != "delete" || e.Subject != "Dog/rex" {
		t.Fatalf("ops=delete stream: %+v", e)
	}
}

// TestSubscribeResumePastACommitsEnd: a resume from an index past the
// last change of its commit names no event: the change stream answers 400
// with the error /api/changes gives for it, before the stream starts,
// where it resumed after the commit. The commit's changes and its end
// resume as before.
func TestSubscribeResumePastACommitsEnd(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "shop", shopSDL)
	insert(t, d, "shop", `[{"@type":"Dog","@id":"a","name":"A"},{"@type":"Dog","@id":"b","name":"B"}]`) // commit 1
	insert(t, d, "shop", `{"@type":"Dog","@id":"c","name":"C"}`)                                        // commit 2
	read := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/shop?type=Dog", nil).Header.Get("Sluice-Position")
	epoch, _, _ := strings.Cut(read, "-")
	for _, pos := range []string{epoch + "-1-2", epoch + "-1-9"} {
		want := "position " + pos + " names no event of admin/shop: commit 1 has 2 changes, at indexes 0 to 1 (the position of its end is " + epoch + "-1-2147483647)"
		var body struct {
			Msg string `json:"api:message"`
		}
		r := d.Do(t, dt.Admin(), "GET", "/api/changes/admin/shop?after="+pos, nil)
		if err := json.Unmarshal(r.Body, &body); err != nil || r.Status != 400 || body.Msg != want {
			t.Fatalf("/api/changes after %s: %d %s, want 400 %q", pos, r.Status, r.Body, want)
		}
		s, resp := d.OpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/shop/Dog", Header: []string{"Last-Event-ID", pos}})
		if s != nil {
			t.Fatalf("resume from %s: the stream started, want 400 %q", pos, want)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(b, &body); err != nil || resp.StatusCode != 400 || body.Msg != want {
			t.Fatalf("resume from %s: %d %s, want 400 %q", pos, resp.StatusCode, b, want)
		}
	}
	for pos, want := range map[string]string{
		epoch + "-1-1":          epoch + "-2-0",
		epoch + "-1-2147483647": epoch + "-2-0",
		epoch + "-1-0":          epoch + "-1-1",
	} {
		s := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog", "Last-Event-ID", pos)
		s.connected()
		if ids := s.ids(1); ids[0] != want {
			t.Fatalf("resume from %s: %v, want %s first", pos, ids, want)
		}
		s.Close()
	}
}

// TestSubscribeMalformedQuery: a query whose text cannot be read (a bad
// %-escape, a ';' separator) is refused naming what is wrong, rather
// than read without the parameter it mangled: ?ops= left out is every
// operation, ?lastEventId= left out a stream from now, a gap the client
// is not told of.
func TestSubscribeMalformedQuery(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "shop", shopSDL)
	insert(t, d, "shop", `{"@type":"Dog","@id":"a","name":"A"}`)
	s := open(t, d, dt.Admin(), "/api/subscribe/admin/shop/Dog")
	s.connected()
	insert(t, d, "shop", `{"@type":"Dog","@id":"b","name":"B"}`)
	pos := s.ids(1)[0]
	s.Close()
	for _, c := range []struct{ path, msg string }{
		{"/api/subscribe/admin/shop/Dog?ops=delete%zz", `invalid URL escape "%zz"`},
		{"/api/subscribe/admin/shop/Dog?ops=delete%", `invalid URL escape "%"`},
		{"/api/subscribe/admin/shop/Dog?lastEventId=" + pos + "%2", `invalid URL escape "%2"`},
		{"/api/subscribe/admin/shop/Dog?ops=delete;heartbeat=5", "semicolon"},
		{"/api/subscribe/admin/shop/Dog?heartbeat=5&l%zzastEventId=" + pos, `invalid URL escape "%zz"`},
	} {
		st, resp := d.OpenStream(t, dt.Admin(), dt.StreamRequest{Path: c.path})
		if st != nil {
			st.Close()
			t.Errorf("GET %s: opened a stream, want 400", c.path)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Error map[string]string `json:"api:error"`
			Msg   string            `json:"api:message"`
		}
		_ = json.Unmarshal(b, &body)
		if resp.StatusCode != 400 || body.Error["@type"] != "api:BadRequest" || !strings.Contains(body.Msg, c.msg) {
			t.Errorf("GET %s: %d %s, want 400 BadRequest containing %s", c.path, resp.StatusCode, b, c.msg)
		}
	}

	// An EventSource's ticket is not spent on a query that cannot be
	// read: the same ticket then opens the stream it asked for.
	r := d.MustDo(t, http.StatusCreated, dt.Admin(), "POST", "/api/stream-tickets", `{"database":"admin/shop"}`)
	var tk struct {
		Ticket string `json:"ticket"`
	}
	if err := json.Unmarshal(r.Body, &tk); err != nil || tk.Ticket == "" {
		t.Fatalf("ticket: %s", r.Body)
	}
	es := func(query string) dt.StreamRequest {
		return dt.StreamRequest{Path: "/api/subscribe/admin/shop/Dog?ticket=" + url.QueryEscape(tk.Ticket) + "&" + query, Header: []string{"Accept", "text/event-stream"}}
	}
	st, resp := d.OpenStream(t, dt.NoAuth(), es("lastEventId="+pos+"%2"))
	if st != nil {
		st.Close()
		t.Fatal("a ticket with a mangled lastEventId opened a stream, want 400")
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("a ticket with a mangled lastEventId: %d, want 400", resp.StatusCode)
	}
	first := strings.Split(pos, "-")[0] + "-1-2147483647" // the end of commit 1, before b
	s = &stream{Stream: d.MustOpenStream(t, dt.NoAuth(), es("lastEventId="+first)), t: t}
	s.connected()
	if ids := s.ids(1); ids[0] != pos {
		t.Fatalf("resumed with the ticket after %s: %v, want %s", first, ids, pos)
	}
}

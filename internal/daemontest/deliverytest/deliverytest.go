// Package deliverytest is the one suite of delivery guarantees that every
// stream transport runs: the REST change stream, graphql-sse (both
// modes), NDJSON, Apollo multipart and graphql-ws. A transport's tests
// give Exercise a Transport that opens its kind of subscription; the
// suite then checks, against real daemons, what every stream owes its
// client whatever its protocol:
//
//   - readiness and order: once the subscription answered its readiness
//     frame, every commit is delivered, in commit order, each once;
//   - resume: from an event's position, exactly the events after it (and
//     from the position of a read, exactly the commits after the read);
//   - an access change ends the stream with an error, and nothing of a
//     later commit reaches it;
//   - shutdown ends it normally (no error);
//   - a client that stops reading loses nothing, and holds no one back
//     (for the transports that give OpenGated).
package deliverytest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// SDL is the schema of the suite's databases.
const SDL = "type Dog { name: String! }"

// Transport opens one protocol's subscriptions to the Dog documents added
// to a database.
type Transport struct {
	// Name names the transport in the suite's failures.
	Name string
	// Open subscribes as auth to the Dogs added to database admin/<db>
	// after position from ("": from now), and returns once the
	// subscription is registered (its readiness frame was read).
	Open func(t *testing.T, d *dt.Daemon, auth dt.Auth, db, from string) Sub
	// OpenGated, when set, is Open from now for a client that stops
	// reading after the readiness frame until gate is closed.
	OpenGated func(t *testing.T, d *dt.Daemon, auth dt.Auth, db string, gate <-chan struct{}) Sub
}

// Sub is an open subscription.
type Sub interface {
	// Next returns the next event: its position and the id of the Dog
	// it reports.
	Next(t *testing.T) (pos, id string)
	// End waits for the stream to end and returns the error it ended
	// with ("" for a normal end); an event before the end fails t.
	End(t *testing.T) string
	// Close disconnects.
	Close()
}

// Exercise runs the suite against tr.
func Exercise(t *testing.T, tr Transport) {
	t.Run("order", func(t *testing.T) { t.Parallel(); order(t, tr) })
	t.Run("resume", func(t *testing.T) { t.Parallel(); resume(t, tr) })
	t.Run("access end", func(t *testing.T) { t.Parallel(); accessEnd(t, tr) })
	t.Run("shutdown", func(t *testing.T) { t.Parallel(); shutdown(t, tr) })
	if tr.OpenGated != nil {
		t.Run("slow reader", func(t *testing.T) { t.Parallel(); slowReader(t, tr) })
	}
}

// insert commits Dogs names, one commit.
func insert(t *testing.T, d *dt.Daemon, db string, names ...string) {
	t.Helper()
	var docs []string
	for _, n := range names {
		docs = append(docs, fmt.Sprintf(`{"@type":"Dog","@id":"Dog/%s","name":"%s"}`, n, n))
	}
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/"+db, "["+strings.Join(docs, ",")+"]")
}

// order: every commit made once the subscription is registered arrives,
// in commit order, each once, with increasing positions; one commit of
// several documents keeps their order too. Two daemons: the writes land
// on the other one.
func order(t *testing.T, tr Transport) {
	a := dt.Start(t)
	a.CreateDatabase(t, "order", SDL)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	s := tr.Open(t, b, dt.Admin(), "order", "")
	defer s.Close()
	var want []string
	for i := range 10 {
		names := []string{fmt.Sprintf("c%02d", i)}
		if i%3 == 0 {
			names = append(names, fmt.Sprintf("c%02db", i), fmt.Sprintf("c%02da", i))
		}
		insert(t, a, "order", names...)
		for _, n := range names {
			want = append(want, "Dog/"+n)
		}
	}
	var last *sluice.Position
	for i, w := range want {
		pos, id := s.Next(t)
		if id != w {
			t.Fatalf("%s: event %d is %s, want %s", tr.Name, i, id, w)
		}
		p, err := sluice.ParsePosition(pos)
		if err != nil {
			t.Fatalf("%s: event %d: %v", tr.Name, i, err)
		}
		if last != nil && !last.Less(p) {
			t.Fatalf("%s: position %s after %s", tr.Name, p, last)
		}
		last = &p
	}
}

// resume: a subscription resumed from an event's position receives
// exactly the events after it, then goes on live; one resumed from a
// read's position (Sluice-Position) exactly the commits after the read.
func resume(t *testing.T, tr Transport) {
	d := dt.Start(t)
	d.CreateDatabase(t, "resume", SDL)
	s := tr.Open(t, d, dt.Admin(), "resume", "")
	insert(t, d, "resume", "a")
	insert(t, d, "resume", "b", "c")
	s.Next(t)
	pos, id := s.Next(t) // b: resume inside the commit, before c
	if id != "Dog/b" {
		t.Fatalf("%s: second event %s", tr.Name, id)
	}
	s.Close()
	insert(t, d, "resume", "d")
	r := tr.Open(t, d, dt.Admin(), "resume", pos)
	defer r.Close()
	insert(t, d, "resume", "e")
	for _, want := range []string{"Dog/c", "Dog/d", "Dog/e"} {
		if _, id := r.Next(t); id != want {
			t.Fatalf("%s: resumed after b, got %s, want %s", tr.Name, id, want)
		}
	}
	read := d.MustDo(t, 200, dt.Admin(), "GET", "/api/document/admin/resume?type=Dog", nil).Header.Get("Sluice-Position")
	insert(t, d, "resume", "f")
	f := tr.Open(t, d, dt.Admin(), "resume", read)
	defer f.Close()
	if _, id := f.Next(t); id != "Dog/f" {
		t.Fatalf("%s: resumed from a read's position %s, got %s, want Dog/f", tr.Name, read, id)
	}
}

// accessEnd: revoking the reader's role ends its stream with an error,
// and a commit made after the revocation never reaches it.
func accessEnd(t *testing.T, tr Transport) {
	d := dt.Start(t)
	d.CreateDatabase(t, "access", SDL)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/access", `{"user":"rita","role":"read"}`)
	s := tr.Open(t, d, dt.Basic("rita", "rita-password"), "access", "")
	defer s.Close()
	insert(t, d, "access", "before")
	if _, id := s.Next(t); id != "Dog/before" {
		t.Fatalf("%s: event %s", tr.Name, id)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/access", `{"user":"rita","role":"none"}`)
	insert(t, d, "access", "after")
	if msg := s.End(t); msg == "" {
		t.Fatalf("%s: after the role was revoked the stream ended without an error", tr.Name)
	}
}

// shutdown: a daemon that shuts down ends its streams normally.
func shutdown(t *testing.T, tr Transport) {
	d := dt.Start(t)
	d.CreateDatabase(t, "down", SDL)
	s := tr.Open(t, d, dt.Admin(), "down", "")
	defer s.Close()
	insert(t, d, "down", "a")
	s.Next(t)
	stopped := make(chan struct{})
	go func() { defer close(stopped); d.Stop(t) }()
	if msg := s.End(t); msg != "" {
		t.Fatalf("%s: shutdown ended the stream with %q, want a normal end", tr.Name, msg)
	}
	<-stopped
}

// slowReader: a client that stops reading while 10,000 events of about
// 1 KiB are committed (1,000 commits of 10 documents by 4 concurrent
// writers: far more than the socket buffers and its queue hold) later
// receives every one, in the order a client that kept up received them;
// that client received them all meanwhile. The slow one left the share
// they were in to read the log (a catch-up).
func slowReader(t *testing.T, tr Transport) {
	d := dt.Start(t)
	d.CreateDatabase(t, "slow", SDL)
	gate := make(chan struct{})
	slow := tr.OpenGated(t, d, dt.Admin(), "slow", gate)
	defer slow.Close()
	fast := tr.Open(t, d, dt.Admin(), "slow", "")
	defer fast.Close()

	const writers, commits, docs = 4, 250, 10
	const n = writers * commits * docs
	name := strings.Repeat("x", 1024)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for c := range commits {
				var b strings.Builder
				b.WriteString("[")
				for i := range docs {
					if i > 0 {
						b.WriteString(",")
					}
					fmt.Fprintf(&b, `{"@type":"Dog","@id":"Dog/w%d-c%d-d%d","name":"%s"}`, w, c, i, name)
				}
				b.WriteString("]")
				if r := d.Do(t, dt.Admin(), "POST", "/api/document/admin/slow", b.String()); r.Status != 200 {
					t.Errorf("insert: %d %s", r.Status, r.Body)
					return
				}
			}
		})
	}
	got := make([]string, n)
	var last *sluice.Position
	for i := range got {
		pos, id := fast.Next(t)
		got[i] = pos + " " + id
		p, err := sluice.ParsePosition(pos)
		if err != nil {
			t.Fatalf("%s: event %d: %v", tr.Name, i, err)
		}
		if last != nil && !last.Less(p) {
			t.Fatalf("%s: position %s after %s", tr.Name, p, last)
		}
		last = &p
	}
	wg.Wait()
	close(gate)
	for i, want := range got {
		if pos, id := slow.Next(t); pos+" "+id != want {
			t.Fatalf("%s: the slow reader's event %d is %s %s, the fast reader's %s", tr.Name, i, pos, id, want)
		}
	}
	m := string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body)
	if c := dt.MetricValue(m, "sluice_stream_catchups_total"); c < 1 {
		t.Fatalf("%s: catch-ups %v, want at least 1", tr.Name, c)
	}
}

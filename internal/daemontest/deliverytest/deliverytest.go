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
//   - shutdown ends it normally (no error).
package deliverytest

import (
	"fmt"
	"strings"
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
	// NoPositions is set for a transport whose events carry no position
	// (NDJSON): the resume checks are skipped.
	NoPositions bool
}

// Sub is an open subscription.
type Sub interface {
	// Next returns the next event: its position ("" without one) and
	// the id of the Dog it reports.
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
	if !tr.NoPositions {
		t.Run("resume", func(t *testing.T) { t.Parallel(); resume(t, tr) })
	}
	t.Run("access end", func(t *testing.T) { t.Parallel(); accessEnd(t, tr) })
	t.Run("shutdown", func(t *testing.T) { t.Parallel(); shutdown(t, tr) })
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
		if tr.NoPositions {
			continue
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

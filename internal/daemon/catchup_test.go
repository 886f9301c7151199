package daemon_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestResumedStreamsReadTheLogWithinTheirUsersShare: each stream resumed
// from an old position reads the log on a goroutine of its own until it
// reaches the head. One reader's 200 resumed streams ran 5 to 10 reads of
// the log at once on the pool of 16 connections, outside the user's
// quarter of it, and slowed everyone else's requests a thousandfold. A
// user's catch-ups now read at most half its share at once (2 of 16: the
// user's own requests keep the rest), the others waiting their turn
// without having read anything; and every resumed stream still gets every
// event, in order.
func TestResumedStreamsReadTheLogWithinTheirUsersShare(t *testing.T) {
	t.Parallel()
	const perUser = 2 // half of a quarter of the pool of 16
	var mu sync.Mutex
	reading, most := 0, 0 // rita's catch-up reads under way
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	defer open() // before the daemon stops, which waits for the catch-ups
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, CatchUpRead: func(u *sluice.User) func() {
		if u == nil || u.Name != "rita" {
			return func() {}
		}
		mu.Lock()
		reading++
		most = max(most, reading)
		mu.Unlock()
		<-gate
		return func() {
			mu.Lock()
			reading--
			mu.Unlock()
		}
	}})
	d.CreateDatabase(t, "cu", "type Note { text: String }")
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/users", `{"name":"rita","organization":"admin","password":"rita-password"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/roles/admin/cu", `{"user":"rita","role":"read"}`)
	p0 := headPositionOf(t, d, "cu", "Note")
	// 12 commits of 20 documents of 2 KB: a catch-up reads them in
	// pieces of about 64 KiB, several reads.
	const commits, perCommit = 12, 20
	text := strings.Repeat("x", 2000)
	var want []string
	for c := range commits {
		var docs []string
		for i := range perCommit {
			id := fmt.Sprintf("n%02d-%02d", c, i)
			docs = append(docs, fmt.Sprintf(`{"@type":"Note","@id":%q,"text":%q}`, id, text))
			want = append(want, "Note/"+id)
		}
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/cu", "["+strings.Join(docs, ",")+"]")
	}

	const streams = 8
	var ss []*dt.Stream
	for range streams {
		ss = append(ss, d.MustOpenStream(t, dt.Basic("rita", "rita-password"),
			dt.StreamRequest{Path: "/api/subscribe/admin/cu/Note", Header: []string{"Last-Event-ID", p0}}))
	}
	// Every resumed stream asks to read the log at once: two read, the
	// others wait their turn.
	eventually.True(t, dt.StreamWait, "two of rita's catch-ups read the log and the others wait", func() bool {
		mu.Lock()
		r, m := reading, most
		mu.Unlock()
		if m > perUser {
			return true
		}
		waiting := dt.MetricValue(string(d.MustDo(t, 200, dt.Admin(), "GET", "/metrics", nil).Body), "sluice_stream_catchups_waiting")
		return r == perUser && waiting == streams-perUser
	})
	mu.Lock()
	m := most
	mu.Unlock()
	if m > perUser {
		t.Fatalf("rita's resumed streams ran %d reads of the log at once, past %d (half her share of the pool of 16)", m, perUser)
	}
	open()
	for n, s := range ss {
		var got []string
		for len(got) < len(want) {
			f := s.Event()
			if f.Field("id") == "" {
				continue // ": connected"
			}
			var e struct{ Subject string }
			if err := json.Unmarshal([]byte(f.Field("data")), &e); err != nil {
				t.Fatal(err)
			}
			got = append(got, e.Subject)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("resumed stream %d received %d events, not every one in order: %v…", n, len(got), got[:min(len(got), 5)])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most > perUser {
		t.Fatalf("rita's resumed streams ran %d reads of the log at once, past %d", most, perUser)
	}
}

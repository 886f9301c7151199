package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// A failover test runs two Sluice replicas on a primary and a standby
// given as one multi-host URL that accepts only the writable server, kills
// the primary and promotes the standby while writers and subscribers run.

// haURL is the multi-host URL of database postgres on clusters, accepting
// only a writable server.
func haURL(clusters ...*pgtest.Cluster) string {
	var hosts []string
	for _, c := range clusters {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", c.Port))
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// event is one change a subscriber received.
type event struct{ id, subject string }

// subscriber reads the REST change stream of admin/ha/Note from one
// replica, reconnecting from its last event id whenever the stream ends
// with an error, as an EventSource does, until ctx ends. It records every
// event, and the errors that ended its streams.
type subscriber struct {
	base string

	mu     sync.Mutex
	events []event
	errors []string
	gone   chan struct{} // closed when a stream ended with api:Gone or a resume was refused
	// hold, when set, keeps the subscriber from resuming until it is
	// closed; ended is closed when its first stream ended.
	hold, ended chan struct{}
}

func newSubscriber(base string) *subscriber {
	return &subscriber{base: base, gone: make(chan struct{})}
}

// run reads until ctx ends; the first stream starts at the head.
func (s *subscriber) run(ctx context.Context, ready chan<- struct{}) {
	last := ""
	first := true
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.base+"/api/subscribe/admin/ha/Note", nil)
		req.SetBasicAuth("admin", dt.AdminPassword)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil && resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 503 {
				s.note(fmt.Sprintf("resume from %s: %d %s", last, resp.StatusCode, b))
				return
			}
			err = fmt.Errorf("%d", resp.StatusCode)
		}
		if err != nil {
			select { // Postgres is failing over: try again shortly
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		var id, kind string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ": connected") && first:
				first = false
				close(ready)
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "event: "):
				kind = line[7:]
			case strings.HasPrefix(line, "data: ") && kind == "error":
				if strings.Contains(line, "api:Gone") {
					s.note(line)
				}
			case strings.HasPrefix(line, "data: "):
				var e struct{ Subject string }
				_ = json.Unmarshal([]byte(line[6:]), &e)
				s.mu.Lock()
				// The log's positions (/api/changes) carry no tag of
				// their commit; the numbers say which change it is.
				s.events = append(s.events, event{dt.Untag(id), e.Subject})
				s.mu.Unlock()
				last = id
			}
		}
		resp.Body.Close()
		if s.hold != nil && !first {
			select {
			case <-s.ended:
			default:
				close(s.ended)
			}
			select {
			case <-s.hold:
			case <-ctx.Done():
			}
		}
	}
}

// note records an explicit loss and stops the subscriber's resumes.
func (s *subscriber) note(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors = append(s.errors, msg)
	select {
	case <-s.gone:
	default:
		close(s.gone)
	}
}

func (s *subscriber) received() []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event(nil), s.events...)
}

// writer inserts Notes through one replica until ctx ends and returns
// the ids whose commit was acknowledged (200), counting them in n.
func writer(ctx context.Context, base, name string, n *atomic.Int64) []string {
	var acked []string
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("%s-%d", name, i)
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/document/admin/ha", strings.NewReader(`{"@type":"Note","@id":"`+id+`","text":"x"}`))
		req.SetBasicAuth("admin", dt.AdminPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue // the test ended, or the connection broke: not acknowledged
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			acked = append(acked, "Note/"+id)
			n.Add(1)
			continue
		}
		select { // 503 while Postgres fails over
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return acked
}

// logSubjects reads the whole change log of admin/ha through d and
// returns the changes' document ids in log order with their positions.
func logSubjects(t *testing.T, d *dt.Daemon) []event {
	t.Helper()
	var out []event
	after := "0"
	for {
		r := d.MustDo(t, 200, dt.Admin(), "GET", "/api/changes/admin/ha?limit=1000&after="+after, nil)
		var page struct {
			Next    string `json:"next"`
			More    bool   `json:"more"`
			Commits []struct {
				Changes []struct {
					Position string `json:"position"`
					ID       string `json:"id"`
				} `json:"changes"`
			} `json:"commits"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Commits {
			for _, ch := range c.Changes {
				out = append(out, event{dt.Untag(ch.Position), ch.ID}) // compared with ids by their numbers
			}
		}
		if !page.More {
			return out
		}
		after = page.Next
	}
}

// TestFailoverSynchronous: with a synchronous standby, a failover loses no
// acknowledged commit. Two replicas write and stream while the primary is
// killed and the standby promoted; both reconnect to the new primary;
// every acknowledged commit is in the log, and every subscriber, resuming
// from its last event id, receives the log exactly: each change once, in
// order.
func TestFailoverSynchronous(t *testing.T) {
	t.Parallel()
	primary := pgtest.NewPrimary(t, map[string]string{"synchronous_standby_names": "'FIRST 1 (standby1)'"})
	// The standby's configuration is a copy of the primary's: once
	// promoted, with no standby of its own, it must not wait for one (an
	// HA manager such as Patroni rewrites this at failover).
	standby := primary.Standby("standby1", map[string]string{"synchronous_standby_names": "''"})
	url := haURL(primary, standby)
	a := dt.Start(t, dt.WithDatabaseURL(url))
	b := dt.Start(t, dt.WithDatabaseURL(url))
	a.CreateDatabase(t, "ha", "type Note { text: String! }")

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	subs := []*subscriber{newSubscriber(a.URL), newSubscriber(b.URL)}
	for _, s := range subs {
		ready := make(chan struct{})
		wg.Go(func() { s.run(ctx, ready) })
		select {
		case <-ready:
		case <-time.After(time.Minute):
			t.Fatal("a subscriber did not connect")
		}
	}
	writeCtx, stopWriters := context.WithCancel(ctx)
	acked := make([][]string, 2)
	var counts [2]atomic.Int64
	var writers sync.WaitGroup
	for i, d := range []*dt.Daemon{a, b} {
		writers.Go(func() { acked[i] = writer(writeCtx, d.URL, fmt.Sprintf("w%d", i), &counts[i]) })
	}
	// Some commits before the failover, some after.
	eventually.True(t, 2*time.Minute, "20 events before the failover", func() bool { return len(subs[0].received()) >= 20 })
	primary.Stop("immediate")
	standby.Promote()
	n := len(subs[0].received())
	before := [2]int64{counts[0].Load(), counts[1].Load()}
	// Both replicas reconnect to the new primary and commit through it.
	eventually.True(t, 2*time.Minute, "20 events after the failover, and commits through both replicas", func() bool {
		return len(subs[0].received()) >= n+20 && len(subs[1].received()) >= n+20 &&
			counts[0].Load() > before[0] && counts[1].Load() > before[1]
	})
	stopWriters()
	writers.Wait()

	// A write whose client gave up may still commit (a shared group
	// commit is not cancelled), between a read of the log and a look at
	// what a subscriber received: compare the log with what each
	// subscriber had received once it was read, when they agree in
	// length. An event the log does not hold, or one received twice,
	// never lets them agree.
	var log []event
	got := make([][]event, len(subs))
	defer func() {
		if t.Failed() {
			t.Logf("at the last look, the log had %d changes; the subscribers had received %d and %d", len(log), len(got[0]), len(got[1]))
		}
	}()
	eventually.True(t, 2*time.Minute, "every subscriber receives the whole log", func() bool {
		log = logSubjects(t, a)
		for i, s := range subs {
			if got[i] = s.received(); len(got[i]) != len(log) {
				return false
			}
		}
		return true
	})
	inLog := map[string]int{}
	for _, e := range log {
		inLog[e.subject]++
	}
	total := 0
	for _, ids := range acked {
		for _, id := range ids {
			total++
			if inLog[id] != 1 {
				t.Errorf("acknowledged %s is in the log %d times", id, inLog[id])
			}
		}
	}
	for i, s := range subs {
		for j := range log {
			if got[i][j] != log[j] {
				t.Errorf("subscriber %d, event %d: %v, the log has %v", i, j, got[i][j], log[j])
				break
			}
		}
		if len(s.errors) > 0 {
			t.Errorf("subscriber %d was told of a loss: %v", i, s.errors)
		}
	}
	stop()
	wg.Wait()
	t.Logf("%d acknowledged commits, %d in the log", total, len(log))
}

// TestFailoverAsynchronousLossIsExplicit: with an asynchronous standby
// that had not received the last commits when the primary died, those
// commits are lost; the subscriber that had received them is told so
// (its resume is refused with the reason), never resumed silently.
func TestFailoverAsynchronousLossIsExplicit(t *testing.T) {
	t.Parallel()
	primary := pgtest.NewPrimary(t, nil)
	standby := primary.Standby("standby1", nil)
	url := haURL(primary, standby)
	a := dt.Start(t, dt.WithDatabaseURL(url))
	a.CreateDatabase(t, "ha", "type Note { text: String! }")

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	s := newSubscriber(a.URL)
	ready := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.run(ctx, ready) })
	<-ready
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/ha", `{"@type":"Note","@id":"kept","text":"replicated"}`)
	// The standby has everything so far; then it stops receiving.
	eventually.True(t, 2*time.Minute, "the standby replays the first commit", func() bool {
		lsn := primary.Query("SELECT pg_current_wal_lsn()::text")
		return standby.Query("SELECT (pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn)::text") == "true"
	})
	standby.Stop("fast")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/ha", `{"@type":"Note","@id":"lost","text":"acknowledged, never replicated"}`)
	eventually.True(t, 2*time.Minute, "the subscriber receives the commit that will be lost", func() bool { return len(s.received()) == 2 })

	primary.Stop("immediate")
	standby.Start()
	standby.Promote()
	select {
	case <-s.gone:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the subscriber was not told of the loss; it received %v", s.received())
	}
	s.mu.Lock()
	msg := strings.Join(s.errors, "\n")
	s.mu.Unlock()
	t.Logf("the subscriber was told: %s", msg)
	if !strings.Contains(msg, "not in the log") && !strings.Contains(msg, "api:Gone") {
		t.Fatalf("the subscriber was told: %s", msg)
	}
	// The lost commit is not in the log; the one before it is.
	var ids []string
	for _, e := range logSubjects(t, a) {
		ids = append(ids, e.subject)
	}
	if strings.Join(ids, ",") != "Note/kept" {
		t.Fatalf("the log after the failover: %v", ids)
	}
	stop()
	wg.Wait()
}

// TestFailoverAsynchronousLossRefilledIsExplicit: as
// TestFailoverAsynchronousLossIsExplicit, but a new commit takes the lost
// one's number on the new primary before the subscriber, whose stream
// ended at the failover, resumes from its last event id, in the lost
// commit: the log's end is not before it, and only the event id's tag of
// its commit tells the new commit from the lost one. The resume ends
// with api:Gone, never resumed silently past a commit it will not get.
func TestFailoverAsynchronousLossRefilledIsExplicit(t *testing.T) {
	t.Parallel()
	primary := pgtest.NewPrimary(t, nil)
	standby := primary.Standby("standby1", nil)
	url := haURL(primary, standby)
	a := dt.Start(t, dt.WithDatabaseURL(url))
	a.CreateDatabase(t, "ha", "type Note { text: String! }")

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	s := newSubscriber(a.URL)
	s.hold, s.ended = make(chan struct{}), make(chan struct{})
	ready := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.run(ctx, ready) })
	<-ready
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/ha", `{"@type":"Note","@id":"kept","text":"replicated"}`)
	eventually.True(t, 2*time.Minute, "the standby replays the first commit", func() bool {
		lsn := primary.Query("SELECT pg_current_wal_lsn()::text")
		return standby.Query("SELECT (pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn)::text") == "true"
	})
	standby.Stop("fast")
	a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/ha", `{"@type":"Note","@id":"lost","text":"acknowledged, never replicated"}`)
	eventually.True(t, 2*time.Minute, "the subscriber receives the commit that will be lost", func() bool { return len(s.received()) == 2 })

	primary.Stop("immediate")
	select {
	case <-s.ended:
	case <-time.After(2 * time.Minute):
		t.Fatal("the stream did not end when Postgres became unreachable")
	}
	standby.Start()
	standby.Promote()
	// The new primary's next commit takes the lost one's number (a write
	// whose outcome was unknown may take it too: each tries a new id).
	tries := 0
	eventually.True(t, 2*time.Minute, "a write on the new primary is acknowledged", func() bool {
		tries++
		return a.Do(t, dt.Admin(), "POST", "/api/document/admin/ha", fmt.Sprintf(`{"@type":"Note","@id":"new-%d","text":"after the failover"}`, tries)).Status == 200
	})
	if ids := logSubjects(t, a); len(ids) < 2 || ids[0].subject != "Note/kept" || !strings.HasPrefix(ids[1].subject, "Note/new-") {
		t.Fatalf("the log after the failover: %v", ids)
	}
	last := s.received()[1].id
	close(s.hold)
	select {
	case <-s.gone:
	case <-time.After(time.Minute):
		t.Fatalf("the resume from %s, in the lost commit, was not refused; the subscriber received %v", last, s.received())
	}
	s.mu.Lock()
	msg := strings.Join(s.errors, "\n")
	s.mu.Unlock()
	t.Logf("the subscriber was told: %s", msg)
	if !strings.Contains(msg, "api:Gone") || !strings.Contains(msg, "no longer holds") {
		t.Fatalf("the subscriber was told: %s", msg)
	}
	if got := s.received(); len(got) != 2 {
		t.Fatalf("the subscriber received %v", got)
	}
	stop()
	wg.Wait()
}

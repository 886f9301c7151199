package changefeed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// fakeStore is the tailer's Store over a memLog (database 1), with
// notifications sent by the test and failures it injects.
type fakeStore struct {
	*memLog
	notes   chan int64
	listens atomic.Int64
	// listenFail makes the current listener fail once.
	listenFail chan struct{}
	// down makes every read fail as an unreachable Postgres does.
	down atomic.Bool
	// unreadable makes every read of the log fail as one of a commit this
	// process cannot decode does; timeout as a statement that timed out.
	unreadable, timeout atomic.Bool
	timeouts            atomic.Int64 // reads failed so
	// readsLeft, while limitReads is set, is how many more reads of the
	// log succeed: the reads after them fail as timed out.
	limitReads atomic.Bool
	readsLeft  atomic.Int64
	// reads and headsRead count the calls of ReadLog and Heads that
	// answered; afters (under mu) holds where each read started.
	reads, headsRead atomic.Int64
	afters           []sluice.Position
	// deleted makes the heads leave database 1 out: it was deleted.
	deleted atomic.Bool
}

func (f *fakeStore) ReadLog(ctx context.Context, d *sluice.Database, after sluice.Position, of sluice.Stamp, limit int, maxBytes int64) ([]*sluice.Commit, bool, error) {
	defer f.reads.Add(1)
	f.mu.Lock()
	f.afters = append(f.afters, after)
	f.mu.Unlock()
	if f.unreadable.Load() {
		return nil, false, fmt.Errorf("commit 2: %w: afters of change 0: exceeded max depth", sluice.ErrUnreadableCommit)
	}
	if f.timeout.Load() || f.limitReads.Load() && f.readsLeft.Add(-1) < 0 {
		f.timeouts.Add(1)
		return nil, false, sluice.Errorf(sluice.CodeUnavailable, "the statement took longer than its statement_timeout")
	}
	return f.memLog.ReadLog(ctx, d, after, of, limit, maxBytes)
}

func newFakeStore() *fakeStore {
	return &fakeStore{memLog: &memLog{}, notes: make(chan int64, 16), listenFail: make(chan struct{}, 1)}
}

func (f *fakeStore) Heads(ctx context.Context) ([]sluice.Head, int64, error) {
	if f.down.Load() {
		return nil, 0, fmt.Errorf("heads: %w", sluice.ErrStorageUnavailable)
	}
	if f.deleted.Load() {
		return nil, int64(len(f.access)), nil
	}
	h, err := f.History(ctx, 1)
	if err != nil {
		return nil, 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.headsRead.Add(1)
	return []sluice.Head{{DatabaseID: 1, Epoch: testDB.Epoch, History: h}}, int64(len(f.access)), nil
}

func (f *fakeStore) ResetConnections() {}

func (f *fakeStore) Listen(context.Context) (Listener, error) {
	f.listens.Add(1)
	return fakeListener{f}, nil
}

type fakeListener struct{ f *fakeStore }

func (l fakeListener) Wait(ctx context.Context) (int64, error) {
	select {
	case id := <-l.f.notes:
		return id, nil
	case <-l.f.listenFail:
		return 0, errors.New("connection lost")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (fakeListener) Close(context.Context) error { return nil }

// runTailer starts a hub and a tailer over store; both stop at the end of
// the test.
func runTailer(t *testing.T, store *fakeStore, o TailerOptions) (*Hub, *Tailer) {
	t.Helper()
	h := NewHub(store, HubOptions{Recheck: 10 * time.Millisecond, PieceBytes: o.PieceBytes})
	tl := NewTailer(store, h, o)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { tl.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait(); h.Close() })
	return h, tl
}

// changesOf reads pieces from s until it has n changes, and returns their
// positions, untagged (TestResumeFromReplacedCommitIsGone tests tags).
func changesOf(t *testing.T, s *Subscription, n int) []sluice.Position {
	t.Helper()
	var out []sluice.Position
	timeout := time.After(wait)
	for len(out) < n {
		select {
		case c := <-s.Commits():
			for _, ch := range c.Changes {
				out = append(out, c.Position(ch.Index).Untagged())
			}
			if last := c.Changes[len(c.Changes)-1].Index; c.Partial == (last == c.NumChanges-1) {
				t.Fatalf("piece of commit %d ending at change %d of %d marked Partial %v", c.Seq, last, c.NumChanges, c.Partial)
			}
		case <-timeout:
			t.Fatalf("received %d of %d changes", len(out), n)
		}
	}
	return out
}

// TestTailerHandsOnLargeCommitsInPieces: a commit larger than a piece
// reaches a subscriber in pieces, every change once and in order, both
// live and through a catch-up from a position inside it.
func TestTailerHandsOnLargeCommitsInPieces(t *testing.T) {
	t.Parallel()
	store := newFakeStore()
	h, tl := runTailer(t, store, TailerOptions{Poll: time.Hour, PieceBytes: 7})
	waitFor(t, func() bool { return tl.Running() })
	live := subscribe(t, h, nil, Options{})
	classes := make([]string, 40)
	for i := range classes {
		classes[i] = "T"
	}
	store.add(classes...)
	store.add("T")
	tl.Wake(1)
	got := changesOf(t, live, 41)
	for i, p := range got {
		want := sluice.Position{Epoch: testDB.Epoch, Seq: 1, Index: i}
		if i == 40 {
			want = sluice.Position{Epoch: testDB.Epoch, Seq: 2, Index: 0}
		}
		if p != want {
			t.Fatalf("change %d is %v, want %v", i, p, want)
		}
	}
	resumed := subscribe(t, h, &sluice.Position{Epoch: testDB.Epoch, Seq: 1, Index: 22}, Options{})
	if got := changesOf(t, resumed, 18); got[0].Index != 23 || got[17] != (sluice.Position{Epoch: testDB.Epoch, Seq: 2, Index: 0}) {
		t.Fatalf("resumed inside the commit: %v", got)
	}
}

// TestTailerWakeUps: a notification wakes the tailer; a lost one is
// covered by the poll; a lost listener connection is reopened.
func TestTailerWakeUps(t *testing.T) {
	t.Parallel()
	t.Run("notification", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		h, tl := runTailer(t, store, TailerOptions{Poll: time.Hour})
		waitFor(t, func() bool { return tl.Running() && store.listens.Load() == 1 })
		s := subscribe(t, h, nil, Options{})
		store.add()
		store.notes <- 1
		if got := receive(t, s, 1); got[0] != 1 {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("poll", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		h, tl := runTailer(t, store, TailerOptions{Poll: 5 * time.Millisecond})
		waitFor(t, func() bool { return tl.Running() })
		s := subscribe(t, h, nil, Options{})
		store.add() // nobody notifies
		if got := receive(t, s, 1); got[0] != 1 {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("reconnect", func(t *testing.T) {
		t.Parallel()
		store := newFakeStore()
		h, tl := runTailer(t, store, TailerOptions{Poll: time.Hour})
		waitFor(t, func() bool { return tl.Running() && store.listens.Load() == 1 })
		s := subscribe(t, h, nil, Options{})
		store.add()
		store.listenFail <- struct{}{} // the commit's notification was lost with the connection
		if got := receive(t, s, 1); got[0] != 1 || store.listens.Load() != 2 {
			t.Fatalf("got %v after %d listens", got, store.listens.Load())
		}
	})
}

// TestTailerAppliesAccessChangesFirst: an access change read with commits
// (or alone, on a poll) ends the streams it affects before the commits
// read with it reach them.
func TestTailerAppliesAccessChangesFirst(t *testing.T) {
	t.Parallel()
	store := newFakeStore()
	h, tl := runTailer(t, store, TailerOptions{Poll: time.Hour})
	waitFor(t, func() bool { return tl.Running() })
	s := guarded(t, h, ullaRead, nil)
	store.add()
	tl.Wake(1)
	if got := receive(t, s, 1); got[0] != 1 {
		t.Fatalf("got %v", got)
	}
	store.change(sluice.AccessChange{Kind: sluice.AccessToken, UserID: 7, TokenID: 3})
	store.add() // commit 2, after the change
	tl.Wake(1)
	if err := ended(t, s); !IsRevoked(err) {
		t.Fatalf("ended with %v", err)
	}
	for len(s.Commits()) > 0 {
		if c := <-s.Commits(); c.Seq == 2 {
			t.Fatal("commit 2, read after the change, was handed on")
		}
	}
	// With nothing committed, the poll's read of the access version ends
	// a stream too.
	s2 := guarded(t, h, &sluice.Grant{Credential: sluice.Credential{User: ulla, AccessVersion: 1}, Database: testDB, Role: sluice.RoleRead}, nil)
	store.change(sluice.AccessChange{Kind: sluice.AccessUser, UserID: 7})
	tl.Wake(0)
	if err := ended(t, s2); !IsRevoked(err) {
		t.Fatalf("ended with %v", err)
	}
}

// TestTailerOutageEndsStreams: Postgres unreachable ends every stream with
// an error telling clients to reconnect; the tailer reports it is not
// running until reads succeed again.
func TestTailerOutageEndsStreams(t *testing.T) {
	t.Parallel()
	store := newFakeStore()
	h, tl := runTailer(t, store, TailerOptions{Poll: 5 * time.Millisecond})
	waitFor(t, func() bool { return tl.Running() })
	s := guarded(t, h, ullaRead, nil)
	store.down.Store(true)
	if err := ended(t, s); !errors.Is(err, sluice.ErrStorageUnavailable) {
		t.Fatalf("ended with %v", err)
	}
	waitFor(t, func() bool { return !tl.Running() })
	store.down.Store(false)
	waitFor(t, func() bool { return tl.Running() })
}

// waitFor waits until cond holds, failing the test after wait.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	eventually.True(t, wait, "the condition", cond)
}

// TestTailerRewoundLogEndsStreams: when a database's log ends before
// commits the tailer read (lost in a failover to an asynchronous standby,
// or by a restore), a subscription that received them ends with a Gone
// error instead of taking the commits that reuse their sequence numbers;
// one from the log's new end gets the commits written after the loss.
func TestTailerRewoundLogEndsStreams(t *testing.T) {
	t.Parallel()
	store := newFakeStore()
	store.add()
	h, tl := runTailer(t, store, TailerOptions{Poll: 5 * time.Millisecond})
	waitFor(t, func() bool { return tl.Running() })
	s := subscribe(t, h, nil, Options{})
	store.add()
	store.add()
	if got := receive(t, s, 2); got[0] != 2 || got[1] != 3 {
		t.Fatalf("before the loss: got %v", got)
	}

	store.mu.Lock()
	store.commits = store.commits[:1] // commits 2 and 3 are lost
	store.mu.Unlock()
	if err := ended(t, s); sluice.ErrorCode(err) != sluice.CodeGone || !strings.Contains(err.Error(), "now ends at commit 1") {
		t.Fatalf("after the loss: %v", err)
	}
	from := sluice.Position{Epoch: testDB.Epoch, Seq: 1, Index: sluice.WholeCommit}
	late := subscribe(t, h, &from, Options{})
	store.add() // a new commit 2
	if got := receive(t, late, 1); got[0] != 2 {
		t.Fatalf("a subscription from commit 1 after the loss: got %v", got)
	}
}

// TestTailerEndsStreamsOfAnUnreadableLog: a read of the log that failed
// otherwise (a timeout) is retried, ending nothing; a database whose log
// cannot be read past a commit ends its live streams with an error once
// the read failed twice, and its catching-up ones after a few tries,
// rather than leave them waiting; the tailer is still running.
func TestTailerEndsStreamsOfAnUnreadableLog(t *testing.T) {
	t.Parallel()
	store := newFakeStore()
	h, tl := runTailer(t, store, TailerOptions{Poll: time.Hour})
	waitFor(t, func() bool { return tl.Running() })
	live := subscribe(t, h, nil, Options{})
	store.add("T")
	tl.Wake(1)
	changesOf(t, live, 1)
	// A read that timed out (Postgres answers) is tried again: nothing
	// ends, and the commit reaches the stream once a read succeeds.
	store.timeout.Store(true)
	store.add("T")
	waitFor(t, func() bool {
		tl.Wake(1)
		return store.timeouts.Load() >= 3
	})
	select {
	case <-live.Done():
		t.Fatalf("a timed-out read ended the stream: %v", live.Err())
	default:
	}
	store.timeout.Store(false)
	tl.Wake(1)
	changesOf(t, live, 1)
	store.unreadable.Store(true)
	store.add("T")
	ended := func(s *Subscription) bool {
		select {
		case <-s.Done():
			return sluice.ErrorCode(s.Err()) == sluice.CodeInternal
		default:
			return false
		}
	}
	waitFor(t, func() bool {
		tl.Wake(1)
		return ended(live)
	})
	if !tl.Running() {
		t.Error("the tailer is not running after one database's log failed to be read")
	}
	resumed := subscribe(t, h, &sluice.Position{Epoch: testDB.Epoch, Seq: 1, Index: sluice.WholeCommit}, Options{})
	waitFor(t, func() bool { return ended(resumed) })
}

// TestTailerForgetsTheSeriesOfDeletedDatabases: the metric series of a
// database the tailer finds deleted are deleted, at once and again
// forgetAgain later (a count of work its streams had under way comes
// after the first); another database's are kept.
func TestTailerForgetsTheSeriesOfDeletedDatabases(t *testing.T) {
	t.Parallel()
	store := newFakeStore()
	reg := metrics.NewRegistry()
	m := metrics.NewStream(reg)
	start := time.Now()
	var elapsed atomic.Int64
	now := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	h, tl := runTailer(t, store, TailerOptions{Poll: 5 * time.Millisecond, Metrics: m, Now: now})
	waitFor(t, tl.Running)
	s := subscribe(t, h, nil, Options{})
	store.add("T")
	tl.Wake(1)
	receive(t, s, 1)
	m.LiveReads.WithLabelValues("2").Inc()
	// series returns how many series have label database="db".
	series := func(db string) int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "database" && l.GetValue() == db {
						n++
					}
				}
			}
		}
		return n
	}
	// The tailer counts a commit as published after it hands it to the
	// hub, so the subscriber may have it first.
	eventually.True(t, wait, "a series of database 1 before it is deleted", func() bool { return series("1") > 0 })

	store.deleted.Store(true)
	if err := ended(t, s); sluice.ErrorCode(err) != sluice.CodeNotFound {
		t.Fatalf("the subscription of the deleted database: %v", err)
	}
	eventually.True(t, wait, "no series of the deleted database", func() bool { return series("1") == 0 })
	m.LiveReads.WithLabelValues("1").Inc() // a read under way when it was deleted
	elapsed.Add(int64(forgetAgain))
	eventually.True(t, wait, "no series of the deleted database, forgetAgain later", func() bool { return series("1") == 0 })
	if n := series("2"); n != 1 {
		t.Errorf("database 2 has %d series, want 1", n)
	}
}

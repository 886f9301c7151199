package changefeed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// The hub's own tests use an in-memory log so that every interleaving the
// tests force is deterministic; the tailer and the whole path run against
// Postgres in internal/rest's end-to-end tests.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 30 * time.Second

// memLog is a commit log in memory: commits pruned+1..last of database 1.
type memLog struct {
	mu      sync.Mutex
	commits []*sluice.Commit
	pruned  int64
	uids    int64 // the last uid drawn
	access  []sluice.AccessChange
	// readingAccess, when set, is called as AccessChanges begins, with
	// the range asked for, without l.mu (a read of Postgres, which may
	// take long).
	readingAccess func(after, upTo int64)
}

var testDB = &sluice.Database{ID: 1, Org: "o", Name: "db", Epoch: "ep"}

func (l *memLog) History(_ context.Context, id int64) (sluice.History, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id != testDB.ID {
		return sluice.History{}, sluice.Errorf(sluice.CodeNotFound, "no database %d", id)
	}
	return sluice.History{LastSeq: l.pruned + int64(len(l.commits)), PrunedSeq: l.pruned}, nil
}

// ChangeCount counts the changes of commit seq, as postgres.DB's does.
func (l *memLog) ChangeCount(_ context.Context, _, seq int64) (int, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.commits {
		if c.Seq == seq {
			return len(c.Changes), true, nil
		}
	}
	return 0, false, nil
}

// ReadLog reads like postgres.DB.ReadLog: commits after position after,
// at most limit, cut into pieces of about maxBytes of changes (a change
// without images counts one byte); ErrCommitReplaced when the log holds
// another commit after.Seq than of (or than of's tag).
func (l *memLog) ReadLog(_ context.Context, d *sluice.Database, after sluice.Position, of sluice.Stamp, limit int, maxBytes int64) ([]*sluice.Commit, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := after.Seq - l.pruned - 1; !of.IsZero() && i >= 0 && i < int64(len(l.commits)) && !of.Is(l.commits[i].Stamp()) {
		return nil, false, fmt.Errorf("commit %d of %s: %w", after.Seq, d.Path(), sluice.ErrCommitReplaced)
	}
	m := sluice.CursorAt(after)
	if m.Seq+1 <= l.pruned && l.pruned > 0 {
		return nil, false, sluice.Errorf(sluice.CodeGone, "pruned")
	}
	if m.Part >= 0 && m.Seq+1 > l.pruned+int64(len(l.commits)) {
		// Inside a commit the log does not hold (lost, see Hub.rewind):
		// Postgres' read answers so too.
		return nil, false, sluice.Errorf(sluice.CodeGone, "commit %d was pruned before the rest of its changes were read", m.Seq+1)
	}
	var out []*sluice.Commit
	var used int64
	for _, c := range l.commits {
		if c.Seq <= m.Seq {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		piece := *c
		piece.Changes = nil
		for _, ch := range c.Changes {
			if c.Seq == m.Seq+1 && ch.Index <= m.Part {
				continue
			}
			size := max(int64(len(ch.Before)+len(ch.After)), 1)
			if used+size > maxBytes && (len(piece.Changes) > 0 || len(out) > 0) {
				if len(piece.Changes) > 0 {
					piece.Partial = true
					out = append(out, &piece)
				}
				return out, true, nil
			}
			used += size
			piece.Changes = append(piece.Changes, ch)
		}
		if c.Seq == m.Seq+1 && m.Part >= 0 && len(piece.Changes) == 0 {
			continue // read whole before
		}
		out = append(out, &piece)
	}
	return out, false, nil
}

// AccessChanges returns the access changes in (after, upTo].
func (l *memLog) AccessChanges(_ context.Context, after, upTo int64) ([]sluice.AccessChange, error) {
	if l.readingAccess != nil {
		l.readingAccess(after, upTo)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sluice.AccessChange
	for _, c := range l.access {
		if c.Version > after && c.Version <= upTo {
			out = append(out, c)
		}
	}
	return out, nil
}

// add appends a commit of the given classes (one change each).
func (l *memLog) add(classes ...string) *sluice.Commit {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.uids++
	c := &sluice.Commit{DatabaseID: testDB.ID, Epoch: testDB.Epoch, Seq: l.pruned + int64(len(l.commits)) + 1, UID: l.uids, Time: time.Now(),
		AccessVersion: int64(len(l.access))}
	if len(classes) == 0 {
		classes = []string{"T"}
	}
	for i, cl := range classes {
		c.Changes = append(c.Changes, sluice.Change{Index: i, Class: cl, DocID: fmt.Sprintf("%s/%d", cl, i), Op: sluice.OpAdded})
	}
	c.NumChanges = len(c.Changes)
	l.commits = append(l.commits, c)
	return c
}

// prune drops commits up to seq.
func (l *memLog) prune(seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commits = l.commits[seq-l.pruned:]
	l.pruned = seq
}

func newHub(t *testing.T, o HubOptions) (*Hub, *memLog) {
	t.Helper()
	l := &memLog{}
	if o.Recheck == 0 {
		o.Recheck = 10 * time.Millisecond
	}
	h := NewHub(l, o)
	t.Cleanup(h.Close)
	return h, l
}

// receive reads n commits from s and returns their sequence numbers.
func receive(t *testing.T, s *Subscription, n int) []int64 {
	t.Helper()
	var out []int64
	timeout := time.After(wait)
	for len(out) < n {
		select {
		case c := <-s.Commits():
			out = append(out, c.Seq)
		case <-timeout:
			t.Fatalf("received %d of %d commits (%v…)", len(out), n, out[max(0, len(out)-5):])
		}
	}
	return out
}

func seqs(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func subscribe(t *testing.T, h *Hub, from *sluice.Position, o Options) *Subscription {
	t.Helper()
	s, err := h.Subscribe(context.Background(), testDB, from, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestHubLiveInOrder(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	h.track(1, 0)
	s := subscribe(t, h, nil, Options{})
	for range 10 {
		h.publish(l.add())
	}
	if got := receive(t, s, 10); !equal(got, seqs(1, 10)) {
		t.Fatalf("got %v", got)
	}
	if !s.live.Load() {
		t.Fatal("a subscriber at the head should be live")
	}
}

func TestHubSlowSubscriberCatchesUpWithoutBlocking(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{QueueSize: 2, BatchSize: 7})
	h.track(1, 0)
	slow := subscribe(t, h, nil, Options{})
	fast := subscribe(t, h, nil, Options{})
	const n = 1000
	fastGot := make(chan []int64)
	go func() { fastGot <- receive(t, fast, n) }()
	// publish never blocks: the slow subscriber reads nothing meanwhile.
	for range n {
		h.publish(l.add())
	}
	if got := <-fastGot; !equal(got, seqs(1, n)) {
		t.Fatalf("fast subscriber got %v", got)
	}
	if slow.catchUps.Load() == 0 {
		t.Fatal("the slow subscriber never overflowed")
	}
	if got := receive(t, slow, n); !equal(got, seqs(1, n)) {
		t.Fatalf("slow subscriber got %d commits, not 1..%d in order", len(got), n)
	}
	// Caught up, it rejoins live delivery.
	h.publish(l.add())
	if got := receive(t, slow, 1); got[0] != n+1 {
		t.Fatalf("after catching up: %v", got)
	}
	// The commit may reach it through its catch-up, which makes it live
	// once it has handed the commit over: wait for that, not the commit.
	eventually.True(t, wait, "the slow subscriber rejoins live delivery", slow.live.Load)
}

// TestHubHandoffRace subscribes from now and resumes from random positions
// while the tailer publishes, and checks each subscriber receives exactly
// the commits after its start: no gap, no duplicate across the
// catch-up/live handoff.
func TestHubHandoffRace(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{QueueSize: 4, BatchSize: 3})
	h.track(1, 0)
	const n = 3000
	h.publish(l.add())
	published := make(chan struct{})
	go func() {
		defer close(published)
		for range n - 1 {
			h.publish(l.add())
		}
	}()
	var wg sync.WaitGroup
	subscribed := make(chan struct{}, 40)
	for i := range 40 {
		wg.Go(func() {
			before, _ := l.History(context.Background(), 1)
			var from *sluice.Position
			if i%2 == 0 {
				p := sluice.Position{Epoch: "ep", Seq: 1 + rand.Int64N(before.LastSeq), Index: 0}
				from = &p
			}
			s, err := h.Subscribe(context.Background(), testDB, from, Options{})
			after, _ := l.History(context.Background(), 1)
			subscribed <- struct{}{}
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			// The first commit: right after the position of a resume; for
			// "now", after a head read between the two History calls.
			lo, hi := before.LastSeq+1, after.LastSeq+1
			if from != nil {
				lo, hi = from.Seq+1, from.Seq+1
			}
			var got []int64
			timeout := time.After(wait)
			for len(got) == 0 || got[len(got)-1] < n+1 {
				select {
				case c := <-s.Commits():
					got = append(got, c.Seq)
					if rand.IntN(50) == 0 {
						time.Sleep(time.Millisecond) // a consumer that stalls now and then
					}
				case <-timeout:
					t.Errorf("subscriber %d: %d commits; live %v cursor %d", i, len(got), s.live.Load(), s.cursor.Load())
					return
				}
			}
			if got[0] < lo || got[0] > hi || !equal(got, seqs(got[0], n+1)) {
				t.Errorf("subscriber %d: %d commits from %d (want start in %d..%d), not contiguous to %d", i, len(got), got[0], lo, hi, n+1)
			}
		})
	}
	<-published
	for range 40 {
		<-subscribed
	}
	h.publish(l.add()) // n+1: the end mark every subscriber receives
	wg.Wait()
}

func TestHubResumeInsideCommit(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	l.add("A")
	l.add("A", "B", "A")
	h.track(1, 2)
	s := subscribe(t, h, &sluice.Position{Epoch: "ep", Seq: 2, Index: 0}, Options{})
	select {
	case c := <-s.Commits():
		if c.Seq != 2 || len(c.Changes) != 2 || c.Changes[0].Index != 1 || c.Changes[1].Index != 2 {
			t.Fatalf("resumed commit %+v", c)
		}
	case <-time.After(wait):
		t.Fatal("no commit")
	}
	// The shared commit itself is untouched.
	if len(l.commits[1].Changes) != 3 {
		t.Fatal("the resume trimmed the shared commit")
	}
	// Resuming after the last change of a commit skips it entirely.
	s2 := subscribe(t, h, &sluice.Position{Epoch: "ep", Seq: 2, Index: 2}, Options{})
	h.publish(l.add("A"))
	if got := receive(t, s2, 1); got[0] != 3 {
		t.Fatalf("got %v", got)
	}
}

// TestHubResumePastACommitsEnd: a resume from an index past the last
// change of its commit names no event and is refused, with the error a
// read of the past gives (sluice.CheckIndex), before any subscription is
// registered; the commit's end and its changes resume. Without the check
// the hub took the position as the end of the commit.
func TestHubResumePastACommitsEnd(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	l.add("A")
	l.add("A", "B")
	h.track(1, 2)
	for _, index := range []int{2, 3, 1000} {
		from := &sluice.Position{Epoch: "ep", Seq: 2, Index: index}
		_, err := h.Subscribe(context.Background(), testDB, from, Options{})
		want := "position " + from.String() + " names no event of o/db: commit 2 has 2 changes, at indexes 0 to 1 (the position of its end is ep-2-2147483647)"
		if sluice.ErrorCode(err) != sluice.CodeInvalid || sluice.ErrorMessage(err) != want {
			t.Fatalf("resume from %s: %v, want %q", from, err, want)
		}
	}
	if subs := h.Subscriptions(); len(subs) != 0 {
		t.Fatalf("a refused resume left %d subscriptions", len(subs))
	}
	for _, index := range []int{0, 1, sluice.WholeCommit} {
		subscribe(t, h, &sluice.Position{Epoch: "ep", Seq: 2, Index: index}, Options{})
	}
}

func TestHubClassFilter(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{QueueSize: 2})
	h.track(1, 0)
	s := subscribe(t, h, nil, Options{Classes: []string{"Dog", "Beagle"}})
	h.publish(l.add("Cat"))
	h.publish(l.add("Cat", "Beagle"))
	for range 100 {
		h.publish(l.add("Cat")) // never queued, so no overflow
	}
	h.publish(l.add("Dog"))
	if got := receive(t, s, 2); !equal(got, []int64{2, 103}) {
		t.Fatalf("got %v", got)
	}
	if s.catchUps.Load() != 0 {
		t.Fatal("commits of other classes filled the queue")
	}
}

// Classes computed for a schema version do not hold for a later one (a
// class added, a new implementation of an interface): a commit made under
// a later version is delivered whatever its classes, until the consumer,
// revised, sets the classes of its new version. Live and catching up
// alike. Nor for an older one (a class that implemented an interface then
// and no longer does): a resume gets the commits of older versions
// whatever their classes.
func TestHubClassFilterFollowsSchemaVersions(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	h.track(1, 0)
	add := func(version int, classes ...string) *sluice.Commit {
		c := l.add(classes...)
		c.SchemaVersion = version
		return c
	}
	live := subscribe(t, h, nil, Options{Classes: []string{"Dog"}, ClassesVersion: 1})
	for _, c := range []*sluice.Commit{
		add(1, "Bird"), // 1: not a class of version 1
		add(1, "Dog"),  // 2
		add(2, "Bird"), // 3: version 2 may have it
		add(2, "Cat"),  // 4: so may it this
	} {
		h.publish(c)
	}
	if got := receive(t, live, 3); !equal(got, []int64{2, 3, 4}) {
		t.Fatalf("live got %v, want [2 3 4]", got)
	}
	live.SetClasses([]string{"Dog", "Bird"}, 2)
	for _, c := range []*sluice.Commit{
		add(2, "Cat"),  // 5: not a class of version 2
		add(2, "Bird"), // 6
		add(3, "Cat"),  // 7: version 3 may have it
	} {
		h.publish(c)
	}
	if got := receive(t, live, 2); !equal(got, []int64{6, 7}) {
		t.Fatalf("live got %v after SetClasses, want [6 7]", got)
	}
	resumed := subscribe(t, h, &sluice.Position{Epoch: "ep", Seq: 0, Index: sluice.WholeCommit}, Options{Classes: []string{"Dog"}, ClassesVersion: 1})
	if got := receive(t, resumed, 6); !equal(got, []int64{2, 3, 4, 5, 6, 7}) {
		t.Fatalf("a catch-up got %v, want [2 3 4 5 6 7]", got)
	}
	// A resume whose classes were computed for a later version than the
	// commits it catches up on gets those commits whatever their
	// classes: its consumer selects their changes by the classes as they
	// were then (a class that implemented an interface then and no
	// longer does). Those of its own version pass by its classes.
	for _, c := range []*sluice.Commit{
		add(3, "Cat"), // 8: not a class of version 3
		add(3, "Dog"), // 9
	} {
		h.publish(c)
	}
	later := subscribe(t, h, &sluice.Position{Epoch: "ep", Seq: 0, Index: sluice.WholeCommit}, Options{Classes: []string{"Dog"}, ClassesVersion: 3})
	if got := receive(t, later, 7); !equal(got, []int64{1, 2, 3, 4, 5, 6, 9}) {
		t.Fatalf("a catch-up with the classes of version 3 got %v, want [1 2 3 4 5 6 9]", got)
	}
}

func TestHubRefusesExpiredAndForeignPositions(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	for range 5 {
		l.add()
	}
	l.prune(3)
	h.track(1, 5)
	for _, c := range []struct {
		p    sluice.Position
		code sluice.Code
	}{
		{sluice.Position{Epoch: "other", Seq: 4}, sluice.CodeGone},
		{sluice.Position{Epoch: "ep", Seq: 2}, sluice.CodeGone},
		{sluice.Position{Epoch: "ep", Seq: 3}, sluice.CodeGone}, // inside the newest pruned commit
		{sluice.Position{Epoch: "ep", Seq: 6}, sluice.CodeInvalid},
	} {
		if _, err := h.Subscribe(context.Background(), testDB, &c.p, Options{}); sluice.ErrorCode(err) != c.code {
			t.Errorf("resume from %v: %v, want %s", c.p, err, c.code)
		}
	}
	s := subscribe(t, h, &sluice.Position{Epoch: "ep", Seq: 4}, Options{})
	if got := receive(t, s, 1); got[0] != 5 {
		t.Fatalf("got %v", got)
	}
}

// TestHubPrunedDuringCatchUp: history pruned under a subscriber that is
// still reading the log ends it with Gone after what it could read, never
// a silent gap.
func TestHubPrunedDuringCatchUp(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{QueueSize: 1, BatchSize: 1})
	for range 10 {
		l.add()
	}
	h.track(1, 10)
	s := subscribe(t, h, &sluice.Position{Epoch: "ep", Seq: 1, Index: 0}, Options{})
	// The catch-up holds commit 2 in the queue and commit 3 in hand.
	got := receive(t, s, 1)
	l.prune(6)
	for {
		select {
		case c := <-s.Commits():
			got = append(got, c.Seq)
			continue
		case <-s.Done():
		case <-time.After(wait):
			t.Fatal("the subscription did not end")
		}
		break
	}
	for len(s.Commits()) > 0 {
		got = append(got, (<-s.Commits()).Seq)
	}
	if sluice.ErrorCode(s.Err()) != sluice.CodeGone {
		t.Fatalf("err %v", s.Err())
	}
	if !equal(got, seqs(2, got[len(got)-1])) || got[len(got)-1] >= 7 {
		t.Fatalf("delivered %v before the gap", got)
	}
}

func TestHubWaitsForTailerOnNewDatabase(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	s := subscribe(t, h, nil, Options{}) // the tailer does not follow db 1 yet
	l.add()
	l.add()
	if got := receive(t, s, 2); !equal(got, []int64{1, 2}) {
		t.Fatalf("got %v", got)
	}
	h.track(1, 0)
	h.publish(l.commits[0])
	h.publish(l.commits[1])
	h.publish(l.add())
	if got := receive(t, s, 1); got[0] != 3 {
		t.Fatalf("got %v", got)
	}
}

func TestHubEnds(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{QueueSize: 1})
	h.track(1, 0)
	a := subscribe(t, h, nil, Options{})
	b := subscribe(t, h, nil, Options{})
	for range 5 {
		h.publish(l.add()) // b overflows into a catch-up blocked on its queue
	}
	a.Close()
	if !errors.Is(a.Err(), ErrClosed) {
		t.Fatalf("closed: %v", a.Err())
	}
	h.drop(1)
	<-b.Done()
	if sluice.ErrorCode(b.Err()) != sluice.CodeNotFound {
		t.Fatalf("dropped: %v", b.Err())
	}
	c := subscribe(t, h, nil, Options{})
	h.Close()
	<-c.Done()
	if !errors.Is(c.Err(), ErrShutdown) {
		t.Fatalf("shutdown: %v", c.Err())
	}
	if _, err := h.Subscribe(context.Background(), testDB, nil, Options{}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("subscribe after close: %v", err)
	}
	if len(h.Subscriptions()) != 0 || len(h.Floors()) != 0 {
		t.Fatal("subscriptions left after close")
	}
}

func TestHubFloorsRespectHold(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{})
	h.track(1, 0)
	var hold atomic.Int64
	hold.Store(-1)
	s := subscribe(t, h, nil, Options{Hold: hold.Load})
	for range 5 {
		h.publish(l.add())
	}
	receive(t, s, 5)
	if f := h.Floors()[testDB.ID]; f != 5 {
		t.Fatalf("floor %d at cursor 5", f)
	}
	hold.Store(2)
	if f := h.Floors()[testDB.ID]; f != 2 {
		t.Fatalf("floor %d with a hold at 2", f)
	}
	hold.Store(-1)
	if f := h.Floors()[testDB.ID]; f != 5 {
		t.Fatalf("floor %d after the hold was released", f)
	}
}

// TestCatchUpQueueIsBoundedInBytes: a catch-up over commits of large
// images queues about QueueBytes of them (its pieces are its own, not
// shared with the live subscriptions), however long its queue: a
// consumer that does not read holds that much, not QueueSize pieces.
// Every commit still arrives, in order, as the consumer reads.
func TestCatchUpQueueIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{QueueBytes: 1 << 20})
	const commits = 50
	image := []byte(`"` + string(make([]byte, 200<<10)) + `"`) // about 200 KB
	for range commits {
		c := l.add()
		c.Changes[0].After = image
	}
	h.track(1, commits)
	s := subscribe(t, h, &sluice.Position{Epoch: "ep", Seq: 0, Index: sluice.WholeCommit}, Options{})
	// 5 pieces of about 200 KB fit in 1 MiB.
	const fit = 5
	eventually.True(t, wait, "the catch-up queued what fits", func() bool { return s.queued.Load() >= fit })
	for taken := range commits {
		if n := s.queued.Load(); n > int64(taken+fit) {
			t.Fatalf("%d pieces queued with %d taken: %d waiting, over 1 MiB", n, taken, n-int64(taken))
		}
		if got := receive(t, s, 1); got[0] != int64(taken+1) {
			t.Fatalf("commit %d arrived as number %d", got[0], taken+1)
		}
	}
}

// A live subscription whose consumer stalls holds about QueueBytes of
// pieces, not QueueSize: the live pieces it holds are its alone once the
// other subscriptions took them (256 pieces of 1 MB documents pinned 256
// MB). Past the bound it reads the log at its consumer's pace, and gets
// every commit, in order.
func TestLiveQueueIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{QueueBytes: 1 << 20})
	h.track(1, 0)
	s := subscribe(t, h, nil, Options{})
	if !s.live.Load() {
		t.Fatal("a subscription at the head is not live")
	}
	const commits = 50
	image := []byte(`"` + string(make([]byte, 200<<10)) + `"`) // about 200 KB
	for range commits {
		c := l.add()
		c.Changes[0].After = image
		h.publish(c)
	}
	// 5 pieces of about 200 KB fit in 1 MiB.
	const fit = 5
	if n := s.queued.Load(); n > fit {
		t.Fatalf("%d pieces of about 200 KB queued live on a subscription that does not read, over 1 MiB", n)
	}
	if s.catchUps.Load() != 1 {
		t.Fatalf("%d switches to the log, want 1", s.catchUps.Load())
	}
	for taken := range commits {
		if n := s.queued.Load(); n > int64(taken+fit) {
			t.Fatalf("%d pieces queued with %d taken: %d waiting, over 1 MiB", n, taken, n-int64(taken))
		}
		if got := receive(t, s, 1); got[0] != int64(taken+1) {
			t.Fatalf("commit %d arrived as number %d", got[0], taken+1)
		}
	}
}

// queuedBytes keeps the sizes of what is queued in order across its
// ring's wrap-arounds and growth: what the consumer took is forgotten
// oldest first.
func TestQueuedBytesForgetsWhatWasTaken(t *testing.T) {
	t.Parallel()
	var q queuedBytes
	queued := 0 // as a channel's length would say
	var want []int64
	for i := int64(1); i <= 100; i++ {
		q.pushed(i)
		queued++
		want = append(want, i)
		if i%3 == 0 { // the consumer takes two of every three
			queued -= 2
			want = want[2:]
		}
		var total int64
		for _, n := range want {
			total += n
		}
		if !q.fits(queued, 0, total) || q.fits(queued, 1, total) || q.total != total {
			t.Fatalf("after %d pieces: %d bytes queued, want %d", i, q.total, total)
		}
	}
}

// Catch-ups read the log a few at a time: at most CatchUpReadsPerUser
// reads at once for the streams of one user, CatchUpReads in all, the
// others waiting their turn with nothing read; and every subscription
// still gets every commit, in order. One user's hundreds of resumed
// streams ran as many reads at once as the pool had connections.
func TestCatchUpReadsAreCapped(t *testing.T) {
	t.Parallel()
	const all, perUser = 3, 2
	var mu sync.Mutex
	reading := map[int64]int{} // reads under way, by user id (0: none)
	total := 0
	var over []string
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	defer open() // before the hub's Close, which waits for the catch-ups
	h, l := newHub(t, HubOptions{BatchSize: 2, CatchUpReads: all, CatchUpReadsPerUser: perUser, CatchUpRead: func(u *sluice.User) func() {
		var id int64
		if u != nil {
			id = u.ID
		}
		mu.Lock()
		reading[id]++
		total++
		if total > all || id != 0 && reading[id] > perUser {
			over = append(over, fmt.Sprintf("%d reads at once, %d of user %d's", total, reading[id], id))
		}
		mu.Unlock()
		<-gate
		return func() {
			mu.Lock()
			reading[id]--
			total--
			mu.Unlock()
		}
	}})
	const commits = 10
	for range commits {
		l.add()
	}
	h.track(1, commits)
	from := &sluice.Position{Epoch: "ep", Seq: 0, Index: sluice.WholeCommit}
	var subs []*Subscription
	for _, o := range []struct {
		user *sluice.User
		n    int
	}{{ulla, 4}, {&sluice.User{ID: 8, Name: "bob"}, 3}, {nil, 1}} {
		for range o.n {
			subs = append(subs, subscribe(t, h, from, Options{User: o.user}))
		}
	}
	// Every catch-up asks to read at once: 3 read, the others wait.
	eventually.True(t, wait, "three catch-ups read, the others wait their turn", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(over) > 0 || total == all && h.reads.waiters() == len(subs)-all
	})
	overCaps := func() {
		t.Helper()
		mu.Lock()
		o := over
		mu.Unlock()
		if len(o) > 0 {
			t.Fatalf("catch-ups read past their caps (%d in all, %d per user): %v", all, perUser, o)
		}
	}
	overCaps()
	open()
	for _, s := range subs {
		if got := receive(t, s, commits); !equal(got, seqs(1, commits)) {
			t.Fatalf("subscription %d received %v, want commits 1 to %d in order", s.ID(), got, commits)
		}
	}
	overCaps()
}

// A catch-up that ends while it waits for its turn leaves the queue, and
// a turn handed to it as it ended goes on to the next.
func TestCatchUpTurnsOfEndedStreams(t *testing.T) {
	t.Parallel()
	r := newReadSlots(1, 1, nil)
	release, ok := r.take(context.Background(), 7, true)
	if !ok {
		t.Fatal("the first turn was refused")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan bool)
	go func() {
		_, ok := r.take(ctx, 8, true)
		ended <- ok
	}()
	eventually.True(t, wait, "the second catch-up waits", func() bool { return r.waiters() == 1 })
	cancel()
	if <-ended {
		t.Fatal("a catch-up that ended got its turn")
	}
	if n := r.waiters(); n != 0 {
		t.Fatalf("%d waiting after the only waiter ended", n)
	}
	release()
	if next, ok := r.take(context.Background(), 9, true); !ok {
		t.Fatal("the turn given back was not taken again")
	} else {
		next()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n != 0 || len(r.byUser) != 0 {
		t.Fatalf("after every turn ended: %d held, %v by user", r.n, r.byUser)
	}
}

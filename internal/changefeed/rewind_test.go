package changefeed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// The log rewound inside a commit: a large commit (commit 2, of 40
// changes) is handed on in pieces, the tailer and a live subscriber
// have its first piece (changes 0-6, cursor {1, 6}), and the commit is
// then lost (a failover to an asynchronous standby, a restore): the log
// ends at commit 1, which the cursor's Seq names.

// insideLostCommit runs a tailer whose read of commit 2's second piece
// failed, a live subscriber holding its first, and then removes commit 2
// from the log. It returns the store, the tailer and the subscriber.
func insideLostCommit(t *testing.T) (*fakeStore, *Tailer, *Subscription) {
	t.Helper()
	store := newFakeStore()
	store.add("T")
	h, tl := runTailer(t, store, TailerOptions{Poll: time.Hour, PieceBytes: 7})
	waitFor(t, tl.Running)
	live := subscribe(t, h, nil, Options{})
	store.readsLeft.Store(1)
	store.limitReads.Store(true)
	classes := make([]string, 40)
	for i := range classes {
		classes[i] = "T"
	}
	store.add(classes...)
	tl.Wake(1)
	got := changesOf(t, live, 7)
	if got[0] != (sluice.Position{Epoch: testDB.Epoch, Seq: 2, Index: 0}) || got[6].Index != 6 {
		t.Fatalf("first piece: %v", got)
	}
	// The tailer's read of the next piece failed: it stands inside
	// commit 2 and waits to be woken.
	eventually.True(t, wait, "the second read failed", func() bool { return store.timeouts.Load() == 1 })
	store.mu.Lock()
	store.commits = store.commits[:1]
	store.mu.Unlock()
	store.limitReads.Store(false)
	return store, tl, live
}

// tenU are the classes of the changes of a commit that reuses sequence 2:
// more than the 7 changes of the lost commit a subscriber has.
var tenU = []string{"U", "U", "U", "U", "U", "U", "U", "U", "U", "U"}

// endsGone waits for s to end with the Gone error of a log that now
// ends at commit head, failing the test if a piece reaches it first.
func endsGone(t *testing.T, s *Subscription, head int64) {
	t.Helper()
	select {
	case <-s.Done():
		want := fmt.Sprintf("now ends at commit %d", head)
		if err := s.Err(); sluice.ErrorCode(err) != sluice.CodeGone || !strings.Contains(err.Error(), want) {
			t.Fatalf("ended with %v, want a Gone error saying the log %s", err, want)
		}
	case c := <-s.Commits():
		t.Fatalf("received changes %d-%d of commit %d after the log was rewound to commit %d",
			c.Changes[0].Index, c.Changes[len(c.Changes)-1].Index, c.Seq, head)
	case <-time.After(wait):
		t.Fatal("the subscription did not end")
	}
}

// TestTailerReadFindsLogRewoundInsideACommit: the tailer's next read of
// a commit it stands inside finds the commit gone, not pruned: the log
// was rewound. The subscriber that has part of the commit ends with
// api:Gone naming the new end, before a commit that reuses sequence 2
// reaches it, even one written before the tailer looked at the log's
// history; the tailer re-publishes nothing (read as pruning, it went
// back to the oldest retained commit and handed commit 1 on again, and
// the subscriber received the new commit 2's changes after the ones it
// had of the lost one). The new commit 2 reaches a subscriber from
// commit 1, once.
func TestTailerReadFindsLogRewoundInsideACommit(t *testing.T) {
	t.Parallel()
	store, tl, live := insideLostCommit(t)
	store.mu.Lock()
	k := len(store.afters)
	store.mu.Unlock()
	n := store.reads.Load()
	tl.Wake(1)
	eventually.True(t, wait, "a read of the log after the loss", func() bool { return store.reads.Load() > n })
	store.add(tenU...) // a new commit 2
	tl.Wake(1)
	endsGone(t, live, 1)

	from := sluice.Position{Epoch: testDB.Epoch, Seq: 1, Index: sluice.WholeCommit}
	late := subscribe(t, tl.hub, &from, Options{})
	if got := changesOf(t, late, 10); got[0] != (sluice.Position{Epoch: testDB.Epoch, Seq: 2, Index: 0}) || got[9].Index != 9 {
		t.Fatalf("the new commit 2: %v", got)
	}
	// The tailer, read as pruning, went back to the oldest retained
	// commit and read (and handed on) commit 1 again.
	store.mu.Lock()
	defer store.mu.Unlock()
	for _, a := range store.afters[k:] {
		if a.Less(sluice.Position{Seq: 1, Index: sluice.WholeCommit}) {
			t.Fatalf("after the loss, the log was read again after %v", a)
		}
	}
}

// TestTailerHeadsFindLogRewoundInsideACommit: the tailer's read of every
// database's head finds the log ending at commit 1 while it stands
// inside commit 2. The subscriber that has part of commit 2 ends with
// api:Gone before a commit that reuses sequence 2 is read: going on, it
// received that commit's changes after the ones it had of the lost one.
func TestTailerHeadsFindLogRewoundInsideACommit(t *testing.T) {
	t.Parallel()
	store, tl, live := insideLostCommit(t)
	n := store.headsRead.Load()
	tl.Wake(0)
	eventually.True(t, wait, "a read of the heads after the loss", func() bool { return store.headsRead.Load() > n })
	store.add(tenU...) // a new commit 2
	tl.Wake(1)
	endsGone(t, live, 1)
}

// TestHubCatchUpInsideALostCommit: a catching-up subscription inside a
// commit the log lost ends with api:Gone naming the log's new end, both
// when its read finds the commit missing before the tailer saw the loss,
// and when the tailer saw it (Hub.rewind) and a new commit reused the
// sequence number before the read (it received that commit's changes
// after the ones it had of the lost one).
func TestHubCatchUpInsideALostCommit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		rewind bool
	}{{"read first", false}, {"rewound, then reused", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reading := make(chan struct{}, 1)
			proceed := make(chan struct{})
			h, l := newHub(t, HubOptions{CatchUpRead: func(*sluice.User) func() {
				select {
				case reading <- struct{}{}:
				default:
				}
				<-proceed
				return func() {}
			}})
			l.add()
			classes := make([]string, 20)
			for i := range classes {
				classes[i] = "T"
			}
			l.add(classes...)
			h.track(1, 2)
			s := subscribe(t, h, &sluice.Position{Epoch: testDB.Epoch, Seq: 2, Index: 5}, Options{})
			select {
			case <-reading: // its first read waits
			case <-time.After(wait):
				t.Fatal("the catch-up did not read")
			}
			l.mu.Lock()
			l.commits = l.commits[:1]
			l.mu.Unlock()
			if c.rewind {
				h.rewind(1, 1)
				l.add(classes...) // a new commit 2
			}
			close(proceed)
			endsGone(t, s, 1)
		})
	}
}

// The log rewound and took new commits before the tailer looked again:
// the new commits have the lost ones' numbers, so the log's end is not
// before what the tailer read, and only the commits' stamps tell them
// apart (Tailer.replaced).

// replacedCommit2 runs a tailer and a live subscriber that received
// commit 2 of a log of two, then replaces commit 2 with a new one of ten
// changes of class U, without waking the tailer: the log lost commit 2
// and a new commit took its number. It returns the store, the tailer
// and the subscriber.
func replacedCommit2(t *testing.T) (*fakeStore, *Tailer, *Subscription) {
	t.Helper()
	store := newFakeStore()
	store.add("T")
	h, tl := runTailer(t, store, TailerOptions{Poll: time.Hour})
	waitFor(t, func() bool { return tl.Running() && store.listens.Load() == 1 })
	live := subscribe(t, h, nil, Options{})
	store.add("T")
	tl.Wake(1)
	if got := receive(t, live, 1); got[0] != 2 {
		t.Fatalf("before the loss: got %v", got)
	}
	store.mu.Lock()
	store.commits = store.commits[:1]
	store.mu.Unlock()
	store.add(tenU...)
	return store, tl, live
}

// newCommit2 checks that a subscription from commit 1 receives the
// commit that took number 2, whole (its ten changes of class U, maybe in
// pieces), then the commits up to last.
func newCommit2(t *testing.T, tl *Tailer, last int64) {
	t.Helper()
	from := sluice.Position{Epoch: testDB.Epoch, Seq: 1, Index: sluice.WholeCommit}
	late := subscribe(t, tl.hub, &from, Options{})
	var got []string // commit:index:class of each change
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("2:%d:U", i))
	}
	for seq := int64(3); seq <= last; seq++ {
		want = append(want, fmt.Sprintf("%d:0:U", seq))
	}
	timeout := time.After(wait)
	for len(got) < len(want) {
		select {
		case c := <-late.Commits():
			for _, ch := range c.Changes {
				got = append(got, fmt.Sprintf("%d:%d:%s", c.Seq, ch.Index, ch.Class))
			}
		case <-timeout:
			t.Fatalf("received %v, want %v", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("received %v, want %v", got, want)
	}
}

// TestTailerFindsCommitReplaced: the tailer's next read of the log after
// commit 2, which a new commit replaced, ends the subscriber that
// received the lost commit 2 with api:Gone before anything of the new
// log reaches it, whether a commit follows the new commit 2 (read on, the
// subscriber received commit 3 of the new log after the lost commit 2)
// or not (the new commit 2 was never delivered, and nothing said so).
// The new commits reach a subscriber from commit 1.
func TestTailerFindsCommitReplaced(t *testing.T) {
	t.Parallel()
	for _, then := range []int{0, 1} {
		t.Run(fmt.Sprintf("then %d commits", then), func(t *testing.T) {
			t.Parallel()
			store, tl, live := replacedCommit2(t)
			for range then {
				store.add("U")
			}
			tl.Wake(1) // as the new commits' notification does
			endsGone(t, live, 1)
			newCommit2(t, tl, int64(2+then))
		})
	}
}

// TestTailerFindsCommitReplacedOnReconnect: when the new commit 2's
// notification is lost (the listener's connection was, as in a
// failover), the listener's new connection has the tailer read on after
// every commit it read last: the head, commit 2, did not move, so no
// poll would have read the log again.
func TestTailerFindsCommitReplacedOnReconnect(t *testing.T) {
	t.Parallel()
	store, tl, live := replacedCommit2(t)
	store.listenFail <- struct{}{}
	endsGone(t, live, 1)
	newCommit2(t, tl, 2)
}

// TestTailerFindsCommitReplacedInsideIt: the tailer stands inside commit
// 2, of which a subscriber has the first piece, when a new commit 2 of
// more changes replaces it. Read on from where it stood, the tailer
// handed on the new commit's changes after the seventh as the rest of
// the lost one; the subscriber ends with api:Gone instead.
func TestTailerFindsCommitReplacedInsideIt(t *testing.T) {
	t.Parallel()
	store, tl, live := insideLostCommit(t)
	store.add(tenU...) // a new commit 2
	tl.Wake(1)
	endsGone(t, live, 1)
	newCommit2(t, tl, 2)
}

// TestHubCatchUpFindsCommitReplaced: a catching-up subscription that
// received commit 2 reads on after it once the log lost commits 2 to 4
// and new commits took their numbers: it ends with api:Gone, as the
// tailer's read would end it live, instead of receiving the new commits
// 3 and 4 after the lost commit 2 (the tailer, behind or ahead, rewinds
// to no end it could tell from this subscription's).
func TestHubCatchUpFindsCommitReplaced(t *testing.T) {
	t.Parallel()
	h, l := newHub(t, HubOptions{BatchSize: 2})
	for range 4 {
		l.add()
	}
	h.track(1, 4)
	s := subscribe(t, h, &sluice.Position{Epoch: testDB.Epoch, Seq: 0, Index: sluice.WholeCommit}, Options{Queue: 1})
	// It read commits 1 and 2, queued 1 and waits to queue 2.
	eventually.True(t, wait, "commit 1 queued", func() bool { return len(s.Commits()) == 1 })
	l.mu.Lock()
	l.commits = l.commits[:1]
	l.mu.Unlock()
	for range 3 {
		l.add("U")
	}
	if got := receive(t, s, 2); got[0] != 1 || got[1] != 2 {
		t.Fatalf("got %v", got)
	}
	endsGone(t, s, 1)
}

// TestResumeFromReplacedCommitIsGone: a client resumes from a position of
// commit 2, carrying the commit's tag, after the log lost commit 2 and a
// new commit took its number (a failover ended its stream; it resumes
// on another server, or once Postgres is back). The log's end is not
// before the position: only the tag tells the commits apart. Whether the
// position is the end of the commit (the head: the subscription would
// go live without reading the log) or inside it, the subscription ends
// with api:Gone naming the position and the commit, before anything of
// the new log reaches it. A position of the commit the log holds reads
// on; one without a tag (made by older versions) is not checked.
func TestResumeFromReplacedCommitIsGone(t *testing.T) {
	t.Parallel()
	store := newFakeStore()
	store.add("T")
	lost := store.add("T", "T")
	h, tl := runTailer(t, store, TailerOptions{Poll: time.Hour})
	waitFor(t, func() bool { return tl.Running() && store.listens.Load() == 1 })
	end, inside := lost.End(), lost.Position(0)
	if end.Tag == "" || inside.Tag != end.Tag {
		t.Fatalf("positions of commit 2 without its tag: %v, %v", end, inside)
	}
	kept := subscribe(t, h, &end, Options{})
	store.add("T")
	tl.Wake(1)
	if got := receive(t, kept, 1); got[0] != 3 {
		t.Fatalf("from the end of commit 2, still in the log: got %v", got)
	}

	store.mu.Lock()
	store.commits = store.commits[:1]
	store.mu.Unlock()
	store.add("U", "U") // the new commit 2, which the tailer did not read
	for _, from := range []sluice.Position{end, inside} {
		s := subscribe(t, h, &from, Options{})
		select {
		case <-s.Done():
			want := fmt.Sprintf("position %s names a commit the log of %s no longer holds: commit 2 of the log is another commit", from, testDB.Path())
			if err := s.Err(); sluice.ErrorCode(err) != sluice.CodeGone || !strings.Contains(err.Error(), want) {
				t.Fatalf("from %v: ended with %v, want a Gone error saying %q", from, err, want)
			}
		case c := <-s.Commits():
			t.Fatalf("from %v, in the lost commit 2: received changes of commit %d", from, c.Seq)
		case <-time.After(wait):
			t.Fatalf("from %v, in the lost commit 2: the subscription did not end", from)
		}
	}
	untagged := inside.Untagged()
	s := subscribe(t, h, &untagged, Options{})
	if got := changesOf(t, s, 1); got[0] != (sluice.Position{Epoch: testDB.Epoch, Seq: 2, Index: 1}) {
		t.Fatalf("from %v, untagged: got %v", untagged, got)
	}
}

// TestScanFromReplacedCommitIsGone: a resumed live query judges with
// Scan whether the log since its client's position can have changed its
// result. From a tagged position of commit 2 after the log lost commit 2
// and a new commit took its number, Scan is Gone, naming the position
// and the commit, before it hands on any commit (the live query then
// sends its current result); before, it judged the new log's commits as
// if they followed the client's, and could find nothing changed. An
// untagged position is not checked; a tagged one of a commit the log
// holds reads on.
func TestScanFromReplacedCommitIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newFakeStore()
	store.add("T")
	lost := store.add("T", "T")
	h, tl := runTailer(t, store, TailerOptions{Poll: time.Hour})
	waitFor(t, func() bool { return tl.Running() && store.listens.Load() == 1 })
	scan := func(from sluice.Position) ([]int64, error) {
		var seqs []int64
		err := h.Scan(ctx, testDB, from, 3, func(c *sluice.Commit) bool {
			seqs = append(seqs, c.Seq)
			return true
		})
		return seqs, err
	}
	store.add("T")
	if got, err := scan(lost.End()); err != nil || !slices.Equal(got, []int64{3}) {
		t.Fatalf("from the end of commit 2, still in the log: %v, %v", got, err)
	}

	store.mu.Lock()
	store.commits = store.commits[:1]
	store.mu.Unlock()
	store.add("U", "U") // the new commit 2
	store.add("U")
	for _, from := range []sluice.Position{lost.End(), lost.Position(0)} {
		got, err := scan(from)
		want := fmt.Sprintf("position %s names a commit the log of %s no longer holds: commit 2 of the log is another commit", from, testDB.Path())
		if sluice.ErrorCode(err) != sluice.CodeGone || !strings.Contains(err.Error(), want) || len(got) > 0 {
			t.Fatalf("from %v, in the lost commit 2: %v, %v; want a Gone error saying %q before any commit", from, got, err, want)
		}
	}
	if got, err := scan(lost.End().Untagged()); err != nil || !slices.Equal(got, []int64{3}) {
		t.Fatalf("from %v, untagged: %v, %v", lost.End().Untagged(), got, err)
	}
}

package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

// A share of results (Latest), without a hub subscription: publishResult
// stands for its group's settles, Take for each member's stream.

func resultShare() *share {
	return newShare(&Server{}, ShareOptions{Key: 1, database: &sluice.Database{ID: 1, Epoch: "e"}, Latest: true})
}

// result publishes result n, with its delta from result n-1 when delta.
func publishN(s *share, n int64, delta bool) {
	r := &Settled{Start: at(n), Events: []sluice.Event{{ID: fmt.Sprintf("r%d", n)}}}
	if delta {
		r.Delta = []sluice.Event{{ID: fmt.Sprintf("d%d", n)}}
	}
	s.publishResult(r)
}

func TestShareOfResults(t *testing.T) {
	s := resultShare()
	early := addMember(s)
	publishN(s, 1, false)
	if got := strings.Join(ids(t, early), " "); got != "r1" {
		t.Fatalf("a member took %q", got)
	}
	// The newest result stays for members that join.
	late := addMember(s)
	if got := strings.Join(ids(t, late), " "); got != "r1" {
		t.Fatalf("a member that joined took %q, want the current result", got)
	}
	// A member that took the result before gets the delta; one that fell
	// behind skips to the newest, whole, and is never detached.
	publishN(s, 2, true)
	if got := strings.Join(ids(t, early), " "); got != "d2" {
		t.Fatalf("a member that took r1 took %q, want the delta", got)
	}
	publishN(s, 3, true)
	publishN(s, 4, true)
	buf, _, state := late.take(nil)
	if len(buf) != 1 || buf[0].Events[0].ID != "r4" || state != takeWait {
		t.Fatalf("a member that fell behind took %v (state %v), want r4 whole", buf, state)
	}
	if got := strings.Join(ids(t, early), " "); got != "r4" {
		t.Fatalf("a member that missed r3 took %q, want r4 whole", got)
	}
	// A member whose stream left out what it took (Untake) gets the next
	// whole.
	publishN(s, 5, true)
	if got := strings.Join(ids(t, late), " "); got != "d5" {
		t.Fatalf("took %q, want d5", got)
	}
	late.untake()
	publishN(s, 6, true)
	if got := strings.Join(ids(t, late), " "); got != "r6" {
		t.Fatalf("took %q after Untake, want r6 whole", got)
	}
	// It holds no history back from pruning, and keeps one result.
	if f := s.floor.Load(); f != -1 {
		t.Fatalf("a share of results holds floor %d", f)
	}
	ids(t, early)
	if len(s.hist) != 1 {
		t.Fatalf("history of %d entries once every member took the newest, want 1", len(s.hist))
	}
	early.leave() // (the last one out would close the share's feed, which it has none of)
	if len(s.hist) != 1 || s.hist[0].unread != 0 {
		t.Fatalf("history after a member left: %d entries", len(s.hist))
	}
}

// testBatcher is a Batcher whose groups record what they noted and
// settled; its first settle waits until release is closed.
type testBatcher struct {
	mu      sync.Mutex
	noted   []int64
	settles int
	entered chan struct{} // closed when the first settle starts
	release chan struct{}
	fail    string // the key of an evaluator whose settle fails
}

func newTestBatcher() *testBatcher {
	return &testBatcher{entered: make(chan struct{}), release: make(chan struct{})}
}

// resultEvaluator is a share's state in a testBatcher's group: the last
// commit noted, and the last one settled.
type resultEvaluator struct {
	key           string
	noted, result int64
	ran           bool
}

func (resultEvaluator) Events(context.Context, *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	return nil, sluice.Position{}, errors.New("a batched share's Events was called")
}

func (b *testBatcher) NewGroup() BatchGroup { return b }

func (b *testBatcher) Note(_ context.Context, c *sluice.Commit, evs []Evaluator) {
	b.mu.Lock()
	b.noted = append(b.noted, c.Seq)
	b.mu.Unlock()
	for _, ev := range evs {
		ev.(*resultEvaluator).noted = c.Seq
	}
}

func (b *testBatcher) Settle(_ context.Context, evs []Evaluator, out []Settled) {
	b.mu.Lock()
	b.settles++
	first := b.settles == 1
	b.mu.Unlock()
	if first {
		close(b.entered)
		<-b.release
	}
	for i, ev := range evs {
		e := ev.(*resultEvaluator)
		if e.ran && e.noted == e.result {
			continue
		}
		if e.key == b.fail {
			out[i].Err = errors.New("settle failed")
			continue
		}
		e.ran, e.result = true, e.noted
		out[i].Events = []sluice.Event{{ID: fmt.Sprintf("%s@%d", e.key, e.noted)}}
	}
}

func joinResults(t *testing.T, f *testFeed, b *testBatcher, key string, cohort any) *member {
	t.Helper()
	return f.join(t, ShareOptions{Key: key, Latest: true, Batcher: b, Cohort: cohort,
		New: func() Evaluator { return &resultEvaluator{key: key} }})
}

// takeIDs waits for m's next entries and returns their event ids.
func takeIDs(t *testing.T, m *member) []string {
	t.Helper()
	deadline := time.After(wait)
	for {
		buf, wake, state := m.take(nil)
		if len(buf) > 0 {
			var out []string
			for _, e := range buf {
				for _, ev := range e.Events {
					out = append(out, ev.ID)
				}
			}
			return out
		}
		if state != takeWait {
			t.Fatalf("take: state %v (%v)", state, m.endErr())
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatal("nothing to take")
		}
	}
}

// A new share of results is settled at once (its first result); pieces
// that queue while a settle runs are noted, then settled together: a
// burst costs two settles, not one per commit.
func TestBatchCoalescesPiecesQueuedDuringASettle(t *testing.T) {
	t.Parallel()
	f := newTestFeed(t)
	b := newTestBatcher()
	m := joinResults(t, f, b, "a", "c")
	defer m.leave()
	<-b.entered // the first settle runs, and waits
	for range 10 {
		f.publish(t)
	}
	close(b.release)
	// The first result, unless the member took nothing before the second
	// superseded it.
	got := fmt.Sprint(takeIDs(t, m))
	if got == "[a@0]" {
		got = fmt.Sprint(takeIDs(t, m))
	}
	if got != "[a@10]" {
		t.Fatalf("result after the burst %s", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.settles != 2 {
		t.Fatalf("%d settles for a new share and a burst of 10 commits, want 2", b.settles)
	}
}

// The shares of a cohort are evaluated by one feed (one hub subscription)
// and settled together; another cohort has a feed of its own; a share
// whose settle fails ends alone; the last share out closes the feed.
func TestCohortFeed(t *testing.T) {
	t.Parallel()
	f := newTestFeed(t)
	b := newTestBatcher()
	close(b.release)
	b.fail = "bad"
	x := joinResults(t, f, b, "x", "c1")
	y := joinResults(t, f, b, "y", "c1")
	bad := joinResults(t, f, b, "bad", "c1")
	other := joinResults(t, f, b, "o", "c2")
	if x.subscriptionID() != y.subscriptionID() || x.subscriptionID() != bad.subscriptionID() {
		t.Fatal("the shares of one cohort are on more than one hub subscription")
	}
	if other.subscriptionID() == x.subscriptionID() {
		t.Fatal("two cohorts share a hub subscription")
	}
	for _, m := range []*member{x, y, other} {
		takeIDs(t, m)
	}
	deadline := time.After(wait)
	for {
		_, wake, state := bad.take(nil)
		if state == takeEnded {
			break
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatal("the share whose settle failed did not end")
		}
	}
	bad.leave()
	f.publish(t)
	for _, m := range []*member{x, y, other} {
		if got := takeIDs(t, m); len(got) != 1 || !strings.HasSuffix(got[0], "@1") {
			t.Fatalf("after commit 1: %v", got)
		}
	}
	sub := x.s.f.sub
	x.leave()
	y.leave()
	select {
	case <-sub.Done():
	case <-time.After(wait):
		t.Fatal("the cohort's subscription outlived its last share")
	}
	z := joinResults(t, f, b, "z", "c1")
	if z.subscriptionID() == sub.ID() {
		t.Fatal("a share joined a closed cohort feed")
	}
	takeIDs(t, z)
	z.leave()
	other.leave()
}

// retryBatcher settles share "x" only once free is closed, answering
// Settled.Retry before, and every other share at once.
type retryBatcher struct {
	*testBatcher
	free chan struct{}
}

func (b *retryBatcher) NewGroup() BatchGroup { return b }

func (b *retryBatcher) Settle(ctx context.Context, evs []Evaluator, out []Settled) {
	select {
	case <-b.free:
	default:
		evs = slices.Clone(evs)
		for i, ev := range evs {
			if ev.(*resultEvaluator).key == "x" {
				out[i].Retry = b.free
				evs[i] = &resultEvaluator{key: "x", ran: true} // settles nothing
			}
		}
	}
	b.testBatcher.Settle(ctx, evs, out)
}

// A share whose settle answers Retry gets nothing then, the others of
// its group get their results, and its group is settled again once
// Retry is closed, with no commit (a live query whose user's reads are
// all running, then one ends).
func TestBatchRetry(t *testing.T) {
	t.Parallel()
	f := newTestFeed(t)
	b := &retryBatcher{testBatcher: newTestBatcher(), free: make(chan struct{})}
	close(b.release)
	x := f.join(t, ShareOptions{Key: "x", Latest: true, Batcher: b, Cohort: "c", New: func() Evaluator { return &resultEvaluator{key: "x"} }})
	defer x.leave()
	y := f.join(t, ShareOptions{Key: "y", Latest: true, Batcher: b, Cohort: "c", New: func() Evaluator { return &resultEvaluator{key: "y"} }})
	defer y.leave()
	if got := fmt.Sprint(takeIDs(t, y)); got != "[y@0]" {
		t.Fatalf("y's result: %s", got)
	}
	if buf, _, _ := x.take(nil); len(buf) > 0 {
		t.Fatalf("x took %v before its retry", buf)
	}
	close(b.free)
	if got := fmt.Sprint(takeIDs(t, x)); got != "[x@0]" {
		t.Fatalf("x's result once free: %s", got)
	}
}

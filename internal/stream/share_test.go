package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

// A share's history, without a hub subscription: publish stands for the
// share's evaluation of each piece, Take for each member's stream.

func testGroup() *share {
	return newShare(&Server{}, ShareOptions{Key: 1, database: &sluice.Database{ID: 1, Epoch: "e"}})
}

// events returns n events of commit seq with payloads of size bytes.
func events(seq int64, n, size int) []sluice.Event {
	evs := make([]sluice.Event, n)
	for i := range evs {
		id := "e-" + strconv.FormatInt(seq, 10) + "-" + strconv.Itoa(i)
		evs[i] = sluice.Event{ID: id, Data: []byte(strings.Repeat("x", size))}
	}
	return evs
}

// ids takes everything m can take now and returns the event ids.
func ids(t *testing.T, m *member) []string {
	t.Helper()
	var out []string
	for {
		buf, _, _ := m.take(nil)
		if len(buf) == 0 {
			return out
		}
		for _, e := range buf {
			for _, ev := range e.Events {
				out = append(out, ev.ID)
			}
		}
	}
}

func addMember(g *share) *member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.add("test", nil)
}

func TestShareHistoryReleasesWhatEveryMemberTook(t *testing.T) {
	g := testGroup()
	a, b := addMember(g), addMember(g)
	g.publish(at(1), time.Time{}, events(1, 2, 10))
	g.publish(at(2), time.Time{}, events(2, 1, 10))
	if got := strings.Join(ids(t, a), " "); got != "e-1-0 e-1-1 e-2-0" {
		t.Fatalf("a took %q", got)
	}
	if len(g.hist) != 2 {
		t.Fatalf("history after one of two members took it: %d entries", len(g.hist))
	}
	late := addMember(g) // takes from now on
	g.publish(at(3), time.Time{}, events(3, 1, 10))
	if got := strings.Join(ids(t, b), " "); got != "e-1-0 e-1-1 e-2-0 e-3-0" {
		t.Fatalf("b took %q", got)
	}
	if got := strings.Join(ids(t, late), " "); got != "e-3-0" {
		t.Fatalf("a member that joined late took %q", got)
	}
	if got := strings.Join(ids(t, a), " "); got != "e-3-0" {
		t.Fatalf("a took %q", got)
	}
	if len(g.hist) != 0 || g.bytes != 0 || g.hist != nil {
		t.Fatalf("history after every member took it: %d entries, %d bytes", len(g.hist), g.bytes)
	}
	// A member that leaves no longer holds entries back.
	g.publish(at(4), time.Time{}, events(4, 1, 10))
	ids(t, a)
	ids(t, b)
	late.leave()
	if len(g.hist) != 0 || g.bytes != 0 {
		t.Fatalf("history after the last reader left: %d entries, %d bytes", len(g.hist), g.bytes)
	}
}

// A member that does not take falls out of the history once it exceeds
// its bounds, and continues from the first commit it did not take; the
// others are not affected.
func TestShareHistoryDetachesAMemberThatFallsBehind(t *testing.T) {
	g := testGroup()
	slow, fast := addMember(g), addMember(g)
	const size = 1000
	perCommit := size + len("e-1-0") + eventOverhead
	commits := 2*historyBytesPerMember/perCommit + 10
	var want []string
	for seq := int64(1); seq <= int64(commits); seq++ {
		g.publish(at(seq), time.Time{}, events(seq, 1, size))
		want = append(want, "e-"+strconv.FormatInt(seq, 10)+"-0")
		if got := ids(t, fast); len(got) != 1 || got[0] != want[len(want)-1] {
			t.Fatalf("fast member took %v at commit %d", got, seq)
		}
	}
	buf, _, state := slow.take(nil)
	if len(buf) != 0 || state != takeDetached {
		t.Fatalf("slow member: %d entries, state %v", len(buf), state)
	}
	// It never took anything: it continues from the first commit, whole.
	if slow.from != (sluice.Position{Epoch: "e", Seq: 1, Index: -1}) {
		t.Fatalf("slow member continues from %+v", slow.from)
	}
	if len(g.hist) != 0 || g.bytes != 0 {
		t.Fatalf("history once the slow member left: %d entries, %d bytes", len(g.hist), g.bytes)
	}
	g.mu.Lock()
	in := slow.idx >= 0
	g.mu.Unlock()
	if in {
		t.Fatal("the detached member is still a member")
	}
	slow.leave() // as its stream does when it ends; fast keeps the group
	if g.closed {
		t.Fatal("the group closed with a member left")
	}
}

// A member that took some commits and then stopped continues from the
// first one it did not take.
func TestShareHistoryDetachPositionAfterPartialRead(t *testing.T) {
	g := testGroup()
	m := addMember(g)
	g.publish(at(7), time.Time{}, events(7, 3, 10))
	ids(t, m)
	for seq := int64(8); seq < 8+historyEntries+1; seq++ {
		g.publish(at(seq), time.Time{}, events(seq, 1, 1))
	}
	if _, _, state := m.take(nil); state != takeDetached || m.from.Seq != 8 || m.from.Index != -1 {
		t.Fatalf("state %v, from %+v", state, m.from)
	}
}

// A group that ends gives its members what it published, then the end.
func TestShareHistoryEnd(t *testing.T) {
	g := testGroup()
	m := addMember(g)
	g.publish(at(1), time.Time{}, events(1, 1, 10))
	g.mu.Lock()
	g.closed, g.ended, g.err = true, true, errors.New("gone")
	w, fns := g.wakeups(nil)
	g.mu.Unlock()
	wake(w, fns)
	if got := ids(t, m); len(got) != 1 {
		t.Fatalf("took %v", got)
	}
	if _, _, state := m.take(nil); state != takeEnded {
		t.Fatalf("state %v", state)
	}
}

// take returns no wake channel while entries remain, also when the
// entries it took were the last unread ones and were released: a member
// must never wait with something left to take.
func TestShareHistoryTakeReportsWhatRemains(t *testing.T) {
	g := testGroup()
	a, b := addMember(g), addMember(g)
	for seq := int64(1); seq <= takeMax+3; seq++ {
		g.publish(at(seq), time.Time{}, events(seq, 1, 10))
	}
	ids(t, b) // b took everything: a's entries are the last unread ones
	buf, wake, state := a.take(nil)
	if len(buf) != takeMax || wake != nil || state != takeWait {
		t.Fatalf("first take: %d entries, wake %v, state %v", len(buf), wake, state)
	}
	buf, wake, state = a.take(nil)
	if len(buf) != 3 || wake == nil || state != takeWait {
		t.Fatalf("second take: %d entries, wake %v, state %v", len(buf), wake, state)
	}
}

// Members reading concurrently with the publisher each get every event
// once, in order, and wait only on the channel take returns.
func TestShareHistoryConcurrentReaders(t *testing.T) {
	g := testGroup()
	const readers, commits = 8, 2000
	ms := make([]*member, readers)
	for i := range ms {
		ms[i] = addMember(g)
	}
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			next := int64(1)
			for next <= commits {
				buf, wake, state := m.take(nil)
				if state != takeWait {
					t.Errorf("state %v", state)
					return
				}
				for _, e := range buf {
					if e.Start.Seq != next {
						t.Errorf("took commit %d, want %d", e.Start.Seq, next)
						return
					}
					next++
				}
				// As the session does: wait when take says so, even
				// right after taking something.
				if wake != nil && next <= commits {
					select {
					case <-wake:
					case <-time.After(time.Minute):
						t.Errorf("waited a minute at commit %d of %d", next, commits)
						return
					}
				}
			}
		})
	}
	for seq := int64(1); seq <= commits; seq++ {
		g.publish(at(seq), time.Time{}, events(seq, 1, 10))
	}
	wg.Wait()
	if len(g.hist) != 0 {
		t.Fatalf("history after every reader took everything: %d entries", len(g.hist))
	}
}

// The group's hub subscription moves on once a commit is evaluated; what
// the slowest member has not taken, and where a member that fell out of
// the history replays from, must stay in the log: the group holds it.
func TestShareHistoryHoldsWhatMembersStillNeed(t *testing.T) {
	g := testGroup()
	fast, slow := addMember(g), addMember(g)
	if g.floor.Load() != -1 {
		t.Fatalf("floor %d with nothing published", g.floor.Load())
	}
	g.publish(at(5), time.Time{}, events(5, 1, 10))
	g.publish(at(7), time.Time{}, events(7, 1, 10))
	ids(t, fast)
	if g.floor.Load() != 4 {
		t.Fatalf("floor %d while a member has not taken commit 5, want 4", g.floor.Load())
	}
	ids(t, slow)
	if g.floor.Load() != -1 {
		t.Fatalf("floor %d once every member took everything, want -1", g.floor.Load())
	}

	// slow falls out of the history: the group holds its replay point
	// until it has a subscription of its own.
	g.publish(at(9), time.Time{}, events(9, 1, historyBytesPerMember))
	ids(t, fast)
	g.publish(at(10), time.Time{}, events(10, 1, historyBytesPerMember))
	ids(t, fast)
	g.publish(at(11), time.Time{}, events(11, 1, historyBytesPerMember))
	ids(t, fast)
	if _, _, state := slow.take(nil); state != takeDetached || slow.from.Seq != 9 {
		t.Fatalf("slow: state %v from %v, want detached from commit 9", state, slow.from)
	}
	if g.floor.Load() != 8 {
		t.Fatalf("floor %d while the detached member has not subscribed, want 8", g.floor.Load())
	}
	slow.left()
	if g.floor.Load() != -1 {
		t.Fatalf("floor %d after the detached member subscribed on its own, want -1", g.floor.Load())
	}
}

// at is the start of a history entry holding a whole commit seq.
func at(seq int64) sluice.Position { return sluice.Position{Seq: seq, Index: -1} }

// seqEvaluator gives one event per piece, its commit's sequence number;
// gate, when set, holds each evaluation until it can receive.
type seqEvaluator struct{ gate chan struct{} }

func (e seqEvaluator) Events(ctx context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	if e.gate != nil {
		select {
		case <-e.gate:
		case <-ctx.Done():
			return nil, sluice.Position{}, ctx.Err()
		}
	}
	return []sluice.Event{{ID: fmt.Sprint(c.Seq)}}, sluice.Position{Epoch: c.Epoch, Seq: c.Seq, Index: -1}, nil
}

// takeSeqs takes n events from m and returns their ids.
func takeSeqs(t *testing.T, m *member, n int) []string {
	t.Helper()
	var out []string
	deadline := time.After(wait)
	for len(out) < n {
		es, wake, state := m.take(nil)
		for _, e := range es {
			for _, ev := range e.Events {
				out = append(out, ev.ID)
			}
		}
		if state != takeWait {
			t.Fatalf("took %d of %d events, then state %d", len(out), n, state)
		}
		if wake == nil || len(out) >= n {
			continue
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("took %d of %d events", len(out), n)
		}
	}
	return out
}

// A share evaluates on demand: no goroutine while nothing is queued, and
// a burst larger than its queue (evaluations held back meanwhile) still
// reaches its member whole and in order, partly through the log.
func TestShareEvaluatesOnDemand(t *testing.T) {
	t.Parallel()
	f := newTestFeed(t)
	gate := make(chan struct{})
	m := f.join(t, ShareOptions{Key: "k", New: func() Evaluator { return seqEvaluator{gate: gate} }})
	defer m.leave()
	s := m.s.f
	idle := func() bool {
		s.runMu.Lock()
		defer s.runMu.Unlock()
		return !s.running
	}
	if !idle() {
		t.Fatal("a share with nothing queued runs a goroutine")
	}
	const n = 5 * shareQueue
	for range n {
		f.publish(t)
	}
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprint(i))
	}
	close(gate)
	if got := takeSeqs(t, m, n); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v", got)
	}
	if f.subscription(s.sub.ID()).CatchUps == 0 {
		t.Fatal("a burst larger than the share's queue did not overflow to the log")
	}
	// The drain that evaluated the burst exits (the test's timeout
	// catches one that does not).
	s.runMu.Lock()
	for s.running {
		s.idle.Wait()
	}
	s.runMu.Unlock()
}

// failEvaluator fails its first evaluation.
type failEvaluator struct{}

func (failEvaluator) Events(context.Context, *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	return nil, sluice.Position{}, errors.New("evaluation failed")
}

// classEvaluator gives one event per piece that changes a document of
// its class, "<class>:<seq>".
type classEvaluator struct{ class string }

func (e classEvaluator) Events(_ context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	for _, ch := range c.Changes {
		if ch.Class == e.class {
			return []sluice.Event{{ID: fmt.Sprintf("%s:%d", e.class, c.Seq)}}, sluice.Position{Epoch: c.Epoch, Seq: c.Seq, Index: -1}, nil
		}
	}
	return nil, sluice.Position{}, nil
}

// The distinct shares of one connection are evaluated from one hub
// subscription (Feed): each gets the events of its own evaluation, in
// order; one that fails or leaves does not end the others; the last one
// out ends the subscription, and a later share starts a new one.
func TestConnectionFeedServesDistinctShares(t *testing.T) {
	t.Parallel()
	f := newTestFeed(t)
	var conn Feed
	join := func(key string, ev Evaluator, classes ...string) *member {
		t.Helper()
		return f.join(t, ShareOptions{Key: key, Classes: classes, conn: &conn, New: func() Evaluator { return ev }})
	}
	a := join("a", classEvaluator{"A"}, "A")
	b := join("b", classEvaluator{"B"}, "B")
	bad := join("bad", failEvaluator{}, "A")
	if a.subscriptionID() != b.subscriptionID() || a.subscriptionID() != bad.subscriptionID() {
		t.Fatalf("shares of one connection on hub subscriptions %d, %d and %d, want one", a.subscriptionID(), b.subscriptionID(), bad.subscriptionID())
	}
	f.publish(t, "A")
	f.publish(t, "B")
	f.publish(t, "A", "B")
	if got := fmt.Sprint(takeSeqs(t, a, 2)); got != "[A:1 A:3]" {
		t.Fatalf("share a got %s", got)
	}
	if got := fmt.Sprint(takeSeqs(t, b, 2)); got != "[B:2 B:3]" {
		t.Fatalf("share b got %s", got)
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
			t.Fatal("the failing share did not end")
		}
	}
	if err := bad.endErr(); err == nil || err.Error() != "evaluation failed" {
		t.Fatalf("failing share ended with %v", err)
	}
	bad.leave()
	sub := a.s.f.sub
	a.leave()
	f.publish(t, "B")
	if got := fmt.Sprint(takeSeqs(t, b, 1)); got != "[B:4]" {
		t.Fatalf("share b after a left got %s", got)
	}
	b.leave()
	select {
	case <-sub.Done():
	case <-time.After(wait):
		t.Fatal("the feed's subscription outlived its last share")
	}
	c := join("c", classEvaluator{"A"}, "A")
	defer c.leave()
	if c.subscriptionID() == sub.ID() {
		t.Fatal("a share joined a closed feed")
	}
	f.publish(t, "A")
	if got := fmt.Sprint(takeSeqs(t, c, 1)); got != "[A:5]" {
		t.Fatalf("share c got %s", got)
	}
}

// revisingEvaluator is prepared for schema version 1, in which its class
// is A; version 2 adds B, and it revises itself to it when it meets a
// commit made under it (as a GraphQL subscription does). It gives one
// event per piece that changes a document of its classes,
// "<class>:<seq>", and records the pieces it evaluated.
type revisingEvaluator struct {
	mu        sync.Mutex
	version   int
	classes   []string
	evaluated []int64
}

func newRevisingEvaluator() *revisingEvaluator {
	return &revisingEvaluator{version: 1, classes: []string{"A"}}
}

func (e *revisingEvaluator) Events(_ context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evaluated = append(e.evaluated, c.Seq)
	if c.SchemaVersion == 2 && e.version == 1 {
		e.version, e.classes = 2, []string{"A", "B"}
	}
	for _, ch := range c.Changes {
		if slices.Contains(e.classes, ch.Class) {
			return []sluice.Event{{ID: fmt.Sprintf("%s:%d", ch.Class, c.Seq)}}, sluice.Position{Epoch: c.Epoch, Seq: c.Seq, Index: -1}, nil
		}
	}
	return nil, sluice.Position{}, nil
}

func (e *revisingEvaluator) Classes() ([]string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.classes), e.version
}

func (e *revisingEvaluator) seen() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprint(e.evaluated)
}

// A share whose evaluator revises itself to a later schema version gets
// the commits of that version whatever their classes until it did, then
// those of the classes of its new version: a class the new version adds
// reaches it (on a feed of its own, and on its connection's), and the
// commits of classes it does not need are skipped again.
func TestShareClassesFollowItsSchemaVersion(t *testing.T) {
	t.Parallel()
	f := newTestFeed(t)
	var conn Feed
	own, onConn := newRevisingEvaluator(), newRevisingEvaluator()
	a := f.join(t, ShareOptions{Key: "own", Classes: []string{"A"}, ClassesVersion: 1, New: func() Evaluator { return own }})
	defer a.leave()
	b := f.join(t, ShareOptions{Key: "conn", Classes: []string{"A"}, ClassesVersion: 1, conn: &conn, New: func() Evaluator { return onConn }})
	defer b.leave()
	f.publishUnder(t, 1, "B") // 1: no class of version 1
	f.publishUnder(t, 1, "A") // 2
	f.publishUnder(t, 2, "B") // 3: version 2 has B
	f.publishUnder(t, 2, "C") // 4: version 2 has no C
	f.publishUnder(t, 2, "A") // 5
	for name, m := range map[string]*member{"own": a, "conn": b} {
		if got := fmt.Sprint(takeSeqs(t, m, 3)); got != "[A:2 B:3 A:5]" {
			t.Errorf("share %s got %s, want [A:2 B:3 A:5]", name, got)
		}
	}
	for name, e := range map[string]*revisingEvaluator{"own": own, "conn": onConn} {
		if got := e.seen(); got != "[2 3 5]" {
			t.Errorf("share %s evaluated %s, want [2 3 5]", name, got)
		}
	}
}

// cohortBatcher is a Batcher whose evaluators (cohortEvaluator) are
// prepared for schema version 1, in which their class is A, and revise
// themselves to version 2 at the settle after they noted a commit made
// under it (as live queries do), their classes then being next. It
// records the pieces noted.
type cohortBatcher struct {
	mu    sync.Mutex
	noted []int64
}

type cohortEvaluator struct {
	key            string
	version        int
	classes, next  []string
	stale          bool
	noted, settled int64
}

func (*cohortEvaluator) Events(context.Context, *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	return nil, sluice.Position{}, errors.New("a batched share's Events was called")
}

func (e *cohortEvaluator) Classes() ([]string, int) { return e.classes, e.version }

func (b *cohortBatcher) NewGroup() BatchGroup { return b }

func (b *cohortBatcher) Note(_ context.Context, c *sluice.Commit, evs []Evaluator) {
	b.mu.Lock()
	b.noted = append(b.noted, c.Seq)
	b.mu.Unlock()
	for _, ev := range evs {
		e := ev.(*cohortEvaluator)
		e.noted = c.Seq
		e.stale = e.stale || c.SchemaVersion > e.version
	}
}

func (b *cohortBatcher) Settle(_ context.Context, evs []Evaluator, out []Settled) {
	for i, ev := range evs {
		e := ev.(*cohortEvaluator)
		if e.stale {
			e.version, e.classes, e.stale = 2, e.next, false
		}
		if e.settled == e.noted && e.noted > 0 {
			continue
		}
		e.settled = e.noted
		out[i].Events = []sluice.Event{{ID: fmt.Sprintf("%s@%d", e.key, e.noted)}}
	}
}

func (b *cohortBatcher) seen() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprint(b.noted)
}

// takeUntil takes m's results until one is want.
func takeUntil(t *testing.T, m *member, want string) {
	t.Helper()
	for {
		if ids := takeIDs(t, m); slices.Contains(ids, want) {
			return
		}
	}
}

// A live query cohort's feed passes every commit made under a later
// schema version than its queries were prepared for until each of them
// was revised to it, then only those of their classes at that version
// (the union: they may differ by their variables); a share that joins
// prepared for the older version widens the filter again until it too
// was revised. Before, the cohort's filter was never narrowed.
func TestCohortClassesFollowItsSchemaVersion(t *testing.T) {
	t.Parallel()
	f := newTestFeed(t)
	b := &cohortBatcher{}
	join := func(key string, next ...string) *member {
		return f.join(t, ShareOptions{Key: key, Latest: true, Batcher: b, Cohort: "c", Classes: []string{"A"}, ClassesVersion: 1,
			New: func() Evaluator { return &cohortEvaluator{key: key, version: 1, classes: []string{"A"}, next: next} }})
	}
	x := join("x", "A")
	defer x.leave()
	y := join("y", "A", "B")
	defer y.leave()
	takeUntil(t, x, "x@0")
	takeUntil(t, y, "y@0")
	f.publishUnder(t, 1, "B") // 1: no class of version 1
	f.publishUnder(t, 2, "C") // 2: of version 2, which they are not revised to
	takeUntil(t, x, "x@2")    // revised, and narrowed to A B, before this result
	f.publishUnder(t, 2, "C") // 3: no class of theirs
	f.publishUnder(t, 2, "B") // 4: y's
	takeUntil(t, y, "y@4")
	if got := b.seen(); got != "[2 4]" {
		t.Errorf("noted %s before z joined, want [2 4]", got)
	}
	z := join("z", "A", "C") // prepared for version 1: the filter is widened
	defer z.leave()
	takeUntil(t, z, "z@0")
	f.publishUnder(t, 2, "C") // 5: z's once revised
	takeUntil(t, z, "z@5")
	f.publishUnder(t, 2, "D") // 6: nobody's
	f.publishUnder(t, 2, "A") // 7
	takeUntil(t, x, "x@7")
	if got := b.seen(); got != "[2 4 5 7]" {
		t.Errorf("noted %s, want [2 4 5 7]", got)
	}
}

package stream

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// gatedEvaluator counts the evaluations running at once (each holding
// the piece's images, decoded, as a GraphQL subscription does) and holds
// each until release is closed.
type gatedEvaluator struct {
	mu        sync.Mutex
	running   int
	most      int
	evaluated int
	release   chan struct{}
}

func (g *gatedEvaluator) Events(ctx context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	g.mu.Lock()
	g.running++
	g.most = max(g.most, g.running)
	g.mu.Unlock()
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	g.mu.Lock()
	g.running--
	g.evaluated++
	g.mu.Unlock()
	return nil, sluice.Position{Epoch: c.Epoch, Seq: c.Seq, Index: -1}, nil
}

// counts returns the evaluations running now, the most that ran at once
// and those done.
func (g *gatedEvaluator) counts() (running, most, evaluated int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running, g.most, g.evaluated
}

// leaveAll makes every member leave its share.
func leaveAll(members []*member) {
	for _, m := range members {
		m.leave()
	}
}

// addImage commits a document of class whose image is about size bytes
// and wakes the tailer.
func (f *testFeed) addImage(class string, size int) {
	f.l.mu.Lock()
	c := &sluice.Commit{DatabaseID: testDB.ID, Epoch: testDB.Epoch, Seq: int64(len(f.l.commits)) + 1, Time: time.Now(), NumChanges: 1}
	c.Changes = []sluice.Change{{Class: class, DocID: class + "/big", Op: sluice.OpAdded, After: []byte(`{"s":"` + strings.Repeat("x", size) + `"}`)}}
	f.l.commits = append(f.l.commits, c)
	f.l.mu.Unlock()
	f.changes++
	f.tailer.Wake(testDB.ID)
}

// drainsBlocked reports whether n feeds' drains are running, each
// blocked (in an evaluation, or waiting for its turn).
func drainsBlocked(n int) bool {
	buf := make([]byte, 16<<20)
	blocked := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if !strings.Contains(g, "stream.(*feed).drain(") {
			continue
		}
		if !strings.Contains(head, "[select") && !strings.Contains(head, "[chan receive") {
			return false
		}
		blocked++
	}
	return blocked == n
}

// Distinct subscriptions each evaluate a commit's images on their own
// (a GraphQL subscription decodes each document it filters or shows, a
// REST stream copies it into its event): found by review, 200 distinct
// subscriptions of a class held 600 MB of live heap for one commit of a
// 1.4 MB document, each its own decoded copy, at once. Evaluations run at
// once only while their pieces' images fit in Options.ImageBytes
// together; the others wait their turn.
func TestEvaluationsShareAnImageBudget(t *testing.T) {
	const (
		shares = 8
		image  = 100 << 10
		budget = 250 << 10 // two evaluations of the piece at once
	)
	f := newTestFeed(t)
	f.s.images = newImageBudget(budget)
	ev := &gatedEvaluator{release: make(chan struct{})}
	var members []*member
	for i := range shares {
		members = append(members, f.join(t, ShareOptions{Key: fmt.Sprintf("distinct %d", i), Classes: []string{"T"}, New: func() Evaluator { return ev }}))
	}
	defer leaveAll(members)

	f.addImage("T", image)
	eventually.True(t, wait, "every share's drain blocked on the commit", func() bool { return drainsBlocked(shares) })
	if running, _, _ := ev.counts(); running > 2 {
		t.Errorf("%d evaluations of a piece of %d bytes of images run at once within a budget of %d bytes, want 2", running, image, budget)
	}

	// A small piece does not wait behind them: evaluations that hold the
	// budget may read Postgres for as long as graphql_request_timeout,
	// and one user's slow ones held up every stream of the replica.
	small := &gatedEvaluator{release: make(chan struct{})}
	close(small.release)
	other := f.join(t, ShareOptions{Key: "small", Classes: []string{"S"}, New: func() Evaluator { return small }})
	defer other.leave()
	f.addImage("S", smallImageBytes-16)
	eventually.True(t, wait, "the small piece evaluated while the budget is full", func() bool {
		_, _, evaluated := small.counts()
		return evaluated == 1
	})
	close(ev.release)
	eventually.True(t, wait, "every share evaluated the commit", func() bool {
		_, _, evaluated := ev.counts()
		return evaluated == shares
	})
	if _, most, _ := ev.counts(); most > 2 {
		t.Errorf("%d evaluations ran at once, want at most 2", most)
	}
}

// gatedBatcher's groups count the notes running at once (each holding
// the piece's images, decoded, as a live query cohort does) and hold each
// until release is closed; a settle gives nothing.
type gatedBatcher struct{ gatedEvaluator }

func (b *gatedBatcher) NewGroup() BatchGroup { return b }

func (b *gatedBatcher) Note(ctx context.Context, c *sluice.Commit, _ []Evaluator) {
	_, _, _ = b.Events(ctx, c)
}

func (b *gatedBatcher) Settle(context.Context, []Evaluator, []Settled) {}

// The live queries of a cohort note a piece once for them all, but each
// cohort (live queries of another query) notes it on its own, decoding
// its documents: found by review, one user's 100 live queries, distinct
// by their filters, held 614 MB of live heap for one commit of a 1.4 MB
// document. Notes take the piece's images from the same budget.
func TestCohortNotesShareAnImageBudget(t *testing.T) {
	const (
		cohorts = 8
		image   = 100 << 10
		budget  = 250 << 10
	)
	f := newTestFeed(t)
	f.s.images = newImageBudget(budget)
	b := &gatedBatcher{gatedEvaluator{release: make(chan struct{})}}
	var members []*member
	for i := range cohorts {
		key := fmt.Sprintf("cohort %d", i)
		members = append(members, f.join(t, ShareOptions{Key: key, Latest: true, Batcher: b, Cohort: key, Classes: []string{"T"},
			New: func() Evaluator { return &resultEvaluator{key: key} }}))
	}
	defer leaveAll(members)

	f.addImage("T", image)
	eventually.True(t, wait, "every cohort's drain blocked on the commit", func() bool { return drainsBlocked(cohorts) })
	if running, _, _ := b.counts(); running > 2 {
		t.Errorf("%d cohorts note a piece of %d bytes of images at once within a budget of %d bytes, want 2", running, image, budget)
	}
	close(b.release)
	eventually.True(t, wait, "every cohort noted the commit", func() bool {
		_, _, evaluated := b.counts()
		return evaluated == cohorts
	})
	if _, most, _ := b.counts(); most > 2 {
		t.Errorf("%d cohorts noted at once, want at most 2", most)
	}
}

// eventSink records the events written to it.
type eventSink struct {
	quietSink
	mu     sync.Mutex
	events int
	ended  error
}

func (k *eventSink) WriteEvent(sluice.Event) { k.mu.Lock(); k.events++; k.mu.Unlock() }
func (k *eventSink) End(err error)           { k.mu.Lock(); k.ended = err; k.mu.Unlock() }

// oneEvent gives one event for every piece.
type oneEvent struct{}

func (oneEvent) Events(_ context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	return []sluice.Event{{ID: "e"}}, sluice.Position{Epoch: c.Epoch, Seq: c.Seq, Index: -1}, nil
}

// A stream of its own subscription (resumed, or gone on alone) whose
// access ends while its evaluation of a piece waits for the image budget
// writes nothing of that piece: it was judged before the wait, and the
// wait may be long.
func TestStreamRevokedWhileWaitingForTheBudgetSendsNothing(t *testing.T) {
	const budget = 256 << 10
	f := newTestFeed(t)
	f.s.images = newImageBudget(budget)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := f.s.hub.Subscribe(ctx, testDB, nil, changefeed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	sink := &eventSink{}
	s := &Stream{e: f.s, ctx: ctx, sink: sink, sub: sub, ev: oneEvent{}, beat: make(chan struct{}, 1)}
	// Another evaluation holds the whole budget.
	hold, err := f.s.images.take(ctx, imagePiece("other", budget))
	if err != nil {
		t.Fatal(err)
	}
	c := &sluice.Commit{DatabaseID: testDB.ID, Epoch: testDB.Epoch, Seq: 1, NumChanges: 1,
		Changes: []sluice.Change{{Class: "T", DocID: "T/big", Op: sluice.OpAdded, After: []byte(strings.Repeat("x", smallImageBytes))}}}
	done := make(chan bool, 1)
	go func() { done <- s.writeCommits(c) }()
	eventually.True(t, wait, "the stream waiting for the budget", func() bool {
		buf := make([]byte, 16<<20)
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "stream.(*Stream).writeCommits(") && strings.Contains(g, "stream.(*imageBudget).take(") {
				return true
			}
		}
		return false
	})
	s.ender.End(&changefeed.Revoked{Err: sluice.Errorf(sluice.CodeForbidden, "role revoked")})
	hold()
	select {
	case ok := <-done:
		if ok {
			t.Error("the stream goes on after its access ended")
		}
	case <-time.After(wait):
		t.Fatal("the stream's evaluation did not return")
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.events != 0 || !changefeed.IsRevoked(sink.ended) {
		t.Fatalf("after its access ended while it waited: %d events written, ended with %v", sink.events, sink.ended)
	}
}

// imagePiece returns a piece of a commit of user holding size bytes of
// change images.
func imagePiece(user string, size int) *sluice.Commit {
	return &sluice.Commit{DatabaseID: testDB.ID, Epoch: testDB.Epoch, Seq: 1, NumChanges: 1, User: user,
		Changes: []sluice.Change{{Class: "T", DocID: "T/big", Op: sluice.OpAdded, After: make([]byte, size)}}}
}

// takesWaiting returns how many goroutines wait in the image budget's
// take.
func takesWaiting() int {
	buf := make([]byte, 16<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if strings.Contains(g, "stream.(*imageBudget).take(") && strings.Contains(head, "[select") {
			n++
		}
	}
	return n
}

// One user's large commits evaluated slowly held up every other user's
// large commits, which waited behind them in one queue (found by review:
// the budget went in turns, whoever's pieces they were). A user's pieces
// hold at most half of the budget while another user's wait: here ann's
// two evaluations hold 200 KiB of 250, her third waits, then bob's
// piece; once ann's first returns, bob's goes before her third.
func TestImageBudgetIsSharedBetweenUsers(t *testing.T) {
	const image, budget = 100 << 10, 250 << 10
	b := newImageBudget(budget)
	ctx := context.Background()
	first, err := b.take(ctx, imagePiece("ann", image))
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.take(ctx, imagePiece("ann", image))
	if err != nil {
		t.Fatal(err)
	}
	defer second()
	order := make(chan string, 2)
	for i, user := range []string{"ann", "bob"} {
		go func() {
			release, err := b.take(ctx, imagePiece(user, image))
			if err != nil {
				t.Error(err)
				return
			}
			order <- user
			release()
		}()
		eventually.True(t, wait, fmt.Sprintf("%d evaluations waiting", i+1), func() bool { return takesWaiting() == i+1 })
	}
	first()
	if got := <-order; got != "bob" {
		t.Errorf("once ann's first evaluation returned, %s's piece went first, want bob's: ann holds half the budget while bob waits", got)
	}
	<-order
}

// A user alone may use the whole budget: the half is a bound only while
// another user waits.
func TestImageBudgetIsWholeForAUserAlone(t *testing.T) {
	const image, budget = 100 << 10, 250 << 10
	b := newImageBudget(budget)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for range 2 {
		release, err := b.take(ctx, imagePiece("ann", image))
		if err != nil {
			t.Fatalf("ann's evaluations alone within the budget: %v", err)
		}
		defer release()
	}
}

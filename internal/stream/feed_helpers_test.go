package stream

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 30 * time.Second

var testDB = &sluice.Database{ID: 1, Org: "o", Name: "db", Epoch: "ep"}

// memLog is a commit log in memory, commits 1..n of database testDB, that
// a tailer reads as it reads Postgres.
type memLog struct {
	mu      sync.Mutex
	commits []*sluice.Commit
}

func (l *memLog) History(_ context.Context, id int64) (sluice.History, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return sluice.History{LastSeq: int64(len(l.commits))}, nil
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

func (l *memLog) ReadLog(_ context.Context, _ *sluice.Database, after sluice.Position, _ sluice.Stamp, limit int, _ int64) ([]*sluice.Commit, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := sluice.CursorAt(after)
	var out []*sluice.Commit
	for _, cm := range l.commits {
		if r := cm.Since(c); r != nil {
			if len(out) == limit {
				return out, true, nil
			}
			out = append(out, r)
		}
	}
	return out, false, nil
}

func (l *memLog) AccessChanges(context.Context, int64, int64) ([]sluice.AccessChange, error) {
	return nil, nil
}

func (l *memLog) Heads(context.Context) ([]sluice.Head, int64, error) {
	h, _ := l.History(context.Background(), testDB.ID)
	return []sluice.Head{{DatabaseID: testDB.ID, Epoch: testDB.Epoch, History: h}}, 0, nil
}

func (l *memLog) Listen(context.Context) (changefeed.Listener, error) { return quiet{}, nil }
func (l *memLog) ResetConnections()                                   {}

// quiet is a listener that never hears anything: the tests wake the
// tailer themselves.
type quiet struct{}

func (quiet) Wait(ctx context.Context) (int64, error) { <-ctx.Done(); return 0, ctx.Err() }
func (quiet) Close(context.Context) error             { return nil }

// add appends a commit of the given classes (one change each).
func (l *memLog) add(classes ...string) *sluice.Commit { return l.addUnder(0, classes...) }

// addUnder appends a commit of the given classes made under schema
// version version.
func (l *memLog) addUnder(version int, classes ...string) *sluice.Commit {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &sluice.Commit{DatabaseID: testDB.ID, Epoch: testDB.Epoch, Seq: int64(len(l.commits)) + 1, Time: time.Now(), SchemaVersion: version}
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

// testFeed is a stream server on a hub that a tailer feeds from a memLog.
type testFeed struct {
	s       *Server
	l       *memLog
	tailer  *changefeed.Tailer
	metrics *metrics.Stream
	changes int
}

func newTestFeed(t *testing.T) *testFeed { return newTestFeedWith(t, changefeed.HubOptions{}) }

// newTestFeedWith is newTestFeed with the hub's options o.
func newTestFeedWith(t *testing.T, o changefeed.HubOptions) *testFeed {
	t.Helper()
	l := &memLog{}
	m := metrics.NewStream(prometheus.NewRegistry())
	o.Recheck = 10 * time.Millisecond
	hub := changefeed.NewHub(l, o)
	tl := changefeed.NewTailer(l, hub, changefeed.TailerOptions{Poll: 10 * time.Millisecond, Metrics: m})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tl.Run(ctx) }()
	s := New(hub, Options{NoPark: true})
	// Commits made from now on are handed over by the tailer (those
	// before its first read of the heads are the log's, read by
	// catch-ups).
	eventually.True(t, wait, "the tailer running", tl.Running)
	t.Cleanup(func() {
		cancel()
		<-done
		hub.Close()
		s.Close(context.Background())
	})
	return &testFeed{s: s, l: l, tailer: tl, metrics: m}
}

// publish commits a change of each class and returns once the tailer has
// handed it to the hub.
func (f *testFeed) publish(t *testing.T, classes ...string) {
	t.Helper()
	f.publishUnder(t, 0, classes...)
}

// publishUnder is publish of a commit made under schema version version.
func (f *testFeed) publishUnder(t *testing.T, version int, classes ...string) {
	t.Helper()
	c := f.l.addUnder(version, classes...)
	f.changes += len(c.Changes)
	f.tailer.Wake(testDB.ID)
	eventually.True(t, wait, fmt.Sprintf("commit %d handed to the hub", c.Seq), func() bool {
		var m dto.Metric
		_ = f.metrics.Published.WithLabelValues("1").Write(&m)
		return m.GetCounter().GetValue() >= float64(f.changes)
	})
}

// join adds a member to the share o describes, of testDB.
func (f *testFeed) join(t *testing.T, o ShareOptions) *member {
	t.Helper()
	o.database = testDB
	m, err := f.s.shares.join(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// subscription returns the hub's listing of subscription id.
func (f *testFeed) subscription(id uint64) SubscriptionInfo {
	for _, s := range f.s.Subscriptions() {
		if s.ID == id {
			return s
		}
	}
	return SubscriptionInfo{}
}

package stream

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/changefeed"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// recordSink records what the server asked of it.
type recordSink struct {
	quietSink
	refused, failed error
	ready           bool
	ended           chan error
}

func (k *recordSink) Refuse(err error) { k.refused = err }
func (k *recordSink) Fail(err error)   { k.failed = err }
func (k *recordSink) Ready(uint64)     { k.ready = true }
func (k *recordSink) End(err error) {
	if k.ended != nil {
		k.ended <- err
	}
}

// TestOpenReleasesOnEveryPath: whatever stops a stream (a budget, the
// stream cap, an error preparing it, an expired position, its end), the
// sink is told the way its transport answers (Refuse before anything is
// written, Fail after admission) and what the stream held is released
// once: the budget, and its place among the open streams.
func TestOpenReleasesOnEveryPath(t *testing.T) {
	f := newTestFeedWith(t, changefeed.HubOptions{MaxStreams: 1})
	var held atomic.Int64
	admit := func() (func(), error) {
		held.Add(1)
		return func() { held.Add(-1) }, nil
	}
	grant := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 2, Name: "u"}}, Database: testDB, Role: sluice.RoleRead}
	spec := func() Spec {
		return Spec{Label: "test", Database: testDB, Grant: grant, Admit: admit,
			Share: &ShareOptions{Key: "k", New: func() Evaluator { return seqEvaluator{} }}}
	}
	ctx := context.Background()

	refused := errors.New("over budget")
	k := &recordSink{}
	sp := spec()
	sp.Admit = func() (func(), error) { return nil, refused }
	if s := f.s.Open(ctx, sp, k); s != nil || k.refused != refused || k.ready {
		t.Fatalf("over budget: %v, refused %v", s, k.refused)
	}

	k = &recordSink{}
	sp = spec()
	sp.Prepare = func(context.Context) (func(*Entry) bool, error) { return nil, errors.New("prepare failed") }
	if s := f.s.Open(ctx, sp, k); s != nil || k.failed == nil || k.refused != nil || held.Load() != 0 {
		t.Fatalf("prepare failed: %v, failed %v, budget held %d", s, k.failed, held.Load())
	}

	k = &recordSink{}
	sp = spec()
	sp.Share, sp.Evaluator = nil, seqEvaluator{}
	sp.From = &sluice.Position{Epoch: "another", Seq: 1}
	if s := f.s.Open(ctx, sp, k); s != nil || sluice.ErrorCode(k.failed) != sluice.CodeGone || held.Load() != 0 {
		t.Fatalf("expired position: %v, failed %v, budget held %d", s, k.failed, held.Load())
	}

	// One stream opens (the cap is one); a second is refused by the cap,
	// before anything is written, and holds nothing.
	k = &recordSink{ended: make(chan error, 1)}
	first := f.s.Open(ctx, spec(), k)
	if first == nil || !k.ready || held.Load() != 1 {
		t.Fatalf("open: %v, ready %v, budget held %d", first, k.ready, held.Load())
	}
	k2 := &recordSink{}
	if s := f.s.Open(ctx, spec(), k2); s != nil || sluice.ErrorCode(k2.refused) != sluice.CodeUnavailable || held.Load() != 1 {
		t.Fatalf("past the cap: %v, refused %v, budget held %d", s, k2.refused, held.Load())
	}
	// It ends (the hub closes), which frees its place: another is
	// admitted (and fails to register, the hub being closed).
	done := make(chan struct{})
	go func() { defer close(done); first.Serve() }()
	f.s.hub.Close()
	select {
	case err := <-k.ended:
		if !errors.Is(err, ErrShutdown) {
			t.Fatalf("ended with %v", err)
		}
	case <-time.After(wait):
		t.Fatal("the stream did not end")
	}
	<-done
	if held.Load() != 0 {
		t.Fatalf("budget held after the end: %d", held.Load())
	}
	first.Release() // a second release does nothing
	if held.Load() != 0 {
		t.Fatalf("budget after a second release: %d", held.Load())
	}
	k3 := &recordSink{}
	if s := f.s.Open(ctx, spec(), k3); s != nil || k3.refused != nil || !errors.Is(k3.failed, ErrShutdown) || held.Load() != 0 {
		t.Fatalf("after the end: %v, refused %v, failed %v, budget held %d", s, k3.refused, k3.failed, held.Load())
	}
}

// countSink counts the events written to it and reports its end.
type countSink struct {
	quietSink
	events atomic.Int64
	ended  chan error
}

func (k *countSink) WriteEvent(sluice.Event) { k.events.Add(1) }
func (k *countSink) End(err error)           { k.ended <- err }

// TestRevokedStreamSendsNothingQueued: a stream on a subscription of its
// own (a resume) has commits queued while it evaluates one; its access
// ends. It writes what it was evaluating, then ends: none of the queued
// commits (select picked them over Done at random, and a batch took up
// to 64 more, so all of them went out).
func TestRevokedStreamSendsNothingQueued(t *testing.T) {
	f := newTestFeed(t)
	const commits = 10
	for range commits {
		f.l.add()
	}
	gate, entered := make(chan struct{}), make(chan struct{}, commits)
	grant := &sluice.Grant{Credential: sluice.Credential{User: &sluice.User{ID: 2, Name: "u"}}, Database: testDB, Role: sluice.RoleRead}
	k := &countSink{ended: make(chan error, 1)}
	s := f.s.Open(context.Background(), Spec{Label: "test", Database: testDB, Grant: grant, Evaluator: enteredEvaluator{seqEvaluator{gate: gate}, entered},
		From: &sluice.Position{Epoch: testDB.Epoch, Seq: 0, Index: sluice.WholeCommit}}, k)
	if s == nil {
		t.Fatal("the stream did not open")
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Serve() }()
	// The first commit is being evaluated (the gate holds it), the rest
	// queued.
	select {
	case <-entered:
	case <-time.After(wait):
		t.Fatal("the stream did not take the first commit")
	}
	eventually.True(t, wait, "every commit handed to the stream", func() bool {
		subs := f.s.Subscriptions()
		return len(subs) == 1 && subs[0].Commits == commits
	})
	s.Revoke(&changefeed.Revoked{Err: sluice.Errorf(sluice.CodeForbidden, "access revoked")})
	close(gate)
	select {
	case err := <-k.ended:
		if !changefeed.IsRevoked(err) {
			t.Fatalf("ended with %v", err)
		}
	case <-time.After(wait):
		t.Fatal("the stream did not end")
	}
	<-done
	if n := k.events.Load(); n != 1 {
		t.Fatalf("%d events written after the access ended, want the one being evaluated", n)
	}
}

// enteredEvaluator is an Evaluator that says on entered when it is asked
// for a commit's events.
type enteredEvaluator struct {
	seqEvaluator
	entered chan struct{}
}

func (e enteredEvaluator) Events(ctx context.Context, c *sluice.Commit) ([]sluice.Event, sluice.Position, error) {
	e.entered <- struct{}{}
	return e.seqEvaluator.Events(ctx, c)
}

// endingSink is a sink whose end is written slowly: End reports the
// stream's error on ended, then holds the stream until gate closes, as a
// final write to a client that does not read holds it for up to
// write_timeout.
type endingSink struct {
	recordSink
	gate chan struct{}
}

func (k *endingSink) End(err error) {
	k.ended <- err
	<-k.gate
}

// TestEndingStreamKeepsItsPlaceUnderTheCaps: a stream its guard ended
// (here its credential expired) holds its place under max_streams and
// max_streams_per_user, and what it was charged for its variables
// (Spec.VariablesBytes) under stream_variables_bytes and
// stream_variables_bytes_per_user, until it wrote its end and was
// released, not only until its guard ended: else streams still writing
// their ends to clients that do not read could exceed the caps.
func TestEndingStreamKeepsItsPlaceUnderTheCaps(t *testing.T) {
	for _, c := range []struct {
		name    string
		options changefeed.HubOptions
		refusal sluice.Code
	}{
		{"max_streams", changefeed.HubOptions{MaxStreams: 1}, sluice.CodeUnavailable},
		{"max_streams_per_user", changefeed.HubOptions{MaxStreamsPerUser: 1}, sluice.CodeTooMany},
		{"stream_variables_bytes", changefeed.HubOptions{StreamVariablesBytes: 100}, sluice.CodeUnavailable},
		{"stream_variables_bytes_per_user", changefeed.HubOptions{StreamVariablesBytesPerUser: 100}, sluice.CodeTooMany},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newTestFeedWith(t, c.options)
			user := &sluice.User{ID: 2, Name: "u"}
			spec := func(grant *sluice.Grant) Spec {
				return Spec{Label: "test", Database: testDB, Grant: grant, VariablesBytes: 60,
					Share: &ShareOptions{Key: "k", New: func() Evaluator { return seqEvaluator{} }}}
			}
			ctx := context.Background()
			// Long enough to open before it: Open refuses an expired grant.
			expiring := &sluice.Grant{Credential: sluice.Credential{User: user, ExpiresAt: time.Now().Add(time.Second)}, Database: testDB, Role: sluice.RoleRead}
			k := &endingSink{recordSink: recordSink{ended: make(chan error, 1)}, gate: make(chan struct{})}
			first := f.s.Open(ctx, spec(expiring), k)
			if first == nil {
				t.Fatalf("the first stream did not open: refused %v, failed %v", k.refused, k.failed)
			}
			done := make(chan struct{})
			go func() { defer close(done); first.Serve() }()
			select {
			case err := <-k.ended:
				if !changefeed.IsRevoked(err) {
					t.Fatalf("ended with %v", err)
				}
			case <-time.After(wait):
				t.Fatal("the stream did not end at its credential's expiry")
			}
			// Its end is being written: its place is still taken.
			grant := &sluice.Grant{Credential: sluice.Credential{User: user}, Database: testDB, Role: sluice.RoleRead}
			k2 := &recordSink{}
			if s := f.s.Open(ctx, spec(grant), k2); s != nil || sluice.ErrorCode(k2.refused) != c.refusal {
				if s != nil {
					s.Release()
				}
				close(k.gate)
				<-done
				t.Fatalf("a stream opened while another writes its end (opened %v, refused %v)", s != nil, k2.refused)
			}
			close(k.gate)
			<-done
			// Written and released: its place is free.
			k3 := &recordSink{}
			s := f.s.Open(ctx, spec(grant), k3)
			if s == nil || !k3.ready {
				t.Fatalf("a stream once the other was released: refused %v, failed %v", k3.refused, k3.failed)
			}
			s.Release()
		})
	}
}

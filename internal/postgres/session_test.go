package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// TestConnectionsRunWithoutJITAndWithATimeout checks the settings every
// connection starts with, the pool's and the listener's: the statement
// and idle-in-transaction timeouts too.
func TestConnectionsRunWithoutJITAndWithATimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := postgres.Open(ctx, pgtest.NewDatabase(t), slog.New(slog.NewTextHandler(io.Discard, nil)), postgres.StatementTimeout(1500*time.Millisecond),
		postgres.IdleInTransactionTimeout(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil { // the listener reads its channel's name
		t.Fatal(err)
	}
	l, err := db.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	want := map[string]string{"jit": "off", "statement_timeout": "1500ms", "idle_in_transaction_session_timeout": "90s"}
	for name, v := range want {
		if got, err := db.ShowForTest(ctx, name); err != nil || got != v {
			t.Errorf("pool: %s = %q (%v), want %q", name, got, err, v)
		}
		if got, err := l.ShowForTest(ctx, name); err != nil || got != v {
			t.Errorf("listener: %s = %q (%v), want %q", name, got, err, v)
		}
	}
	if got, err := db.ShowForTest(ctx, "application_name"); err != nil || got != "sluice" {
		t.Errorf("pool: application_name = %q (%v)", got, err)
	}
}

// waitUntil polls cond until it holds, failing t after 20 seconds.
func waitUntil(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	eventually.True(t, 20*time.Second, what, func() bool {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting until %s: %v", what, err)
		}
		return ok
	})
}

// TestCancelledContextStopsTheStatement: a statement whose context ends
// stops on the server, told by a cancel request (pgx's default closed the
// connection, and the backend ran on). The connection is not used again:
// the pool closes it instead of handing it out (the queries below are the
// next to ask for one), since a cancel request can reach its backend late
// and cancel the next statement sent on it.
func TestCancelledContextStopsTheStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	sleepCtx, cancel := context.WithCancel(ctx)
	type result struct {
		closed bool
		pid    uint32
		err    error
	}
	done := make(chan result, 1)
	go func() {
		closed, pid, err := db.SleepForTest(sleepCtx, 600)
		done <- result{closed, pid, err}
	}()
	running := func(want int) func() (bool, error) {
		return func() (bool, error) {
			pids, err := db.ActiveForTest(ctx, "pg_sleep")
			return len(pids) == want, err
		}
	}
	waitUntil(t, "pg_sleep runs", running(1))
	cancel()
	r := <-done
	if r.err == nil {
		t.Fatal("the cancelled statement succeeded")
	}
	if r.closed {
		t.Errorf("the connection was closed before the cancel finished (%v)", r.err)
	}
	waitUntil(t, "pg_sleep stops on the server", running(0))
	waitUntil(t, "the cancelled statement's connection closed", func() (bool, error) {
		alive, err := db.BackendAliveForTest(ctx, r.pid)
		return !alive, err
	})
}

// TestStatementTimeoutCancelsALongStatement: Postgres cancels a statement
// that runs past statement_timeout, and the request fails as Unavailable.
func TestStatementTimeoutCancelsALongStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := postgres.Open(ctx, pgtest.NewDatabase(t), slog.New(slog.NewTextHandler(io.Discard, nil)), postgres.StatementTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	// The deadline only ends the test sooner should the timeout not work.
	sleepCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, _, err = db.SleepForTest(sleepCtx, 600)
	if sluice.ErrorCode(err) != sluice.CodeUnavailable {
		t.Fatalf("pg_sleep(600) with a 200ms statement timeout: %v, want Unavailable", err)
	}
	if pids, err := db.ActiveForTest(ctx, "pg_sleep"); err != nil || len(pids) != 0 {
		t.Fatalf("pg_sleep still running: %v (%v)", pids, err)
	}
}

// TestListenerWaitEndsWithItsContext: the listener's backend is idle while
// Wait blocks, so a cancel request has nothing to cancel; Wait must return
// when its context ends, not after the cancel grace that pooled
// connections wait (that grace was added to every shutdown).
func TestListenerWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	db := open(t)
	l, err := db.Listen(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Wait(ctx)
		done <- err
	}()
	// Wait is blocked on the socket once the backend shows the LISTEN
	// connection idle; cancel then.
	waitUntil(t, "the listener is idle", func() (bool, error) {
		var n int
		err := db.QueryRowForTest(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'sluice changefeed' AND state = 'idle'`, &n)
		return n == 1, err
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait returned %v, want context.Canceled", err)
		}
	case <-time.After(postgres.CancelGraceForTest / 2):
		t.Fatalf("Wait still blocked %v after its context ended (cancel grace %v)", postgres.CancelGraceForTest/2, postgres.CancelGraceForTest)
	}
}

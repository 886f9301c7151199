package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/pgtest"
)

// TestIdleTransactionIsEnded: a transaction left idle, its replica frozen
// in the middle of a schema change (SIGSTOP, a paused VM), is ended by
// Postgres after IdleInTransactionTimeout, and a write of another replica
// waiting for the database's counter row then gets it, instead of failing
// after statement_timeout for as long as the frozen replica sleeps. The
// lock that makes replicas take turns (holdLock) stays held, however long
// its transaction idles.
func TestIdleTransactionIsEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	db, d, s, _ := openNotesAt(t, url, IdleInTransactionTimeout(500*time.Millisecond))
	// Taken first, so that its transaction has idled longer than the
	// schema change's by the time that one is ended.
	release, err := db.holdLock(ctx, lockReferenceIndexes)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	held, resume := make(chan struct{}), make(chan struct{})
	thaw := sync.OnceFunc(func() { close(resume) })
	defer thaw()
	frozen := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, WriteSpec{Before: func(ctx context.Context, tx *Tx) error {
			if err := tx.LockForSchemaChange(ctx, d, s); err != nil {
				return err
			}
			close(held)
			<-resume // frozen: its connection sends nothing meanwhile
			_, err := tx.Databases(ctx)
			return err
		}})
		frozen <- err
	}()
	select {
	case <-held:
	case err := <-frozen:
		t.Fatalf("the schema change's locks: %v", err)
	}

	peer := openPeer(t, url)
	// The deadline only ends the test sooner should the timeout not work.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := peer.Write(wctx, WriteSpec{Database: d, Schema: s, Documents: func(ctx context.Context, w *Writer) error {
		return w.Insert(ctx, note("a"))
	}}); err != nil {
		t.Fatalf("a write of another replica, behind the frozen schema change: %v", err)
	}

	// Resumed, the frozen replica's request answers 503: its
	// connection is gone, as if Postgres had restarted.
	thaw()
	if err := <-frozen; sluice.ErrorCode(err) != sluice.CodeUnavailable {
		t.Fatalf("the frozen transaction, resumed: %v, want Unavailable", err)
	}
	err = peer.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT name FROM sluice.locks WHERE name = $1 FOR UPDATE NOWAIT", lockReferenceIndexes)
		return err
	})
	if !isLockTimeout(err) {
		t.Fatalf("the held lock, asked for by another replica: %v, want it still held", err)
	}
}

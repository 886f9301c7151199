package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/pgtest"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// byAdmin is whom the webhooks these tests change deliver as: the super
// user, as they are made.
var byAdmin = postgres.WebhookCreator{ID: 1, Name: "admin"}

// TestPruneKeepsWhatActiveWebhooksNeed: an active webhook holds the
// commits after its position from pruning, whatever the replicas publish;
// once paused it holds nothing, and resuming it then answers Gone naming
// the gap, until it is resumed from a retained position.
func TestPruneKeepsWhatActiveWebhooksNeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	a, s := noteDatabase(t, db, "hooked")
	commitN(t, db, a, s, 6)
	seal := func(int64) ([]byte, error) { return []byte("sealed secret"), nil }
	w := &sluice.Webhook{Database: a, URL: "https://example.com/", Ops: []string{"create"}, Batch: sluice.BatchEvent,
		CreatorID: 1, CreatorName: "admin", Position: sluice.Position{Epoch: a.Epoch, Seq: 2, Index: 0}}
	if err := db.CreateWebhook(ctx, w, seal, 5, 0); err != nil {
		t.Fatal(err)
	}
	// Commit 2 is only partly delivered (up to change 0), so it stays.
	if n, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil); err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1: the webhook still needs commit 2 on", n, err)
	}
	if err := db.PauseWebhook(ctx, a, w.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil); err != nil || n != 4 {
		t.Fatalf("pruned %d (%v), want 4 (a paused webhook holds nothing)", n, err)
	}
	err := db.ResumeWebhook(ctx, a, w.ID, nil, byAdmin)
	if sluice.ErrorCode(err) != sluice.CodeGone || !strings.Contains(sluice.ErrorMessage(err), "commits up to 5") {
		t.Fatalf("resume past pruned history = %v, want Gone naming the pruned commits", err)
	}
	got, err := db.Webhook(ctx, a, w.ID)
	if err != nil || got.State != sluice.WebhookPaused {
		t.Fatalf("after a refused resume: %+v, %v; want it still paused", got, err)
	}
	from := sluice.Position{Epoch: a.Epoch, Seq: 5, Index: sluice.WholeCommit}
	if err := db.ResumeWebhook(ctx, a, w.ID, &from, byAdmin); err != nil {
		t.Fatalf("resume from the oldest retained position: %v", err)
	}
	if got, err = db.Webhook(ctx, a, w.ID); err != nil || got.State != sluice.WebhookActive || got.Position != from {
		t.Fatalf("resumed: %+v, %v; want active at %s", got, err, from)
	}
	// Replays are checked the same way: not before retained history, not
	// ahead of the log, not of another epoch.
	for _, p := range []sluice.Position{{Epoch: a.Epoch, Seq: 4, Index: sluice.WholeCommit}, {Epoch: a.Epoch, Seq: 5, Index: 0}} {
		if err := db.ReplayWebhook(ctx, a, w.ID, p, byAdmin); sluice.ErrorCode(err) != sluice.CodeGone {
			t.Errorf("replay from %s = %v, want Gone", p, err)
		}
	}
	if err := db.ReplayWebhook(ctx, a, w.ID, sluice.Position{Epoch: a.Epoch, Seq: 7, Index: 0}, byAdmin); sluice.ErrorCode(err) != sluice.CodeInvalid {
		t.Errorf("replay ahead of the log = %v, want BadRequest", err)
	}
	if err := db.ReplayWebhook(ctx, a, w.ID, sluice.Position{Epoch: "other", Seq: 5, Index: sluice.WholeCommit}, byAdmin); sluice.ErrorCode(err) != sluice.CodeGone {
		t.Errorf("replay from another epoch = %v, want Gone", err)
	}
}

// TestWebhookCapAndLease: a database holds at most its cap of webhooks;
// the lease has one holder at a time, whose generation fences deliveries.
func TestWebhookCapAndLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	a, _ := noteDatabase(t, db, "capped")
	seal := func(int64) ([]byte, error) { return []byte("x"), nil }
	for i := range 3 {
		w := &sluice.Webhook{Database: a, URL: "https://example.com/", Ops: []string{"create"}, Batch: sluice.BatchEvent, CreatorID: 1, CreatorName: "admin"}
		err := db.CreateWebhook(ctx, w, seal, 2, 0)
		if i < 2 && err != nil || i == 2 && sluice.ErrorCode(err) != sluice.CodeConflict {
			t.Fatalf("webhook %d of a cap of 2: %v", i+1, err)
		}
	}
	// Other tests of this package share no lease: each test has its own
	// database.
	gen, ok, err := db.AcquireWebhookLease(ctx, "one", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire a free lease: %v %v", ok, err)
	}
	if _, ok, err := db.AcquireWebhookLease(ctx, "two", time.Minute); err != nil || ok {
		t.Fatalf("a second holder took a running lease: %v %v", ok, err)
	}
	ws, err := db.Webhooks(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	p := sluice.Position{Epoch: a.Epoch, Seq: 0, Index: sluice.WholeCommit}
	if ok, err := db.AdvanceWebhook(ctx, w.ID, w.Version, w.UpdatedAt, gen+1, p); err != nil || ok {
		t.Fatalf("a write under another generation was recorded: %v %v", ok, err)
	}
	if ok, err := db.AdvanceWebhook(ctx, w.ID, w.Version, w.UpdatedAt, gen, p); err != nil || !ok {
		t.Fatalf("a write under the lease's generation was refused: %v %v", ok, err)
	}
	if err := db.ReleaseWebhookLease(ctx, "one", gen); err != nil {
		t.Fatal(err)
	}
	gen2, ok, err := db.AcquireWebhookLease(ctx, "two", time.Minute)
	if err != nil || !ok || gen2 != gen+1 {
		t.Fatalf("take over a released lease: gen %d ok %v %v; want %d", gen2, ok, err, gen+1)
	}
	if ok, err := db.AdvanceWebhook(ctx, w.ID, w.Version, w.UpdatedAt, gen, p); err != nil || ok {
		t.Fatalf("the previous holder's write was recorded after the takeover: %v %v", ok, err)
	}
	if ok, err := db.RenewWebhookLease(ctx, "one", gen, time.Minute); err != nil || ok {
		t.Fatalf("the previous holder renewed: %v %v", ok, err)
	}
}

// TestPruneRacesWebhookMoves: a prune that read the active webhooks'
// positions and then deleted, in the same transaction, raced a resume, a
// replay and a creation with after (found by review: a webhook resumed at
// 2 while a prune of commits up to 5 ran was left active at 2, pruned_seq
// 5, with a gap it would never deliver). Here the prune is held up after
// it read them (a second connection locks commit 1), the three are made
// meanwhile, and then it goes on: each either comes before the prune,
// which then keeps what it needs, or after it, and answers Gone; never is
// an active webhook left before the pruned history.
func TestPruneRacesWebhookMoves(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, url := migratedDB(ctx, t)
	a, s := noteDatabase(t, db, "racing")
	commitN(t, db, a, s, 6)
	seal := func(int64) ([]byte, error) { return []byte("sealed secret"), nil }
	at := func(seq int64) sluice.Position {
		return sluice.Position{Epoch: a.Epoch, Seq: seq, Index: sluice.WholeCommit}
	}
	hook := func(p sluice.Position) *sluice.Webhook {
		return &sluice.Webhook{Database: a, URL: "https://example.com/", Ops: []string{"create"}, Batch: sluice.BatchEvent,
			CreatorID: 1, CreatorName: "admin", Position: p}
	}
	paused, active := hook(at(2)), hook(at(6))
	for _, w := range []*sluice.Webhook{paused, active} {
		if err := db.CreateWebhook(ctx, w, seal, 5, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.PauseWebhook(ctx, a, paused.ID); err != nil {
		t.Fatal(err)
	}

	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	lock, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background()) //nolint:errcheck // released below
	if _, err := lock.Exec(ctx, "SELECT 1 FROM sluice.commits WHERE db_id = $1 AND seq = 1 FOR UPDATE", a.ID); err != nil {
		t.Fatal(err)
	}
	waiting := lockWaiters(ctx, t, url)
	pruned := make(chan error, 1)
	go func() {
		_, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil)
		pruned <- err
	}()
	eventually.True(t, 30*time.Second, "the prune waits for commit 1", func() bool { return waiting() == 1 })

	created := hook(at(2))
	moves := map[string]func() error{
		"resume":         func() error { return db.ResumeWebhook(ctx, a, paused.ID, nil, byAdmin) },
		"replay":         func() error { return db.ReplayWebhook(ctx, a, active.ID, at(2), byAdmin) },
		"create after 2": func() error { return db.CreateWebhook(ctx, created, seal, 5, 0) },
	}
	type outcome struct {
		name string
		err  error
	}
	done := make(chan outcome, len(moves))
	var finished atomic.Int32
	for name, move := range moves {
		go func() {
			err := move()
			finished.Add(1)
			done <- outcome{name, err}
		}()
	}
	// Each has finished (it came first) or waits for the prune.
	eventually.True(t, 30*time.Second, "the moves finish or wait", func() bool {
		return int(finished.Load())+waiting()-1 == len(moves)
	})
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(60 * time.Second)
	select {
	case err := <-pruned:
		if err != nil {
			t.Fatalf("prune: %v", err)
		}
	case <-deadline:
		t.Fatal("the prune did not end within 60s")
	}
	for range moves {
		select {
		case o := <-done:
			if o.err != nil && sluice.ErrorCode(o.err) != sluice.CodeGone {
				t.Errorf("%s: %v, want done or Gone", o.name, o.err)
			}
			t.Logf("%s: %v", o.name, o.err)
		case <-deadline:
			t.Fatal("a move did not end within 60s")
		}
	}
	var prunedSeq int64
	if err := locker.QueryRow(ctx, "SELECT pruned_seq FROM sluice.commit_counters WHERE db_id = $1", a.ID).Scan(&prunedSeq); err != nil {
		t.Fatal(err)
	}
	ws, err := db.Webhooks(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		t.Logf("webhook %d: %s at %s; pruned up to %d", w.ID, w.State, w.Position, prunedSeq)
		if w.State == sluice.WebhookActive && (w.Position.Seq < prunedSeq || w.Position.Seq == prunedSeq && w.Position.Index != sluice.WholeCommit) {
			t.Errorf("webhook %d is active at %s, but commits up to %d were pruned", w.ID, w.Position, prunedSeq)
		}
	}
}

// TestPruneRacesDatabaseDeletion: a prune and the deletion of a database
// (a write of another database, the system one, that deletes it, and
// locks its own counter row at its commit) both succeed: a prune holds
// one database's counter row at a time. Holding every one it pruned until
// its end, it took the deleting database's, then waited for the deleted
// one's, which the deletion held while it waited for its own: Postgres
// broke the deadlock by failing one of them.
func TestPruneRacesDatabaseDeletion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, url := migratedDB(ctx, t)
	sys, s := noteDatabase(t, db, "sys") // the lower id: pruned first
	victim := &sluice.Database{Org: "o", Name: "victim"}
	if _, err := db.Write(ctx, postgres.WriteSpec{Before: func(ctx context.Context, tx *postgres.Tx) error {
		return tx.CreateDatabase(ctx, victim, s, postgres.Creator{})
	}}); err != nil {
		t.Fatal(err)
	}
	commitN(t, db, sys, s, 3)
	commitN(t, db, victim, s, 3)

	waiting := lockWaiters(ctx, t, url)
	deleted, release := make(chan struct{}), make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, postgres.WriteSpec{Database: sys, Schema: s, Meta: postgres.CommitMeta{User: "admin"},
			Before: func(ctx context.Context, tx *postgres.Tx) error {
				if err := tx.DeleteDatabase(ctx, victim); err != nil {
					return err
				}
				close(deleted)
				<-release
				return nil
			},
			Documents: func(ctx context.Context, w *postgres.Writer) error {
				return w.Insert(ctx, []*sluice.Document{{ID: "Note/last", Type: "Note", Fields: map[string]any{"text": "x"}}})
			}})
		wrote <- err
	}()
	<-deleted
	pruned := make(chan error, 1)
	go func() {
		_, err := db.Prune(ctx, time.Now().Add(time.Minute), 0, nil)
		pruned <- err
	}()
	eventually.True(t, 30*time.Second, "the prune waits for the deleted database's counter row", func() bool { return waiting() == 1 })
	close(release)
	werr, perr := <-wrote, <-pruned
	t.Logf("write: %v; prune: %v", werr, perr)
	if werr != nil {
		t.Errorf("the write that deleted a database: %v", werr)
	}
	if perr != nil {
		t.Errorf("the prune: %v", perr)
	}
	h, err := db.History(ctx, sys.ID)
	if err != nil || h.PrunedSeq != 2 {
		t.Errorf("the system database after the prune: %+v (%v)", h, err)
	}
}

// olderAcquire and olderRelease are how binaries of schema version 16 to
// 21 take and end the deliverer lease (AcquireWebhookLease before
// migration 25): they move the generation alone. Such a holder notices a
// change of a webhook only when ActiveWebhooks' version of it moves.
const (
	olderAcquire = `UPDATE sluice.webhook_lease SET holder = $1, generation = generation + 1,
			expires_at = now() + make_interval(secs => $2)
		WHERE expires_at <= now() RETURNING generation`
	olderRelease = `UPDATE sluice.webhook_lease SET expires_at = now() WHERE holder = $1 AND generation = $2`
)

// TestSettingsChangeMovesTheVersionUnderAnOlderHolder: during a rolling
// upgrade, a PATCH or a secret rotation made through this binary while a
// binary of schema version 21 or older holds the deliverer lease moves
// the webhook's version, which that holder watches (found by review: only
// updated_at moved, and the older holder went on with the old URL, secret
// and filter until its loop started over); while this binary's kind holds
// it, the version stays (a request in flight is let finish), and a pause
// moves it whoever holds it. A takeover by an older binary waits for a
// change under way, so that its loops read the webhook after it.
func TestSettingsChangeMovesTheVersionUnderAnOlderHolder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, url := migratedDB(ctx, t)
	a, _ := noteDatabase(t, db, "upgrading")
	w := &sluice.Webhook{Database: a, URL: "https://example.com/old", Ops: []string{"create"}, Batch: sluice.BatchEvent,
		CreatorID: 1, CreatorName: "admin"}
	seal := func(int64) ([]byte, error) { return []byte("sealed secret"), nil }
	if err := db.CreateWebhook(ctx, w, seal, 5, 0); err != nil {
		t.Fatal(err)
	}
	older, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close(context.Background())
	// version is what a holder's manager compares: ActiveWebhooks'.
	version := func() int64 {
		t.Helper()
		refs, err := db.ActiveWebhooks(ctx)
		if err != nil || len(refs) != 1 {
			t.Fatalf("active webhooks: %v %v", refs, err)
		}
		return refs[0].Version
	}
	patch := func(url string) error {
		return db.UpdateWebhook(ctx, a, w.ID, func(*sluice.Webhook) (postgres.WebhookSettings, error) {
			return postgres.WebhookSettings{URL: url, Ops: []string{"create"}, Batch: sluice.BatchEvent, Creator: byAdmin}, nil
		})
	}
	rotate := func() error {
		_, err := db.RotateWebhookSecret(ctx, a, w.ID, seal, time.Hour, byAdmin)
		return err
	}

	var gen int64
	if err := older.QueryRow(ctx, olderAcquire, "older", 60).Scan(&gen); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func() error{"PATCH": func() error { return patch("https://example.com/new") }, "rotation": rotate} {
		before := version()
		if err := change(); err != nil {
			t.Fatal(err)
		}
		if v := version(); v == before {
			t.Errorf("a %s under an older holder left the version at %d: that holder does not notice it", name, v)
		}
	}
	if _, err := older.Exec(ctx, olderRelease, "older", gen); err != nil {
		t.Fatal(err)
	}

	newer, ok, err := db.AcquireWebhookLease(ctx, "newer", time.Minute)
	if err != nil || !ok {
		t.Fatalf("take the released lease: %v %v", ok, err)
	}
	for name, change := range map[string]func() error{"PATCH": func() error { return patch("https://example.com/newer") }, "rotation": rotate} {
		before, err := db.Webhook(ctx, a, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := change(); err != nil {
			t.Fatal(err)
		}
		after, err := db.Webhook(ctx, a, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if after.Version != before.Version || !after.UpdatedAt.After(before.UpdatedAt) {
			t.Errorf("a %s under this binary's holder: version %d to %d, updated_at %s to %s; want the version kept and updated_at moved",
				name, before.Version, after.Version, before.UpdatedAt, after.UpdatedAt)
		}
	}
	before := version()
	if err := db.PauseWebhook(ctx, a, w.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.ResumeWebhook(ctx, a, w.ID, nil, byAdmin); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != before+2 {
		t.Errorf("a pause and a resume moved the version from %d to %d, want %d", before, v, before+2)
	}

	// The lease runs out with this binary's holder as the last one, and a
	// PATCH is under way (held up by a lock on the webhook's row) when an
	// older binary takes over: the takeover waits for it.
	if err := db.ReleaseWebhookLease(ctx, "newer", newer); err != nil {
		t.Fatal(err)
	}
	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	lock, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background()) //nolint:errcheck // released below
	if _, err := lock.Exec(ctx, "SELECT 1 FROM sluice.webhooks WHERE id = $1 FOR UPDATE", w.ID); err != nil {
		t.Fatal(err)
	}
	waiting := lockWaiters(ctx, t, url)
	patched := make(chan error, 1)
	go func() { patched <- patch("https://example.com/during-takeover") }()
	eventually.True(t, 30*time.Second, "the PATCH waits for the webhook's row", func() bool { return waiting() == 1 })
	took := make(chan error, 1)
	go func() { took <- older.QueryRow(ctx, olderAcquire, "older", 60).Scan(&gen) }()
	eventually.True(t, 30*time.Second, "the older binary's takeover waits for the PATCH", func() bool { return waiting() == 2 })
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-patched; err != nil {
		t.Fatal(err)
	}
	if err := <-took; err != nil {
		t.Fatal(err)
	}
	// What the older holder's loop reads once it holds the lease.
	var got string
	if err := older.QueryRow(ctx, "SELECT url FROM sluice.webhooks WHERE id = $1", w.ID).Scan(&got); err != nil || got != "https://example.com/during-takeover" {
		t.Fatalf("the older holder reads url %q (%v) after its takeover, want the PATCH's", got, err)
	}
}

// migratedDB opens a fresh Postgres database, migrated, closed when the
// test ends, and returns it with its URL.
func migratedDB(ctx context.Context, t *testing.T) (*postgres.DB, string) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	db, err := postgres.Open(ctx, url, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return db, url
}

// lockWaiters returns a count of the sessions of url's database waiting
// for a lock, read on a connection of its own (in a transaction,
// pg_stat_activity answers what it did first), closed when the test ends.
func lockWaiters(ctx context.Context, t *testing.T, url string) func() int {
	t.Helper()
	watcher, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watcher.Close(context.Background()) })
	return func() int {
		var n int
		if err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

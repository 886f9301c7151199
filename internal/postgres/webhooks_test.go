package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice"
)

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
	err := db.ResumeWebhook(ctx, a, w.ID, nil)
	if sluice.ErrorCode(err) != sluice.CodeGone || !strings.Contains(sluice.ErrorMessage(err), "commits up to 5") {
		t.Fatalf("resume past pruned history = %v, want Gone naming the pruned commits", err)
	}
	got, err := db.Webhook(ctx, a, w.ID)
	if err != nil || got.State != sluice.WebhookPaused {
		t.Fatalf("after a refused resume: %+v, %v; want it still paused", got, err)
	}
	from := sluice.Position{Epoch: a.Epoch, Seq: 5, Index: sluice.WholeCommit}
	if err := db.ResumeWebhook(ctx, a, w.ID, &from); err != nil {
		t.Fatalf("resume from the oldest retained position: %v", err)
	}
	if got, err = db.Webhook(ctx, a, w.ID); err != nil || got.State != sluice.WebhookActive || got.Position != from {
		t.Fatalf("resumed: %+v, %v; want active at %s", got, err, from)
	}
	// Replays are checked the same way: not before retained history, not
	// ahead of the log, not of another epoch.
	for _, p := range []sluice.Position{{Epoch: a.Epoch, Seq: 4, Index: sluice.WholeCommit}, {Epoch: a.Epoch, Seq: 5, Index: 0}} {
		if err := db.ReplayWebhook(ctx, a, w.ID, p); sluice.ErrorCode(err) != sluice.CodeGone {
			t.Errorf("replay from %s = %v, want Gone", p, err)
		}
	}
	if err := db.ReplayWebhook(ctx, a, w.ID, sluice.Position{Epoch: a.Epoch, Seq: 7, Index: 0}); sluice.ErrorCode(err) != sluice.CodeInvalid {
		t.Errorf("replay ahead of the log = %v, want BadRequest", err)
	}
	if err := db.ReplayWebhook(ctx, a, w.ID, sluice.Position{Epoch: "other", Seq: 5, Index: sluice.WholeCommit}); sluice.ErrorCode(err) != sluice.CodeGone {
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
	if ok, err := db.AdvanceWebhook(ctx, w.ID, w.Version, gen+1, p); err != nil || ok {
		t.Fatalf("a write under another generation was recorded: %v %v", ok, err)
	}
	if ok, err := db.AdvanceWebhook(ctx, w.ID, w.Version, gen, p); err != nil || !ok {
		t.Fatalf("a write under the lease's generation was refused: %v %v", ok, err)
	}
	if err := db.ReleaseWebhookLease(ctx, "one", gen); err != nil {
		t.Fatal(err)
	}
	gen2, ok, err := db.AcquireWebhookLease(ctx, "two", time.Minute)
	if err != nil || !ok || gen2 != gen+1 {
		t.Fatalf("take over a released lease: gen %d ok %v %v; want %d", gen2, ok, err, gen+1)
	}
	if ok, err := db.AdvanceWebhook(ctx, w.ID, w.Version, gen, p); err != nil || ok {
		t.Fatalf("the previous holder's write was recorded after the takeover: %v %v", ok, err)
	}
	if ok, err := db.RenewWebhookLease(ctx, "one", gen, time.Minute); err != nil || ok {
		t.Fatalf("the previous holder renewed: %v %v", ok, err)
	}
}

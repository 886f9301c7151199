package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestRetentionByPostgresClock: a replica whose clock is ahead (a host
// whose time drifted, a VM resumed from a pause) prunes the log the
// replicas share by the age of each commit on Postgres' clock, which
// stamped it, not on its own. It measured the age on its own clock, so a
// replica 200 hours ahead, of the default retention (168 h), pruned every
// commit but the newest, minutes after they were made: resumes and reads
// of the past answered Gone for history every replica promised to keep.
// Here commit 1 is really older than the retention (backdated), commits 2
// and 3 are new: only commit 1 may go.
func TestRetentionByPostgresClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := dt.Start(t, func(c *config.Config) { c.LogRetention = 0 }) // prunes nothing
	a.CreateDatabase(t, "ret", "type Note { text: String }")
	for _, id := range []string{"a", "b", "c"} {
		a.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/ret", `{"@type":"Note","@id":"`+id+`","text":"x"}`)
	}
	pg, err := pgx.Connect(ctx, a.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	if _, err := pg.Exec(ctx, `UPDATE sluice.commits SET committed_at = now() - interval '200 hours'
		WHERE seq = 1 AND db_id = (SELECT id FROM sluice.databases WHERE org = 'admin' AND name = 'ret')`); err != nil {
		t.Fatal(err)
	}

	ahead := func() time.Time { return time.Now().Add(200 * time.Hour) }
	dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, Now: ahead},
		dt.WithDatabaseURL(a.DatabaseURL), func(c *config.Config) { c.LogRetention = 168 * time.Hour })
	pruned := func() int64 {
		var seq int64
		if err := pg.QueryRow(ctx, `SELECT c.pruned_seq FROM sluice.commit_counters c JOIN sluice.databases d ON d.id = c.db_id
			WHERE d.org = 'admin' AND d.name = 'ret'`).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		return seq
	}
	// Its prune at start removes the old commit (and, by its own clock,
	// commit 2 in the same statement).
	eventually.True(t, 30*time.Second, "the replica's prune at start", func() bool { return pruned() > 0 })
	if got := pruned(); got != 1 {
		t.Fatalf("the log was pruned up to commit %d; want 1 (commits 2 and 3 are minutes old)", got)
	}
}

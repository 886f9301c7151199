package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/engine"
)

// TestFarEventsCountTheLogOnce: a stream resumed from far back reads its
// events as of their commits (ReadAsOfEvent) in order, and the first of
// them are further back from the head than max_past_changes. The first
// such event counts the log, and finds the oldest commit a read as of
// reaches; the others before that commit run no statement at all (each
// counted up to max_past_changes + 2 commits' rows before). Events from
// that commit on are read, and stay so until the head moves past them:
// a reachable event is never refused for what the first one found, nor
// for what was found at a head a failover has since taken back.
func TestFarEventsCountTheLogOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log, admin := newEngineLogged(t)
	e.LimitPast(3)
	if _, err := e.CreateDatabase(ctx, admin, engine.NewDatabase{Org: "admin", Name: "far", Schema: "type P { n: Int }"}); err != nil {
		t.Fatal(err)
	}
	var ends []sluice.Position // ends[i]: the end of commit i+1, of one change
	write := func(n int) {
		t.Helper()
		for range n {
			res, err := e.Insert(ctx, admin, "admin", "far", &docs{{"@type": "P", "@id": fmt.Sprintf("p%d", len(ends)), "n": len(ends)}}, engine.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ends = append(ends, res.Commit.End())
		}
	}
	write(10)
	d, cur, err := e.Database(ctx, admin, "admin", "far", sluice.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	// read reads event i (of commit i+1) as of its commit, and returns
	// whether it was too far back, and the statements that counted the
	// log (PastRange, OldestPast: their window over the commits' rows).
	read := func(i int) (far bool, counts int) {
		t.Helper()
		log.take()
		rctx, snap := e.ReadSnapshot(ctx, d)
		_, err := e.ReadAsOfEvent(rctx, d, cur, sluice.RoleAdmin, snap, "commit", ends[i])
		snap.Close()
		var pre *engine.PastRangeError
		if errors.As(err, &pre) {
			if pre.Most != 3 || pre.What != "changes" {
				t.Errorf("event of commit %d: %v, want more than 3 changes", i+1, pre)
			}
			far = true
		} else if err != nil {
			t.Fatalf("event of commit %d: %v", i+1, err)
		}
		for _, s := range log.take() {
			if strings.Contains(s, "OVER w") {
				counts++
			}
		}
		return far, counts
	}
	// Commits 1 to 6 are followed by more than 3 changes, 7 to 10 by 3
	// at most.
	counts := 0
	for i := range 10 {
		far, n := read(i)
		if far != (i < 6) {
			t.Errorf("event of commit %d: too far %v, want %v", i+1, far, i < 6)
		}
		if i > 0 && i < 6 && n != 0 {
			t.Errorf("event of commit %d, before the oldest one found reachable, counted the log %d times, want none", i+1, n)
		}
		counts += n
	}
	// The first event's count and the search for the oldest reachable
	// commit, then one count for each of the four events read.
	if counts != 6 {
		t.Errorf("the 10 events counted the log %d times, want 6", counts)
	}
	// Two more commits: commits 7 and 8 are now too far back, 9 and 10
	// not; commit 3 still is.
	write(2)
	for _, c := range []struct {
		commit int
		far    bool
	}{{3, true}, {7, true}, {8, true}, {9, false}, {10, false}, {12, false}} {
		if far, _ := read(c.commit - 1); far != c.far {
			t.Errorf("with the head at commit 12, event of commit %d: too far %v, want %v", c.commit, far, c.far)
		}
	}
	// A Postgres failover to a standby that lacked commits 10 to 12
	// (here their rows deleted and the counter set back) moves the head
	// back to commit 9, one change after commit 8. The first read that
	// counts the log sees the head behind the one commits 1 to 8 were
	// found too far back from, and forgets that: commit 8 is counted,
	// and read.
	pg, err := pgx.Connect(ctx, log.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	for _, sql := range []string{
		"WITH gone AS (DELETE FROM sluice.commits WHERE db_id = $1 AND seq > 9 RETURNING uid) DELETE FROM sluice.changes WHERE commit_uid IN (SELECT uid FROM gone)",
		"UPDATE sluice.commit_counters SET last_seq = 9 WHERE db_id = $1",
	} {
		if _, err := pg.Exec(ctx, sql, d.ID); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, c := range []struct {
		commit int
		far    bool
	}{{9, false}, {8, false}, {6, false}, {5, true}} {
		if far, _ := read(c.commit - 1); far != c.far {
			t.Errorf("with the head back at commit 9, event of commit %d: too far %v, want %v", c.commit, far, c.far)
		}
	}
}

package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestCutConnectionsKeepStreams: connections of the replica's pool that
// Postgres ended (pg_terminate_backend by an operator, a proxy or a
// pooler closing them) while Postgres itself answers are not an outage.
// The change feed's next read ran on one of them, failed as if Postgres
// were unreachable, and every open stream of the replica ended with
// api:Unavailable, all its clients reconnecting at once. A read that
// fails so is now tried again on new connections first: here the stream
// receives every commit, whatever connections were cut in between.
func TestCutConnectionsKeepStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dt.Start(t)
	d.CreateDatabase(t, "cut", "type Note { text: String }")
	s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/cut/Note"})
	s.Next() // : connected
	pg, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	pool := func(action string) int {
		var n int
		if err := pg.QueryRow(ctx, `SELECT count(*) FILTER (WHERE `+action+`) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'sluice'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 3 {
		// Every connection of the replica's pool is cut; the change
		// feed's next poll finds it out, and the pool connects again.
		if n := pool("pg_terminate_backend(pid)"); n == 0 {
			t.Fatal("no connection of the pool to cut")
		}
		eventually.True(t, 10*time.Second, "a new connection of the pool", func() bool { return pool("true") > 0 })
		id := fmt.Sprintf("n%d", i)
		// The write may run on a cut connection too: it is refused
		// (503, nothing committed) and sent again, as a client would.
		eventually.True(t, 10*time.Second, "the write of "+id, func() bool {
			r := d.Do(t, dt.Admin(), "POST", "/api/document/admin/cut", `{"@type":"Note","@id":"`+id+`"}`)
			if r.Status != 200 && r.Status != 503 {
				t.Fatalf("write %s: %d %s", id, r.Status, r.Body)
			}
			return r.Status == 200
		})
		f := s.Event()
		if f.Field("event") != "entity.create" || !strings.Contains(f.Field("data"), `"Note/`+id+`"`) {
			t.Fatalf("after the connections were cut %d times, the stream sent %q, want the creation of Note/%s", i+1, f, id)
		}
	}
}

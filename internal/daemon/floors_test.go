package daemon_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/daemon"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
	"github.com/sluice-dev/sluice/internal/postgres"
)

// TestReplicaKeepingTheLogPublishesFloors: a replica whose log_retention
// is 0 (it keeps the whole log) prunes nothing, but shares the log with
// replicas that prune it. It published no floors, so their pruning
// removed what its streams still had to read, and a stream resumed on it
// (or one fallen behind) ended with "older than the retained history"
// though it was connected all along. Here a stream resumed on such a
// replica waits to read the log while another replica prunes it: the
// prune keeps what the stream needs, and the stream gets every event.
// The floors are published every hour here, and the resumed stream's
// at once all the same: a stream that resumes needs commits older than
// the floors published before it, and until the next publication another
// replica's prune could remove them (every 40 s, by default).
func TestReplicaKeepingTheLogPublishesFloors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	reading := 0
	armed := false // the live stream's reads go by
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	defer open() // before the daemon stops, which waits for the catch-ups
	d := dt.StartWith(t, daemon.Options{Version: "test", BcryptCost: 4, FloorsEvery: time.Hour,
		CatchUpRead: func(u *sluice.User) func() {
			mu.Lock()
			if !armed {
				mu.Unlock()
				return func() {}
			}
			reading++
			mu.Unlock()
			<-gate
			return func() {}
		}}, func(c *config.Config) { c.LogRetention = 0 })
	d.CreateDatabase(t, "fl", "type Note { text: String }")
	p0 := headPositionOf(t, d, "fl", "Note")
	// A live stream gets the commits once the process read them: the
	// stream resumed from p0 after that reads them from the log.
	live := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/fl/Note"})
	want := []string{"Note/a", "Note/b", "Note/c"}
	for _, id := range want {
		d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/fl", `{"@type":"Note","@id":"`+id+`","text":"x"}`)
	}
	if got := subjects(t, live, len(want)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the live stream received %v, want %v", got, want)
	}
	live.Close()
	mu.Lock()
	armed = true
	mu.Unlock()
	s := d.MustOpenStream(t, dt.Admin(), dt.StreamRequest{Path: "/api/subscribe/admin/fl/Note", Header: []string{"Last-Event-ID", p0}})
	eventually.True(t, dt.StreamWait, "the resumed stream waits to read the log", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return reading > 0
	})

	pg, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	from, err := strconv.ParseInt(strings.Split(p0, "-")[1], 10, 64)
	if err != nil {
		t.Fatalf("position %s: %v", p0, err)
	}
	eventually.True(t, 10*time.Second, "the replica publishes the floor of its resumed stream", func() bool {
		var floor *int64
		if err := pg.QueryRow(ctx, `SELECT min(f.seq) FROM sluice.stream_floors f JOIN sluice.databases d ON d.id = f.db_id
			WHERE d.org = 'admin' AND d.name = 'fl'`).Scan(&floor); err != nil {
			t.Fatal(err)
		}
		return floor != nil && *floor <= from
	})

	// Another replica, of a retention of a minute, prunes the log an
	// hour from now: everything but what the stream needs.
	other, err := postgres.Open(ctx, d.DatabaseURL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Prune(ctx, time.Now().Add(time.Hour), time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	open()
	if got := subjects(t, s, len(want)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the resumed stream received %v, want %v", got, want)
	}
}

// subjects returns the subjects of the next n events of REST stream s,
// failing the test if it ends with an error.
func subjects(t *testing.T, s *dt.Stream, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		f := s.Event()
		if f.Field("event") == "error" {
			t.Fatalf("the stream ended with %s", f)
		}
		if f.Field("id") == "" {
			continue // ": connected"
		}
		var e struct{ Subject string }
		if err := json.Unmarshal([]byte(f.Field("data")), &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Subject)
	}
	return got
}

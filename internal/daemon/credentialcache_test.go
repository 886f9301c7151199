package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestCredentialCatchUpHoldsUpNoOther: after an access change, the first
// request whose remembered credential is older reads the access log to
// vouch for the remembered credentials (internal/auth/cache.go). While
// that read is stuck (here: the access log locked, as a migration or a
// dead connection would hold it), a client with another remembered
// credential is answered, reading its own credential as it would without
// the cache; it waited for the stuck read, past its own context.
func TestCredentialCatchUpHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dt.Start(t)
	d.CreateDatabase(t, "cu", "type Note { text: String }")
	token := func(name string) (int64, string) {
		var tok struct {
			ID    int64  `json:"id"`
			Token string `json:"token"`
		}
		if err := json.Unmarshal(d.MustDo(t, 201, dt.Admin(), "POST", "/api/tokens", fmt.Sprintf(`{"name":%q}`, name)).Body, &tok); err != nil {
			t.Fatal(err)
		}
		return tok.ID, tok.Token
	}
	_, first := token("first")
	_, second := token("second")
	gone, goneSecret := token("gone")
	d.MustDo(t, 200, dt.Bearer(first), "GET", "/api/tokens", nil)
	d.MustDo(t, 200, dt.Bearer(second), "GET", "/api/tokens", nil)

	// The revocation of a third token, seen once its stream ended: the
	// change feed has read it, and reads the access log no more.
	s := d.MustOpenStream(t, dt.Bearer(goneSecret), dt.StreamRequest{Path: "/api/subscribe/admin/cu/Note"})
	d.MustDo(t, 200, dt.Admin(), "DELETE", fmt.Sprintf("/api/tokens/%d", gone), nil)
	s.Ended()

	pg, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	lock, err := pg.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, "LOCK TABLE sluice.access_changes IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			if err := lock.Rollback(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	defer release()

	get := func(secret string) <-chan int {
		out := make(chan int, 1)
		go func() {
			req, err := http.NewRequestWithContext(ctx, "GET", d.URL+"/api/tokens", nil)
			if err != nil {
				panic(err)
			}
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- 0
				return
			}
			resp.Body.Close()
			out <- resp.StatusCode
		}()
		return out
	}
	firstDone := get(first)
	watch, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	eventually.True(t, 20*time.Second, "the catch-up's read of the access log waits for the lock", func() bool {
		var n int
		err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%FROM sluice.access_changes WHERE version > $1 AND version <= $2 ORDER BY version%'`).Scan(&n)
		return err == nil && n > 0
	})
	select {
	case status := <-get(second):
		if status != 200 {
			t.Errorf("the other credential: status %d, want 200", status)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("the other credential waited for the stuck catch-up of the first")
	}
	select {
	case <-firstDone:
		t.Errorf("the first request was answered while the access log was locked")
	default:
	}
	release()
	if status := <-firstDone; status != 200 {
		t.Errorf("the first credential: status %d, want 200", status)
	}
}

package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestWebhookKeyFileTakesOver: a daemon started with
// webhook_secret_key_file seals again the secrets sealed with the key
// Sluice kept in Postgres, and deletes that key: deliveries are still
// signed with the secret shown at creation, across a second start with
// the file, and no key is left in Postgres.
func TestWebhookKeyFileTakesOver(t *testing.T) {
	t.Parallel()
	r := startReceiver(t)
	a := dt.Start(t, fastRetries)
	a.CreateDatabase(t, "keys", personSchema)
	createHook(t, a, r, "keys", "/k", fmt.Sprintf(`{"url":%q}`, r.url("/k")))
	// Delivery is at least once: a daemon stopped between the receiver's
	// answer and its record sends that delivery again after the restart,
	// so an event delivered before may come again (signed with the new
	// key, which checkVerified checks), but nothing else.
	delivered := map[string]bool{}
	deliver := func(d *dt.Daemon, name string) {
		t.Helper()
		insert(t, d, "keys", name)
		for {
			got := r.next(time.Minute)
			checkVerified(t, got)
			if len(got.Events) != 1 {
				t.Fatalf("delivery %+v, want one event", got)
			}
			subject := got.Events[0].Subject
			if subject == "Person/"+name {
				delivered[subject] = true
				return
			}
			if !delivered[subject] {
				t.Fatalf("delivery %+v, want the event of Person/%s", got, name)
			}
		}
	}
	deliver(a, "before")
	keys := func() int {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), a.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM sluice.settings WHERE key = 'webhook_secret_key'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := keys(); n != 1 {
		t.Fatalf("%d webhook keys in Postgres before the key file, want 1", n)
	}
	a.Stop(t)

	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "webhook.key")
	if err := os.WriteFile(file, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withFile := func(c *config.Config) { c.WebhookSecretKeyFile = file }
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL), fastRetries, withFile)
	deliver(b, "after")
	if n := keys(); n != 0 {
		t.Fatalf("%d webhook keys left in Postgres after a start with the key file, want 0", n)
	}
	b.Stop(t)
	c := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL), fastRetries, withFile)
	deliver(c, "again")
}

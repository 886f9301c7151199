package webhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestRequestInFlightEndsWithTheLeaseTerm: a deliverer whose renewal of
// its lease does not answer (Postgres cut off, a lock) abandons the
// request it has in flight once its reckoning of the lease's term runs
// out, as it does when a renewal fails: another replica may take the
// lease over then, and send that request, and the next ones, while this
// one is still on its way. The renewal waited with no bound but the
// statement timeout (none at all on a connection cut off), and the
// request went on for as long as webhook_timeout let it.
func TestRequestInFlightEndsWithTheLeaseTerm(t *testing.T) {
	t.Parallel()
	arrived, abandoned := make(chan struct{}, 10), make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		arrived <- struct{}{}
		<-r.Context().Done() // never answered: in flight until abandoned
		abandoned <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	d := dt.Start(t, func(c *config.Config) {
		c.WebhookAllowNetworks = loopback
		c.WebhookLeaseTTL = time.Second
		c.WebhookTimeout = 5 * time.Minute
		c.StatementTimeout = 5 * time.Minute
	})
	d.CreateDatabase(t, "held", personSchema)
	d.MustDo(t, 201, dt.Admin(), "POST", "/api/webhooks/admin/held", fmt.Sprintf(`{"url":%q}`, srv.URL+"/hook"))
	insert(t, d, "held", "a")
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("no request within 30s")
	}
	// Renewals wait for this transaction's lock on the lease's row from
	// now on.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM sluice.webhook_lease FOR SHARE"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-abandoned:
	case <-time.After(30 * time.Second):
		t.Fatal("the request was still in flight 30s after the deliverer's renewals stopped answering, with a lease of 1s")
	}
}

package daemon_test

import (
	"fmt"
	"sync"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestOrganizationAndDatabaseDeletedAtOnce: an organization and one of its
// databases deleted at the same moment, on two daemons of one Postgres,
// each at once after the other's request was sent: the organization's
// deletion succeeds, the database's succeeds or answers 404 (its
// organization's took it first), never another status, and nothing of
// the organization is left.
func TestOrganizationAndDatabaseDeletedAtOnce(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	for i := range 8 {
		org := fmt.Sprintf("o%d", i)
		a.MustDo(t, 201, dt.Admin(), "POST", "/api/organizations", `{"name":"`+org+`"}`)
		for _, db := range []string{"x", "y"} {
			a.MustDo(t, 201, dt.Admin(), "POST", "/api/db/"+org+"/"+db, `{"schema":"type Note { text: String }"}`)
		}
		var wg sync.WaitGroup
		var orgRes, dbRes dt.Response
		wg.Add(2)
		go func() { defer wg.Done(); orgRes = a.Do(t, dt.Admin(), "DELETE", "/api/organizations/"+org, nil) }()
		go func() { defer wg.Done(); dbRes = b.Do(t, dt.Admin(), "DELETE", "/api/db/"+org+"/y", nil) }()
		wg.Wait()
		if orgRes.Status != 200 {
			t.Errorf("%s: the organization's deletion: %d %s", org, orgRes.Status, orgRes.Body)
		}
		if dbRes.Status != 200 && dbRes.Status != 404 {
			t.Errorf("%s: the database's deletion: %d %s; want 200, or 404 once the organization's took it", org, dbRes.Status, dbRes.Body)
		}
		for _, d := range []*dt.Daemon{a, b} {
			if res := d.Do(t, dt.Admin(), "GET", "/api/db/"+org+"/x", nil); res.Status != 404 {
				t.Errorf("%s/x after its organization's deletion: %d %s", org, res.Status, res.Body)
			}
		}
	}
}

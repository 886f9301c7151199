package daemon_test

import (
	"strings"
	"testing"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestSchemaReadAfterAnotherReplicasChange: once a schema change has
// answered on one replica, another answers GET /api/schema and a dry run
// of a schema change with the new schema and version, though it had the
// database cached (for up to a second) from just before: answered from no
// table, they would otherwise show the schema before the change.
func TestSchemaReadAfterAnotherReplicasChange(t *testing.T) {
	t.Parallel()
	a := dt.Start(t)
	b := dt.Start(t, dt.WithDatabaseURL(a.DatabaseURL))
	a.CreateDatabase(t, "people", "type Person { name: String }")
	if got := string(b.MustDo(t, 200, dt.Admin(), "GET", "/api/schema/admin/people", nil).Body); strings.Contains(got, "email") {
		t.Fatalf("schema before the change: %s", got)
	}
	b.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/people?dry_run=true", "type Person { name: String }")
	a.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/people", "type Person { name: String email: String }")
	if got := string(b.MustDo(t, 200, dt.Admin(), "GET", "/api/schema/admin/people", nil).Body); !strings.Contains(got, "email") {
		t.Fatalf("the other replica's schema right after the change: %s", got)
	}
	got := string(b.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/people?dry_run=true", "type Person { name: String email: String }").Body)
	if !strings.Contains(got, `"schema_version":2`) || !strings.Contains(got, `"changes":[]`) {
		t.Fatalf("the other replica's dry run right after the change: %s", got)
	}
}

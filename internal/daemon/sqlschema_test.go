package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	dt "github.com/sluice-dev/sluice/internal/daemontest"
)

// TestSQLDependentsRefuseForcedSchemaChange: objects of another role that
// depend on a database's tables (a view over two columns, a temporary
// table of a class's row type) make a forced schema change that would
// drop those columns and that class answer 409 naming them, not 500, and
// are left as they are; once they are gone the change is made.
func TestSQLDependentsRefuseForcedSchemaChange(t *testing.T) {
	t.Parallel()
	d := dt.Start(t)
	d.CreateDatabase(t, "deps", "type Person { name: String age: Int pet: Pet }\ntype Pet { name: String }")
	w := newSQLWriter(t, d, "deps")
	app := pgx.Identifier{w.role + "_app"}.Sanitize()
	sqlExec(t, d.DatabaseURL, "CREATE SCHEMA "+app+" AUTHORIZATION "+pgx.Identifier{w.role}.Sanitize())
	sqlExec(t, w.url, "CREATE VIEW "+app+".v AS SELECT name, age FROM "+w.table("Person"))
	// A temporary table lasts as long as its session: this one's.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold, err := pgx.Connect(ctx, w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close(context.WithoutCancel(ctx))
	if _, err := hold.Exec(ctx, "CREATE TEMP TABLE hold (p "+w.table("Pet")+")"); err != nil {
		t.Fatal(err)
	}

	const next = "type Person { name: Int }" // name retyped; age, pet and Pet dropped
	r := d.Do(t, dt.Admin(), "PUT", "/api/schema/admin/deps?force=true", next)
	if body := string(r.Body); r.Status != 409 || !strings.Contains(body, "view "+w.role+"_app.v") || !strings.Contains(body, ".hold") {
		t.Fatalf("forced change under other roles' objects: %d %s, want 409 naming the view and the temporary table", r.Status, body)
	}
	// Nothing of theirs was dropped.
	sqlExec(t, w.url, "SELECT name, age FROM "+app+".v")
	if _, err := hold.Exec(ctx, "SELECT p FROM hold"); err != nil {
		t.Fatal(err)
	}

	sqlExec(t, w.url, "DROP VIEW "+app+".v")
	if _, err := hold.Exec(ctx, "DROP TABLE hold"); err != nil {
		t.Fatal(err)
	}
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/deps?force=true", next)
}
